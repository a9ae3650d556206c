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
from memdir.index._text import CJK_CHARS, fold
from memdir.index._unit_terms import GRAM, MAX_LEXEME, unit_terms

__all__ = ["GRAM", "MAX_LEXEME", "lexemes_of", "tsquery_of", "tsvector_of"]

_CJK = re.compile(f"[{CJK_CHARS}]")


def _quoted(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_of(content: str) -> tuple[int, str]:
    """``(token count, tsvector literal)`` of one unit's text
    (:func:`memdir.index._unit_terms.unit_terms`)."""
    return unit_terms(content)


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
