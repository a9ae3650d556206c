"""Credential pairs: a secret with no shape of its own, found by the key id written next to it.

Some providers issue an id and a secret together: AWS (``AKIA…`` and 40 characters), Alibaba
Cloud (``LTAI…`` and 30), Tencent Cloud (``AKID…`` and 32), Twilio (an account SID ``AC…`` and
its 32-hex auth token; an API key ``SK…`` and its 32-character secret). The id has a prefix and
is masked wherever it appears (:mod:`memdir.redact._providers`); the secret is random
characters that no rule can tell from other data on their own. People paste the two together:
``id secret``, ``id:secret``, ``Client("AC…", "…")``, a JSON object, lines of an env file, a row
of the CSV a cloud console hands out. So where an id is found, a token of exactly its secret's
alphabet and length near it is masked too (under the pair's own name), when

* it is on the id's line or the line before or after (blank lines between do not count),
  within 160 characters;
* it stands alone: no token character (letter, digit, ``_ + / - =``) touches it, so a piece
  of a longer token, a path, a UUID or a file name ``<hex>.tar.gz`` is not one;
* it reads as generated: the hex token has letters and digits; the others mix upper and
  lower case and are not a ``CamelCasedName``;
* the words between it and the id (or before it on its line) do not name it as other data
  (``md5``, ``sha256``, ``etag``, ``request_id``, ``commit``, ``uuid``, 用户…) unless they also
  name a secret (``auth token``, ``SecretKey``), and it is not a checksum tool's listing
  (``<hex>  file.tar.gz``).

A key name that says "this is the secret" needs no id nearby: the assignment rules of
:mod:`memdir.redact._context` mask ``TWILIO_AUTH_TOKEN=…``, ``"accessKeySecret": "…"`` and
``--secret …``. AWS's ``aws_secret_access_key = …`` is this pair's own ``named`` form, so it
keeps the name ``aws_secret_key``.

A pair rule runs before the provider rules, while the id is still there to be found.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memdir.redact._engine import RedactionPattern, Span
from memdir.redact._providers import (
    ALIBABA_KEY,
    AWS_KEY_ID,
    TENCENT_KEY,
    TWILIO_ACCOUNT,
    TWILIO_KEY,
)
from memdir.redact._values import entropy

__all__ = ["PAIR_PATTERNS", "CredentialPair", "pair_pattern"]

REACH = 160
# What may not touch a secret: before it (``=`` may: ``secret=…``), and after it.
_BEFORE = r"A-Za-z0-9_+/.\-"
_AFTER = r"A-Za-z0-9_+/=\-"
_CAMEL = re.compile(r"[a-z]*(?:[A-Z][a-z]+)+")
# The words before a value: ASCII words, and runs of Chinese or Japanese (no spaces there).
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|[\u3040-\u30ff\u3400-\u9fff]+")
# Words that call a value something other than a secret; and those that call it one.
_DATA = re.compile(
    r"ids?|uuid|guid|sid|md5|sha\d*|hash(?:es)?|checksum|crc\d*|digest|etag|commit|rev|revision|"
    r"trace|span|request|requestid|correlation|nonce|salt|fingerprint|build|version|user|order|"
    r"customer|message|session|file|object",
    re.IGNORECASE,
)
_DATA_CJK = re.compile("用户|会话|订单|编号|序号|哈希|校验|提交|请求|版本|追踪|标识|流水|文件|消息")
_SECRETISH = re.compile(
    "secret|token|key|pass|pwd|auth|credential|密钥|秘钥|私钥|令牌|密码|口令|凭证|凭据",
    re.IGNORECASE,
)
# A checksum tool's listing: ``<hex>  name.ext`` or ``<hex> *name.ext``.
_LISTED = re.compile(r"(?: \*| {2})[\w./-]*\.[A-Za-z0-9]{1,8}(?![\w.])")
_LABEL_CHARS = 40


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialPair:
    """A provider's key id and the secret issued with it.

    Attributes:
        name: the mask of the secret (``[REDACTED:<name>]``).
        key_id: the provider rule that finds (and itself masks) the id.
        secret: a regex of the secret's alphabet and length.
        generated: whether a token of that shape reads as generated (not a word or data).
        named: a regex of a key name whose value is this secret wherever it stands (its
            keywords are the literals it starts with), e.g. ``aws_secret_access_key = ``.
        named_keywords: those literals.
    """

    name: str
    key_id: RedactionPattern
    secret: str
    generated: Callable[[str], bool]
    named: str = ""
    named_keywords: tuple[str, ...] = ()


def hex_token(value: str) -> bool:
    """A hex token of letters and digits with the spread of random hex."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and entropy(value) >= 3.0
    )


def mixed_token(value: str) -> bool:
    """Upper and lower case mixed as at random, not a ``CamelCasedName``."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and _CAMEL.fullmatch(value) is None
    )


def _not_hex(value: str) -> bool:
    return mixed_token(value) and re.fullmatch(r"[0-9a-fA-F]+", value) is None


def _window(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the id's secret may be: its line and the (non-blank) line before and after it,
    within reach."""
    lo, hi = max(0, start - REACH), min(len(text), end + REACH)
    brk = text.rfind("\n", lo, start)
    while brk >= 0:  # back over blank lines to the start of the line before
        prev = text.rfind("\n", lo, brk)
        if prev < 0 or text[prev + 1 : brk].strip():
            lo = max(lo, prev + 1)
            break
        brk = prev
    brk = text.find("\n", end, hi)
    while brk >= 0:  # on over blank lines to the end of the line after
        after = text.find("\n", brk + 1, hi)
        if after < 0 or text[brk + 1 : after].strip():
            hi = hi if after < 0 else after
            break
        brk = after
    return lo, hi


def _called_data(text: str, at: int, end: int, id_start: int, id_end: int) -> bool:
    """Whether the value at ``at:end`` is named as data by the words just before it (after the
    id, if it is on that line), or is a checksum listing's."""
    if _LISTED.match(text, end):
        return True
    line = text.rfind("\n", 0, at) + 1
    lo = max(line, at - _LABEL_CHARS)
    if id_end <= at and id_start >= line:
        lo = max(lo, id_end)
    words = _WORD.findall(text, lo, at)[-3:]
    if any(_SECRETISH.search(w) for w in words):
        return False
    return any(_DATA.fullmatch(w) or (not w.isascii() and _DATA_CJK.search(w)) for w in words)


def pair_pattern(pair: CredentialPair) -> RedactionPattern:
    """The rule that masks ``pair``'s secret next to its id (and after its key name)."""
    key_id = pair.key_id
    candidate = re.compile(rf"(?<![{_BEFORE}])(?:{pair.secret})(?![{_AFTER}])(?!\.[A-Za-z0-9])")
    regex = key_id.regex
    if pair.named:
        # ASCII-only case folding: the keyword gate compares ASCII (no "ſ" for "s").
        regex = rf"(?ai:{pair.named})(?P<v>{pair.secret})(?![{_AFTER}])|{regex}"

    def spans(match: re.Match[str]) -> Iterator[Span]:
        if pair.named and match["v"] is not None:
            yield match.span("v")
            return
        if key_id.check is not None and not key_id.check(match):
            return
        text, start, end = match.string, match.start(), match.end()
        lo, hi = _window(text, start, end)
        for found in candidate.finditer(text, lo, hi):
            a, b = found.span()
            if (
                (b <= start or a >= end)
                and pair.generated(found.group())
                and not _called_data(text, a, b, start, end)
            ):
                yield a, b

    # The id lies in a run of token characters of 16 or more, and so does a named key (it is
    # one word of at least 16 letters and underscores): their keywords are found in the runs.
    return RedactionPattern(
        name=pair.name,
        regex=regex,
        flags=key_id.flags,
        keywords=(*key_id.keywords, *pair.named_keywords),
        keyword_first=key_id.keyword_first,
        in_token=True,
        spans=spans,
    )


PAIRS: tuple[CredentialPair, ...] = (
    CredentialPair(
        name="aws_secret_key",
        key_id=AWS_KEY_ID,
        secret=r"[A-Za-z0-9/+]{40}",
        generated=_not_hex,
        named=r"aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?",
        named_keywords=("aws",),
    ),
    CredentialPair(
        name="alibaba_secret", key_id=ALIBABA_KEY, secret=r"[A-Za-z0-9]{30}", generated=mixed_token
    ),
    CredentialPair(
        name="tencent_secret", key_id=TENCENT_KEY, secret=r"[A-Za-z0-9]{32}", generated=mixed_token
    ),
    CredentialPair(
        name="twilio_auth_token", key_id=TWILIO_ACCOUNT, secret=r"[0-9a-f]{32}", generated=hex_token
    ),
    CredentialPair(
        name="twilio_key_secret",
        key_id=TWILIO_KEY,
        secret=r"[A-Za-z0-9]{32}",
        generated=mixed_token,
    ),
)
"""The built-in pairs (see the module docstring)."""

PAIR_PATTERNS: tuple[RedactionPattern, ...] = tuple(pair_pattern(p) for p in PAIRS)
