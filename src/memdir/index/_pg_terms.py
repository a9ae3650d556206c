"""memdir's own analysis as PostgreSQL ``tsvector`` and ``tsquery`` values.

PostgreSQL does not tokenise memory text here: every row's ``tsvector`` is built in Python from
the tokens the SQLite engine indexes (:func:`memdir.index._text.text_tokens`: CJK characters one
by one, pictographs as words, Latin diacritics folded) stemmed by memdir's Porter stemmer, and
written as a literal, so the ``'simple'`` configuration never re-reads it. A query term becomes
the same stemmed tokens joined by ``<->`` (a phrase), which matches exactly the rows an FTS5
phrase matches.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.index._porter import stem
from memdir.index._text import fold, text_tokens

__all__ = ["tsquery_of", "tsvector_of"]

_MAX_POS = 16_383  # the highest position a tsvector keeps
_MAX_POSITIONS = 255  # positions kept per lexeme
_MAX_LEXEME = 2_000  # bytes (PostgreSQL refuses a lexeme of 2 kB or more)
_MAX_LITERAL = 900_000  # bytes (a tsvector holds at most 1 MB)


def _quoted(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_of(content: str) -> tuple[int, str]:
    """``(token count, tsvector literal)`` of one unit's text."""
    tokens = text_tokens(content)
    where: dict[str, list[int]] = {}
    for i, token in enumerate(tokens, start=1):
        if len(token) > _MAX_LEXEME // 4 and len(token.encode()) >= _MAX_LEXEME:
            continue
        key = stem(token)
        found = where.get(key)
        if found is None:
            where[key] = [min(i, _MAX_POS)]
        elif len(found) < _MAX_POSITIONS and i <= _MAX_POS:
            found.append(i)
    parts: list[str] = []
    size = 0
    for key, positions in where.items():
        part = _quoted(key) + ":" + ",".join(map(str, positions))
        size += len(part) + 1
        if size > _MAX_LITERAL:
            break
        parts.append(part)
    return len(tokens), " ".join(parts)


def _phrase(tokens: tuple[str, ...]) -> str:
    return " <-> ".join(_quoted(stem(fold(token))) for token in tokens)


def tsquery_of(terms: Sequence[tuple[str, ...]]) -> str:
    """A ``tsquery`` literal matching rows that hold every term (each a phrase of tokens)."""
    return " & ".join(f"({_phrase(tokens)})" for tokens in terms if tokens)
