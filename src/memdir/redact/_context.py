"""Credentials known by their context: a keyword, a flag, a header, a URL, a file format.

A keyword says where a secret may be; the value decides (see :mod:`memdir.redact._values`).
How sure the context is sets the bar: a value typed into a config line (``KEY=value``, a
quoted string, ``key: value`` ending the line, ``.netrc``, a URL's user info, ``--password``)
is masked whenever it is a literal; a value in running prose ("the root password is …",
``密码是…``) only when it is not a plain word.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from memdir.redact._engine import MARK, RedactionPattern, Span
from memdir.redact._values import literal, random_like, secret_like

__all__ = ["CONTEXT_PATTERNS"]

_I = re.IGNORECASE

# Characters that end an unquoted value: space, quotes, brackets, and CJK text or punctuation
# (a password is not followed by its sentence without a space in Chinese or Japanese).
_STOP = r"\s\"'`<>,;\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
# An unquoted value: a run up to the next stop character, or to ``&name=`` (a URL's next query
# parameter). Possessive and unbounded, so it always ends where the run does: a match covers
# the whole run, and the keywords inside it are not tried again (``password=password=…`` costs
# one scan, not one per keyword). Trailing ``.:)]}`` (a sentence's) is cut off by :func:`_value`.
VALUE = rf"(?:[^{_STOP}&]|&(?![A-Za-z_][\w.-]*=))++"
QUOTED = r"(?<=[\"'])[^\"'\n]{1,300}?(?=[\"'])"
_TRAILING = ".:)]}"
Judge = Callable[[re.Match[str], str, int], bool]


def _value(judge: Judge) -> Callable[[re.Match[str]], Iterator[Span]]:
    """Spans for a pattern with a value group ``v``: the value less trailing punctuation,
    when ``judge(match, value, end of value)`` accepts it."""

    def spans(match: re.Match[str]) -> Iterator[Span]:
        start, end = match.span("v")
        value = match["v"]
        if not (start > 0 and match.string[start - 1] in "\"'"):
            value = value.rstrip(_TRAILING)
            end = start + len(value)
        if value and judge(match, value, end):
            yield start, end

    return spans


# Keyword families. The password family masks any literal where the context is sure; the
# token family needs a value that is not a word; a bare ``key`` needs key material. The short
# keywords must start a word: inside base64 (``AAAA+pw= 0…``) they are data, not a name.
_WORD_START = r"(?<![A-Za-z0-9+/])"
_PASSWORD = rf"passwords?|passwd|passphrase|passcode|{_WORD_START}(?:pass|pwd|pw)"
_TOKEN = (
    r"secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|"
    rf"client[_-]?secret|credentials?|authorization|{_WORD_START}auth"
)
_WEAK = rf"{_WORD_START}key"


def _JOINED(*words: str, sep: str = "_-") -> tuple[str, ...]:
    """``api_key``, ``api-key``, ``apikey``…: the literal spellings of ``<word>[_-]?key``."""
    tails = {"client": "secret"}
    return tuple(f"{w}{s}{tails.get(w, 'key')}" for w in words for s in ("", *sep))


_FAMILY_PASSWORD = re.compile(rf"(?:{_PASSWORD})", _I)
_FAMILY_WEAK = re.compile(r"key", _I)


def _family(keyword: str) -> str:
    if _FAMILY_PASSWORD.fullmatch(keyword):
        return "password"
    return "weak" if _FAMILY_WEAK.fullmatch(keyword) else "token"


def _accept(value: str, family: str, *, sure: bool, quoted: bool = False) -> bool:
    if family == "weak":
        return random_like(value, quoted=quoted)
    if family == "password":
        if sure:
            return literal(value, quoted=quoted) and len(value) >= 3
        return secret_like(value, min_len=6, quoted=quoted)
    return secret_like(value, min_len=6 if sure else 8, quoted=quoted)


_LINE_END = re.compile(r"[ \t]*(?:$|\n|#|//|[,}\])&\"'`])")


def _sure(match: re.Match[str], end: int, quoted: bool) -> bool:
    """Whether the value (ending at ``end``) is typed into a config line, not said in a sentence."""
    sep = match["sep"]
    if quoted or ("=" in sep and not sep.endswith((" ", "\t"))):  # a string, or KEY=value
        return True
    # ``key: value`` that ends the line (YAML, headers, "my password: …" as the last words)
    colon = any(c in sep for c in ":：=＝")
    return colon and _LINE_END.match(match.string, end) is not None


def _assignment(match: re.Match[str], value: str, end: int) -> bool:
    quoted = bool(match["q"])
    sure = _sure(match, end, quoted)
    return _accept(value, _family(match["kw"]), sure=sure, quoted=quoted)


ASSIGNMENT = RedactionPattern(
    # ``password=hunter2``, ``"api_key": "..."``, ``GITHUB_TOKEN=...``, ``token：…``; the key
    # must end in the keyword, so ``max_tokens=4000`` is left alone.
    name="assignment",
    regex=rf"(?P<kw>{_PASSWORD}|{_TOKEN}|{_WEAK})(?P<kq>[\"']?)"
    r"(?P<sep>[ \t]*(?::=|=>|[:=：＝])[ \t]*)(?P<q>[\"']?)"
    rf"(?P<v>{QUOTED}|{VALUE})",
    flags=_I,
    keywords=(
        "pass",
        "pw",
        "secret",
        "token",
        "key",
        "credential",
        "auth",
        *_JOINED("api", "access", "private", "client"),
    ),
    keyword_first=True,
    spans=_value(_assignment),
)


def _stated(match: re.Match[str], value: str, end: int) -> bool:
    return _accept(value, _family(match["kw"]), sure=False)


STATED = RedactionPattern(
    # "the root password is X", "password for the staging box was changed to X", "API key：X"
    name="stated_secret",
    regex=r"\b(?P<kw>passwords?|passwd|passphrase|passcode|pin|token|secret|"
    r"api[ _-]?key|access[ _-]?key|secret[ _-]?key)"
    r"(?:[ \t]+(?:for|of|on|to|at|in)(?:[ \t]+[^\s:]{1,40}){1,3}?)?"
    r"(?:[ \t]+(?:is|was|are|were|has[ \t]+been|will[ \t]+be)(?:[ \t]+(?:now|still))?"
    r"(?:[ \t]+(?:changed|set|reset|updated)[ \t]+to)?"
    r"|[ \t]+(?:changed|set|reset|updated)[ \t]+to|[ \t]*[:：])"
    r"[ \t]*[\"'`“]?"
    rf"(?P<v>{VALUE})",
    flags=_I,
    keywords=("pass", "pin", "token", "secret", *_JOINED("api", "access", sep=" _-")),
    keyword_first=True,
    spans=_value(_stated),
)

_CJK_PASSWORD = "密码|口令|密碼|パスワード|暗証番号|비밀번호|암호"
_CJK_TOKEN = "令牌|密钥|秘钥|私钥|金鑰|トークン|シークレット|토큰|시크릿"


def _cjk(match: re.Match[str], value: str, end: int) -> bool:
    family = "password" if re.fullmatch(_CJK_PASSWORD, match["kw"]) else "token"
    return _accept(value, family, sure=_sure(match, end, quoted=False))


CJK = RedactionPattern(
    # 密码：X, 数据库密码是 X, 访问令牌为X, パスワードは X です, 비밀번호: X, 비밀번호는 X
    name="cjk_secret",
    regex=rf"(?P<kw>{_CJK_PASSWORD}|{_CJK_TOKEN})"
    r"(?P<sep>[ \t]*(?:[:：=＝]|是|为|為|は|는|은)?[ \t]*)[\"'`「『“]?"
    rf"(?P<v>{VALUE})",
    keywords=tuple((_CJK_PASSWORD + "|" + _CJK_TOKEN).split("|")),
    keyword_first=True,
    spans=_value(_cjk),
)


_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}\Z")


def _url_password(match: re.Match[str]) -> bool:
    value = match["v"]
    if _SCHEME.search(match.string, max(0, match.start() - 21), match.start()) is None:
        return False
    return not value.startswith(MARK) and (literal(value) or value.isdigit())


URL_PASSWORD = RedactionPattern(
    # scheme://user:password@host, also with no user (redis://:pw@cache); the regex starts at
    # "://" (a fast scan) and the scheme before it is checked by the check.
    name="url_password",
    regex=r"://[^\s:/@]{0,200}:(?P<v>[^\s@/]{1,200})@",
    group="v",
    keywords=("://",),
    keyword_first=True,
    check=_url_password,
)


def _long_literal(match: re.Match[str]) -> bool:
    value = match["v"]
    return literal(value) and (len(value) >= 24 or secret_like(value, min_len=12))


BEARER = RedactionPattern(
    name="bearer_token",
    regex=r"(\b(?:bearer|authorization[ \t]*[:=][ \t]*[\"']?(?:token|api-?key|sso-key))\s+)"
    r"(?P<v>[A-Za-z0-9._~+/-]{12,}=*)",
    group="v",
    flags=_I,
    keywords=("bearer", "authorization"),
    keyword_first=True,
    check=_long_literal,
)

BASIC = RedactionPattern(
    name="basic_auth",
    regex=r"(\bauthorization\s*:\s*basic\s+)([A-Za-z0-9+/]{8,}=*)",
    group=2,
    flags=_I,
    keywords=("authorization",),
    keyword_first=True,
)


def _netrc(match: re.Match[str]) -> bool:
    return literal(match["v"]) or match["v"].isdigit()


NETRC = RedactionPattern(
    # .netrc: machine host login user password secret (on one line or several)
    name="netrc_password",
    regex=r"\b(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+)*\s+password\s+"
    r"(?P<v>\S+)",
    group="v",
    flags=_I,
    keywords=("machine", "default"),
    keyword_first=True,
    gate=r"password",
    check=_netrc,
)

_SESSIONISH = re.compile(
    r"sess|sid|token|auth|jwt|csrf|xsrf|remember|login|secret|key|credential", re.IGNORECASE
)
_COOKIE_PAIR = re.compile(r"(?:^|;)[ \t]*([!#$%&*+.^_|~0-9A-Za-z-]+)=([^;\s\"']+)")
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "partitioned", "version"}
)


def _cookie_spans(match: re.Match[str]) -> Iterator[Span]:
    base = match.start("rest")
    for pair in _COOKIE_PAIR.finditer(match["rest"]):
        name, value = pair[1], pair[2]
        if name.lower() in _COOKIE_ATTRIBUTES or value.startswith(MARK):
            continue
        if (_SESSIONISH.search(name) and len(value) >= 8 and literal(value)) or random_like(value):
            yield base + pair.start(2), base + pair.end(2)


COOKIE = RedactionPattern(
    # Cookie: sessionid=…; csrftoken=…  /  Set-Cookie: session=…; Path=/
    name="cookie",
    regex=r"\b(?:set-)?cookie[ \t]*:[ \t]*(?P<rest>[^\r\n\"']+)",
    flags=_I,
    keywords=("set-cookie", "cookie"),
    keyword_first=True,
    spans=_cookie_spans,
)


def _cli_spans(match: re.Match[str]) -> Iterator[Span]:
    groups = match.re.groupindex
    for group in ("mysql", "sshpass", "redis", "curl", "flag"):
        value = match[group] if group in groups else None
        if value is None:
            continue
        start, end = match.span(group)
        if value[:1] in "'\"" and len(value) >= 2 and value[-1] == value[0]:
            start, end, value = start + 1, end - 1, value[1:-1]
        keyword = match["fkw"] if group == "flag" else "password"
        family = _family(keyword) if group == "flag" else "password"
        if value.startswith("-") or not _accept(value, family, sure=True):
            return
        yield start, end


_ARG = r"(?:'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]+)"
CLI = RedactionPattern(
    # mysql -pX, sshpass -p X, redis-cli -a X, curl -u user:X
    name="cli_password",
    regex=r"mysql(?:dump|admin|sh|import|check|slap)?\b[^\n|;&]*?\s-p(?P<mysql>" + _ARG + ")"
    r"|sshpass\s+-p\s*(?P<sshpass>" + _ARG + ")"
    r"|redis-cli\b[^\n|;&]*?\s-a\s+(?P<redis>" + _ARG + ")"
    r"|curl\b[^\n|;&]*?\s(?:-u|--user)[\s=]+[\"']?[^\s:\"']*:(?P<curl>[^\s\"'@]+)",
    flags=_I,
    keywords=("mysql", "sshpass", "redis-cli", "curl"),
    keyword_first=True,
    spans=_cli_spans,
)
CLI_FLAG = RedactionPattern(
    # --password X, --password=X, -password X, --with-token X, --api-key=X
    name="cli_flag",
    regex=r"-(?<![\w-]-)-?(?:[a-z]+-)*(?P<fkw>password|passwd|pass|token|secret|api-?key|"
    r"access-key|secret-key|private-key|client-secret|auth-token)(?:=|[ \t]+)(?P<flag>"
    + _ARG
    + ")",
    flags=_I,
    keywords=("-pass", "-token", "-secret", "-api", "-access", "-private", "-client", "-auth"),
    spans=_cli_spans,
)

AZURE = (
    RedactionPattern(
        name="azure_storage_key",
        regex=r"(\bAccountKey\s*=\s*)([A-Za-z0-9+/]{40,100}={0,2})",
        group=2,
        flags=_I,
        keywords=("accountkey",),
        keyword_first=True,
    ),
    RedactionPattern(
        name="azure_shared_key",
        regex=r"(\bSharedAccess(?:Key|Signature)\s*=\s*)([A-Za-z0-9+/%]{20,100}={0,2})",
        group=2,
        flags=_I,
        keywords=("sharedaccess",),
        keyword_first=True,
    ),
    RedactionPattern(
        # Azure SAS sig=, S3 X-Amz-Signature= / X-Amz-Security-Token=, GCS X-Goog-Signature=
        name="url_signature",
        regex=r"([?&;](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)=)"
        r"([A-Za-z0-9%+/=_.-]{16,})",
        group=2,
        flags=_I,
        keywords=("sig", "signature", "security-token"),
    ),
)

# Order matters: assignments last, so a provider's own rule names the token when it has one.
CONTEXT_PATTERNS: tuple[RedactionPattern, ...] = (
    *AZURE,
    URL_PASSWORD,
    BEARER,
    BASIC,
    COOKIE,
    NETRC,
    CLI,
    CLI_FLAG,
    ASSIGNMENT,
    STATED,
    CJK,
)
