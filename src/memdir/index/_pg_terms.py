"""memdir's own analysis as PostgreSQL ``tsvector`` and ``tsquery`` values.

PostgreSQL does not tokenise memory text here: every row's ``tsvector`` is built in Python from
the tokens the SQLite engine indexes (:func:`memdir.index._text.text_tokens`: CJK characters one
by one, pictographs as words, Latin diacritics folded) stemmed by memdir's Porter stemmer, and
written as a literal, so the ``'simple'`` configuration never re-reads it. A query term becomes
the same stemmed tokens joined by ``<->`` (a phrase), which matches exactly the rows an FTS5
phrase matches.

Two to :data:`GRAM` CJK characters that are consecutive tokens are also stored as one lexeme
(the n-gram) at the first one's position. A CJK word of up to :data:`GRAM` characters is then
one exact lexeme (one posting list), and a longer one the chain of its :data:`GRAM`-grams joined
by ``<->``. The rows holding those n-grams at consecutive positions are exactly the rows holding
the characters at consecutive positions, so the matches are those of the FTS5 phrase, but
PostgreSQL need not recheck the positions of common characters row by row, and its planner
knows the word's own frequency.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memdir.index._porter import stem
from memdir.index._rank import _tokens as fast_tokens
from memdir.index._text import CJK_CHARS, fold, text_tokens

__all__ = ["GRAM", "MAX_LEXEME", "lexemes_of", "tsquery_of", "tsvector_of"]

MAX_LEXEME = 2_000
"""Bytes: a longer token is not stored (PostgreSQL refuses a lexeme of 2 kB or more)."""
_MAX_LITERAL = 900_000  # bytes (a tsvector holds at most 1 MB)
_CJK = re.compile(f"[{CJK_CHARS}]")
GRAM = 4
"""The longest CJK n-gram stored as one lexeme (query words are mostly 2-4 characters)."""
# PostgreSQL itself keeps at most 256 positions per lexeme and clamps them to 16,383.


def _quoted(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def _positions(tokens: list[str]) -> dict[str, list[int]]:
    """Stemmed lexemes and their 1-based positions, with the CJK n-grams (see above)."""
    where: dict[str, list[int]] = {}
    run = ""  # the CJK characters just before, as consecutive tokens (at most GRAM - 1)
    for i, token in enumerate(tokens, start=1):
        if len(token) * 4 >= MAX_LEXEME and len(token.encode()) >= MAX_LEXEME:
            run = ""
            continue
        key = stem(token)
        found = where.get(key)
        if found is None:
            where[key] = [i]
        else:
            found.append(i)
        if len(token) != 1 or _CJK.match(token) is None:
            run = ""
            continue
        run += token
        for n in range(2, len(run) + 1):
            gram = run[-n:]
            found = where.get(gram)
            if found is None:
                where[gram] = [i - n + 1]
            else:
                found.append(i - n + 1)
        run = run[-(GRAM - 1) :]
    return where


def tsvector_of(content: str) -> tuple[int, str]:
    """``(token count, tsvector literal)`` of one unit's text."""
    tokens = fast_tokens(content) if content.isascii() else text_tokens(content)
    return len(tokens), _literal(_positions(tokens))


def _literal(where: dict[str, list[int]]) -> str:
    # Lexemes are letters and digits only (no quote or backslash to escape).
    literal = " ".join(f"'{key}':{','.join(map(str, at))}" for key, at in where.items())
    if len(literal) > _MAX_LITERAL:
        literal = literal[: literal.rfind(" ", 0, _MAX_LITERAL)]
    return literal


def lexemes_of(tokens: Sequence[str]) -> list[str]:
    """The lexemes of one query term, in order: the phrase a row must hold (see above)."""
    folded = [stem(fold(token)) for token in tokens]
    if len(folded) > 1 and all(len(t) == 1 and _CJK.match(t) for t in folded):
        text = "".join(folded)  # a CJK word: one n-gram, or a chain of them (see above)
        n = min(GRAM, len(text))
        folded = [text[i : i + n] for i in range(len(text) - n + 1)]
    return folded


def _phrase(tokens: tuple[str, ...]) -> str:
    return " <-> ".join(_quoted(token) for token in lexemes_of(tokens))


def tsquery_of(terms: Sequence[tuple[str, ...]]) -> str:
    """A ``tsquery`` literal matching rows that hold every term (each a phrase of tokens)."""
    return " & ".join(f"({_phrase(tokens)})" for tokens in terms if tokens)
