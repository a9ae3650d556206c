"""The words of a search shown marked in a hit's text: the text cut into ``(text, is_match)``
pieces that a template renders, each escaped, a match inside ``<mark>``.

The terms are the ones the index searched for (:func:`memdir.index._query.analyze_query`):
a Latin word matches a word of the text with the same Porter stem (``migrations`` marks
``migration``), a phrase (``2026-01-05``) its words in a row; a Chinese, Japanese or Korean
word matches where its characters stand, and so do the character pairs of a longer run (the
index finds a word the segmenter cut differently through them); a pictograph matches itself.
Function words are marked only when the query holds nothing else. Marking works on the raw
text, before escaping, so a mark can never fall inside an entity of the escaped HTML.
"""

from __future__ import annotations

import re
from typing import Final

from memdir.index._clauses import without_answer_form
from memdir.index._porter import stem
from memdir.index._query import Term, analyze_query
from memdir.index._text import CJK_CHARS, fold

__all__ = ["Piece", "pieces"]

Piece = tuple[str, bool]
"""A piece of text and whether it matched the query."""

_WORD: Final = re.compile(f"[^\\W_{CJK_CHARS}]+")
_EMOJI_TOKEN: Final = re.compile(r"emo([0-9a-f]{1,6})x")


def _wanted(terms: list[Term]) -> list[Term]:
    content = [t for t in terms if not t.stop]
    return content or terms


def _literal(term: Term) -> str | None:
    """What ``term`` matches character for character (``None``: a Latin word)."""
    if term.cjk:
        return "".join(term.tokens)
    emoji = _EMOJI_TOKEN.fullmatch(term.tokens[0]) if len(term.tokens) == 1 else None
    return chr(int(emoji[1], 16)) if emoji and int(emoji[1], 16) <= 0x10FFFF else None


def _literal_spans(text: str, needles: list[str]) -> list[tuple[int, int]]:
    spans = []
    for needle in needles:
        start = text.find(needle)
        while start != -1:
            spans.append((start, start + len(needle)))
            start = text.find(needle, start + 1)
    return spans


def _latin_spans(text: str, terms: list[Term]) -> list[tuple[int, int]]:
    words = [(m.start(), m.end(), stem(fold(m.group()))) for m in _WORD.finditer(text)]
    stems = [w[2] for w in words]
    spans = []
    for term in terms:
        wanted = [stem(token) for token in term.tokens]
        size = len(wanted)
        for i in range(len(words) - size + 1):
            if stems[i : i + size] == wanted:
                spans.append((words[i][0], words[i + size - 1][1]))
    return spans


def pieces(text: str, query: str) -> list[Piece]:
    """``text`` cut into pieces, those that match a term of ``query`` marked."""
    terms = _wanted(analyze_query(without_answer_form(query)))
    literal = [(t, _literal(t)) for t in terms]
    needles = [needle for _, needle in literal if needle]
    latin = [t for t, needle in literal if needle is None]
    spans = sorted(_literal_spans(text, needles) + _latin_spans(text, latin))
    out: list[Piece] = []
    at = 0
    for start, end in spans:
        if end <= at:
            continue
        start = max(start, at)
        if start > at:
            out.append((text[at:start], False))
        if out and out[-1][1]:  # overlapping or touching matches: one mark
            out[-1] = (out[-1][0] + text[start:end], True)
        else:
            out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out
