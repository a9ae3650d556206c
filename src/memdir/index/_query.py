"""Turn any user or model query into safe FTS5 terms.

Nothing of the caller's syntax reaches FTS5: the query is cut into our own tokens, and every
term becomes a double-quoted phrase of word characters, so quotes, ``*``, ``NEAR``, ``AND``,
``OR``, ``NOT``, parentheses, ``-``, ``^``, ``:``, NUL bytes or lone surrogates are plain text.

* Latin words are case-folded; FTS5's ``porter`` tokenizer stems them on both sides.
  Words joined by ``-./:@`` (``2026-01-05``, ``gpt-4o``) stay one phrase.
* Chinese runs are cut into words with ``rjieba`` when it is installed (imported lazily),
  else into overlapping character pairs. A run of one or two characters is kept whole, so
  ``市长`` matches inside ``南京市长江大桥``. The overlapping character pairs of a longer run
  are added as partial terms (pairs holding a one-character function word are dropped): they
  match what the segmenter cut differently.
* Katakana runs stay whole (loan words); hiragana runs (mostly particles and endings) and
  Korean words longer than two syllables become overlapping pairs, which tolerates the
  particles glued to Korean words.
* Each pictograph (emoji) is a term of its own.
* Function words (``the``, ``what``, ``的``, ``什么``) are marked as stopwords. A stopword
  written with a capital inside a sentence (``May``, ``US``) is kept as a name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memdir.index._stopwords import EN_STOPWORDS, ZH_STOPWORDS
from memdir.index._text import (
    EMOJI,
    HAN,
    HANGUL,
    HIRAGANA,
    KATAKANA,
    LATIN_WORD,
    emoji_token,
    word_parts,
)

__all__ = [
    "CONVERSATION_WORDS",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "Term",
    "analyze_query",
    "content_words",
    "is_conversation",
]

MAX_QUERY_CHARS = 4_000
"""Only this much of a query is analysed (a 10 kB paste is still answered, quickly)."""
MAX_TERMS = 64
"""At most this many distinct terms are kept; ranking then favours the rarest."""
CONVERSATION_WORDS = 16
"""A query of more content words than this is a conversation (a pasted dialogue) rather than
a question: LoCoMo's questions have at most 14, MemDaily's clean questions a median of 10."""

_SEGMENTS = re.compile(
    f"(?P<han>[{HAN}]+)|(?P<hira>[{HIRAGANA}]+)|(?P<kata>[{KATAKANA}]+)|(?P<hangul>[{HANGUL}]+)"
    f"|(?P<word>{LATIN_WORD})"
    f"|(?P<emoji>[{EMOJI}])"
    r"|(?P<stop>[.?!。？！;；:：\n])"
)
_ZH_STOP_CHARS = frozenset(w for w in ZH_STOPWORDS if len(w) == 1)
_PARTS = ("", "sub", "bi")
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Term:
    """One query term: a phrase of index tokens (one token for a plain word).

    Attributes:
        tokens: case-folded tokens, in order (one per character for CJK words).
        stop: a function word, searched only when the query has nothing else.
        cjk: the term is written in CJK characters.
        count: how often the term occurs in the query.
        part: ``""`` for a word of the query; ``"sub"`` for a shorter word inside a long
            Chinese word (``晚会`` in ``元旦晚会``): a partial match, weighted lower and left
            out of coverage; ``"bi"`` for an overlapping character pair of a Chinese run.
    """

    tokens: tuple[str, ...]
    stop: bool = False
    cjk: bool = False
    count: int = 1
    part: str = ""


def _bigrams(run: str) -> list[str]:
    if len(run) <= 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


_segmenter: Callable[[str], list[str]] | None = None
_segmenter_loaded = False


def _han_words(run: str) -> list[str]:
    """Cut a run of Han characters into words (rjieba, else overlapping pairs)."""
    global _segmenter, _segmenter_loaded
    if len(run) <= 2:
        return [run]
    if not _segmenter_loaded:
        _segmenter_loaded = True
        try:
            import rjieba  # optional, and slow to load: only when needed

            _segmenter = rjieba.cut
        except ImportError:  # pragma: no cover - depends on the platform
            _segmenter = None
    if _segmenter is None:
        return _bigrams(run)
    return [word for word in _segmenter(run) if word.strip()]


def _stop_pair(pair: str) -> bool:
    """A character pair that carries no topic: a function word, or one glued to a particle."""
    return pair in ZH_STOPWORDS or pair[0] in _ZH_STOP_CHARS or pair[1] in _ZH_STOP_CHARS


def _sub_words(word: str) -> list[str]:
    """Shorter words inside a long Chinese word (``元旦晚会`` -> ``元旦``, ``晚会``)."""
    if len(word) < 3:
        return []
    if _segmenter is None:
        return _bigrams(word)
    import rjieba

    return [s for s in rjieba.cut_for_search(word) if 2 <= len(s) < len(word)]


def set_segmenter(segmenter: Callable[[str], list[str]] | None) -> None:
    """Replace the Chinese word segmenter (``None``: overlapping pairs). For tests."""
    global _segmenter, _segmenter_loaded
    _segmenter, _segmenter_loaded = segmenter, True


_Found = tuple[tuple[str, ...], bool, bool, str]
"""A term as :func:`_terms` finds it: ``(tokens, stop, cjk, part)``."""


@lru_cache(maxsize=16_384)
def _latin_term(text: str, *, sentence_start: bool) -> _Found | None:
    parts = word_parts(text)
    if not parts:
        return None
    stop = len(parts) == 1 and parts[0] in EN_STOPWORDS
    if stop and not sentence_start and len(text) > 1 and text[:1].isupper():
        stop = False  # a name or a month: "in May", "the US" (but never "I")
    return (tuple(parts), stop, False, "")


def _terms(query: str) -> Iterator[_Found]:
    sentence_start = True
    for match in _SEGMENTS.finditer(query):
        kind = match.lastgroup
        text = match.group()
        if kind == "stop":
            sentence_start = True
            continue
        if kind == "word":
            term = _latin_term(text, sentence_start=sentence_start)
            if term is not None:
                yield term
        elif kind == "han":
            for word in _han_words(text):
                stop = word in ZH_STOPWORDS
                yield (tuple(word), stop, True, "")
                if stop:
                    continue
                for sub in _sub_words(word):
                    yield (tuple(sub), False, True, "sub")
            if len(text) > 2:
                for pair in _bigrams(text):
                    if not _stop_pair(pair):
                        yield (tuple(pair), False, True, "bi")
        elif kind == "emoji":
            yield ((emoji_token(text),), False, False, "")
        elif kind == "kata":
            yield (tuple(text), False, True, "")
        elif kind == "hira":
            for pair in _bigrams(text):
                yield (tuple(pair), True, True, "")
        else:  # hangul
            for pair in _bigrams(text):
                yield (tuple(pair), False, True, "")
        sentence_start = False


def analyze_query(query: str) -> list[Term]:
    """Distinct terms of ``query`` in order of first appearance (at most :data:`MAX_TERMS`).

    Stopwords are kept in the list (marked); callers search them only when nothing else is
    left. Any string is accepted; a blank one gives ``[]``.
    """
    cleaned = _UNSAFE.sub(" ", query[:MAX_QUERY_CHARS])
    # Per distinct phrase: [part, count, stop, cjk], merged over its occurrences.
    state: dict[tuple[str, ...], list[Any]] = {}
    for tokens, stop, cjk, part in _terms(cleaned):
        known = state.get(tokens)
        if known is None:
            if len(state) < MAX_TERMS * 4:
                state[tokens] = [part, 1, stop, cjk]
            continue
        # A word that is also part of another word counts as a word; repeats add weight.
        if not part:
            known[1] = 1 if known[0] else known[1] + 1
        if known[0] != part:
            known[0] = min(known[0], part, key=_PARTS.index)
        known[2] = known[2] and stop
        known[3] = cjk
    seen = [
        Term(tokens, stop=stop, cjk=cjk, count=count, part=part)
        for tokens, (part, count, stop, cjk) in state.items()
    ]
    words = [t for t in seen if not t.part]
    content = [t for t in words if not t.stop][:MAX_TERMS]
    stops = [t for t in words if t.stop][: MAX_TERMS - len(content)]
    parts = [
        t
        for kind in _PARTS[1:]
        for t in [t for t in seen if t.part == kind and not t.stop][:MAX_TERMS]
    ]
    keep = {term.tokens for term in content + stops + parts}
    return [term for term in seen if term.tokens in keep]


def content_words(terms: Sequence[Term]) -> int:
    """The words of a query (:func:`analyze_query`) that are neither stopwords nor parts."""
    return sum(1 for term in terms if not term.stop and not term.part)


def is_conversation(terms: Sequence[Term]) -> bool:
    """Whether a query of ``terms`` is a conversation (:data:`CONVERSATION_WORDS`)."""
    return content_words(terms) > CONVERSATION_WORDS
