"""What ranking needs of a unit, computed once when the unit is stored.

The ranking (:mod:`memdir.index._rank`) scores a candidate by its length in tokens and the
positions of the query's words in it. Both are derived from the unit's text when it is
written and stored beside it: the token count, and the positions of every stemmed token as a
``tsvector`` literal (``'buy':3,17 'caroline':1``), which is what the PostgreSQL index keeps in
its ``tsvector`` column (:mod:`memdir.index._pg_terms`), so both stores rank from the same
values. A search reads the positions of its few words out of that text (one ``str.find`` per
word) instead of cutting every candidate's text into tokens again: its cost no longer grows
with the length of the lines.

Two to :data:`GRAM` CJK characters that are consecutive tokens are also stored as one lexeme
(the n-gram) at the first one's position (PostgreSQL looks Chinese words up by them). A lexeme
keeps at most :data:`MAX_POSITIONS` positions, each at most :data:`MAX_POSITION`: PostgreSQL's
own limits, applied here so that a SQLite index holds exactly what PostgreSQL would.
"""

from __future__ import annotations

import re
from functools import lru_cache

from memdir.index._forms import key_stems
from memdir.index._porter import stem
from memdir.index._text import CJK_CHARS, text_tokens

__all__ = [
    "GRAM",
    "LONG",
    "MAX_LEXEME",
    "MAX_POSITION",
    "MAX_POSITIONS",
    "fast_tokens",
    "key_needles",
    "key_positions",
    "positions_at",
    "stored_terms",
    "unit_terms",
]

MAX_LEXEME = 2_000
"""Bytes: a longer token is not stored (PostgreSQL refuses a lexeme of 2 kB or more)."""
MAX_POSITIONS = 256
"""Positions kept per lexeme (the first ones), as PostgreSQL keeps them."""
MAX_POSITION = 16_383
"""The highest position PostgreSQL stores; later tokens count as standing there."""
_MAX_LITERAL = 900_000  # bytes (a tsvector holds at most 1 MB)
_CJK = re.compile(f"[{CJK_CHARS}]")
GRAM = 4
"""The longest CJK n-gram stored as one lexeme (query words are mostly 2-4 characters)."""
LONG = 64
"""Tokens: the SQLite index stores the terms of a longer unit only (:func:`stored_terms`);
a search reads a shorter one's text again, which costs no more than reading its terms."""

# What unicode61 (and ``text_tokens``) makes of ASCII text: runs of letters and digits, case
# folded. ``bytes.translate`` and ``split`` find them several times faster than the regex.
_ASCII_FOLD = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256)
)


def fast_tokens(content: str) -> list[str]:
    """:func:`~memdir.index._text.text_tokens` of ``content`` (a fast path for ASCII text)."""
    if content.isascii():
        return content.encode().translate(_ASCII_FOLD).decode().split()
    return text_tokens(content)


def _add(where: dict[str, list[int]], key: str, at: int) -> None:
    found = where.get(key)
    if found is None:
        where[key] = [at]
    elif len(found) < MAX_POSITIONS and found[-1] != at:
        found.append(at)


def _positions(tokens: list[str], *, grams: bool = True) -> dict[str, list[int]]:
    """Stemmed lexemes and their 1-based positions, with the CJK n-grams (see above) unless
    ``grams`` is false."""
    where: dict[str, list[int]] = {}
    run = ""  # the CJK characters just before, as consecutive tokens (at most GRAM - 1)
    for i, token in enumerate(tokens, start=1):
        if len(token) * 4 >= MAX_LEXEME and len(token.encode()) >= MAX_LEXEME:
            run = ""
            continue
        at = min(i, MAX_POSITION)
        _add(where, stem(token), at)
        if not grams or len(token) != 1 or _CJK.match(token) is None:
            run = ""
            continue
        run += token
        for n in range(2, len(run) + 1):
            _add(where, run[-n:], min(i - n + 1, MAX_POSITION))
        run = run[-(GRAM - 1) :]
    return where


def _literal(where: dict[str, list[int]]) -> str:
    # Lexemes are letters and digits only (no quote or backslash to escape).
    literal = " ".join(f"'{key}':{','.join(map(str, at))}" for key, at in where.items())
    if len(literal) > _MAX_LITERAL:
        literal = literal[: literal.rfind(" ", 0, _MAX_LITERAL)]
    return literal


def unit_terms(content: str, *, grams: bool = True) -> tuple[int, str]:
    """``(token count, tsvector literal)`` of one unit's text (without the CJK n-grams
    unless ``grams``: ranking never reads them)."""
    tokens = fast_tokens(content)
    return len(tokens), _literal(_positions(tokens, grams=grams))


def _stem_positions(tokens: list[str]) -> dict[str, list[int]]:
    """:func:`_positions` without n-grams, faster: positions gathered per distinct token, and
    each distinct token stemmed once."""
    by_token: dict[str, list[int]] = {}
    for i, token in enumerate(tokens, start=1):
        found = by_token.get(token)
        if found is None:
            by_token[token] = [i]
        else:
            found.append(i)
    where: dict[str, list[int]] = {}
    for token, at in by_token.items():
        if len(token) * 4 >= MAX_LEXEME and len(token.encode()) >= MAX_LEXEME:
            continue
        key = stem(token)
        known = where.get(key)
        where[key] = at if known is None else sorted(known + at)
    for key, at in where.items():
        if at[-1] > MAX_POSITION:  # PostgreSQL's clamp: the later tokens stand at the last place
            at = list(dict.fromkeys(min(p, MAX_POSITION) for p in at))
        if len(at) > MAX_POSITIONS:
            at = at[:MAX_POSITIONS]
        where[key] = at
    return where


def stored_terms(content: str) -> tuple[int, str]:
    """``(token count, terms)`` as the SQLite index stores them: the terms of a unit of more
    than :data:`LONG` tokens (:func:`unit_terms` without n-grams), else ``""``: a short line
    is cheaper to read again than to store twice."""
    tokens = fast_tokens(content)
    if len(tokens) <= LONG:
        return len(tokens), ""
    return len(tokens), _literal(_stem_positions(tokens))


@lru_cache(maxsize=16_384)
def key_needles(key: str) -> tuple[str, ...]:
    """What :func:`positions_at` looks for to find the word whose
    :func:`~memdir.index._forms.word_key` is ``key``: each of its forms' stems, quoted."""
    return tuple(f"'{lexeme}':" for lexeme in key_stems(key))


def positions_at(terms: str, needles: tuple[str, ...]) -> list[int]:
    """Where a word stands in a unit, from the unit's stored ``terms`` (sorted, 1-based).

    ``needles`` is :func:`key_needles` of the word: every form of it counts (``bought`` for
    ``buy``). One ``str.find`` per form, and the numbers of the form found.
    """
    out: list[int] = []
    for needle in needles:
        start = terms.find(needle)
        if start < 0:
            continue
        start += len(needle)
        end = terms.find(" ", start)
        out.extend(map(int, terms[start : end if end >= 0 else None].split(",")))
    if len(needles) > 1 and len(out) > 1:
        out = sorted(set(out))
    return out


def key_positions(terms: str, key: str) -> list[int]:
    """:func:`positions_at` the word whose :func:`~memdir.index._forms.word_key` is ``key``."""
    return positions_at(terms, key_needles(key))
