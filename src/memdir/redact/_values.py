"""Does a value look like a credential? Charset, length and entropy tests, no keyword lists.

A keyword before a value ("password", "token", 密码) says where a secret *may* be; these tests
say whether the value itself is one, so ``token = tokenizer.encode(text)``, ``PWD=/home/dana``
and "Reset password: click the link" keep their words. Three levels:

* :func:`literal` — a value someone typed, not a reference to one: no placeholder
  (``<your password>``, ``********``, ``changeme``), template (``${{ secrets.X }}``, ``$TOKEN``),
  code (``os.environ[...]``, ``self.token``), path, URL, number, boolean or type name.
* :func:`secret_like` — a literal that is not a plain word: mixed character classes, or long and
  random-looking (``hunter2``, ``Tr0ub4dor&3`` yes; ``click``, ``required`` no).
* :func:`random_like` — a literal that reads like generated key material (length ≥ 16, mixed
  classes, ≥ 3 bits of entropy per character).
"""

from __future__ import annotations

import math
import re
from collections import Counter

__all__ = ["entropy", "literal", "longest_run_is_random", "random_like", "secret_like"]

_MASK = "[REDACTED:"

# Values that say "no secret here": placeholders, type names, states, auth schemes.
# fmt: off
_PLACEHOLDERS = frozenset((
    "password", "passwd", "pass", "pwd", "secret", "token", "key", "apikey", "api_key", "api-key",
    "credentials", "credential", "changeme", "change_me", "change-me", "changeit", "secret123",
    "placeholder", "example", "sample", "dummy", "fake", "test", "testing", "todo", "tbd", "tba",
    "fixme", "none", "null", "nil", "undefined", "nan", "empty", "blank", "unset", "missing",
    "true", "false", "yes", "no", "on", "off", "enabled", "disabled", "enable", "disable",
    "required", "optional", "default", "hidden", "redacted", "masked", "removed", "omitted",
    "elided", "string", "str", "text", "int", "integer", "float", "number", "bool", "boolean",
    "object", "array", "list", "dict", "map", "bytes", "any", "basic", "bearer", "digest",
    "oauth", "oauth2", "oidc", "saml", "ldap", "kerberos", "jwt", "session", "cookie", "header",
    "anonymous", "public", "private", "internal", "external", "env", "environment", "file",
    "stdin", "prompt", "ask", "expired", "invalid", "valid", "revoked", "unknown", "n/a", "na",
    "flag", "option", "argument", "parameter", "value",
))
# fmt: on
_PLACEHOLDER_SHAPE = re.compile(
    r"(?:your|my|insert|enter|put|replace|example|sample|dummy|fake)[_ -][a-z_ -]+"
    r"|[a-z_ -]*(?:[_-]here|[_-]placeholder|[_-]example)"
    r"|([*xX•#.·_-])\1{2,}|\*+|x{3,}[a-z0-9]{0,4}",
    re.IGNORECASE,
)
_TEMPLATE = re.compile(r"^(?:\$|%\(|%[sd]$|\{\{|\{%|#\{|@\{|<)|\$\{|\$\(|\{\{|%\w+%")
_CODE = re.compile(r"[()\[\]]|^[A-Za-z_]+(?:\.[A-Za-z_]+)+$|^[A-Za-z_]\w*::")
_PATH = re.compile(r"^(?:~?/|\.\.?/|[A-Za-z]:\\|\\\\)")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{1,20}://")
_NUMBERISH = re.compile(r"^[\d.,:/+\-_ ]+$")
_SEPARATED_WORDS = re.compile(r"[a-z]+(?:[_-][a-z]+)+|[A-Z]+(?:[_-][A-Z]+)+")
_FILE_PATH = re.compile(r"(?:[\w.-]+/)+[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4}")  # uploads/x/a.png
_REF_PATH = re.compile(r"[A-Za-z][\w.-]*(?:/[A-Za-z][\w.-]*)+")  # prod/db/password, a/b.txt
_RUN = re.compile(r"[A-Za-z0-9]+")


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _classes(value: str) -> int:
    lower = upper = digit = other = 0
    for ch in value:
        if "a" <= ch <= "z":
            lower = 1
        elif "A" <= ch <= "Z":
            upper = 1
        elif "0" <= ch <= "9":
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


def _word(value: str) -> bool:
    """A word as people write one: lower, Title, camelCase with a few humps, snake or kebab."""
    if value.isascii() and value.isalpha():
        return sum(ch.isupper() for ch in value[1:]) <= 3
    return _SEPARATED_WORDS.fullmatch(value) is not None


def _is_ref_path(value: str) -> bool:
    if not _REF_PATH.fullmatch(value):
        return False
    return all(_word(part) for part in re.split(r"[/.]", value) if part)


def literal(value: str, *, quoted: bool = False) -> bool:
    """Whether ``value`` is a typed value rather than a placeholder, reference, code or data.

    A ``quoted`` value is a string literal, so brackets in it are not code.
    """
    if not value or value.startswith(_MASK):
        return False
    bare = value.strip("<>[](){}\"'`")
    low = bare.lower()
    return not (
        low in _PLACEHOLDERS
        or _PLACEHOLDER_SHAPE.fullmatch(bare) is not None
        or _TEMPLATE.search(value) is not None
        or (not quoted and _CODE.search(value) is not None)
        or _PATH.match(value) is not None
        or _FILE_PATH.fullmatch(value) is not None
        or _URL.match(value) is not None
        or _NUMBERISH.fullmatch(value) is not None
        or _is_ref_path(value)
    )


def secret_like(value: str, *, min_len: int = 8, quoted: bool = False) -> bool:
    """A literal of at least ``min_len`` characters that is not a plain word or number."""
    if len(value) < min_len or not literal(value, quoted=quoted) or _word(value):
        return False
    return _classes(value) >= 2 or (len(value) >= 16 and entropy(value) >= 3.0)


def random_like(value: str, *, min_len: int = 16, quoted: bool = False) -> bool:
    """A literal that reads like generated key material."""
    return (
        len(value) >= min_len
        and literal(value, quoted=quoted)
        and not _word(value)
        and _classes(value) >= 2
        and entropy(value) >= 3.0
    )


def longest_run_is_random(value: str, *, min_len: int = 16) -> bool:
    """Whether the longest letter-and-digit run of ``value`` is random-looking key material.

    ``sk-video-processing-2`` has only short word runs; ``sk-proj-Ab3dEf…`` has a long mixed one.
    """
    best = max(_RUN.findall(value), key=len, default="")
    return len(best) >= min_len and _classes(best) >= 2 and not _word(best)
