"""Realistic query sets drawn from the corpus, and the substring-scan truth they are judged by.

A query of ``k`` terms takes its terms from one corpus line, so lines containing every term
exist: English words, Chinese words of 2–4 characters (segmented with rjieba when installed,
else 2–4-character slices of Han runs), or a mix of both.
"""

from __future__ import annotations

import random
import re
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Query", "TruthIndex", "make_queries"]

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_HAN_WORD = re.compile(r"^[\u3400-\u4dbf\u4e00-\u9fff]{2,4}$")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]")
_BULLET = re.compile(r"^- \d\d:\d\d (.*)$")
# Words nobody types into a memory search box; everything else in a line is a fair term.
_STOPWORD_TEXT = (
    "the and for with that this from are was were not but you your its into than then there "
    "when what which will would can could should may must has have had been being also any all "
    "each other some such only one two more most very just use used using does did get set "
    "return returns none true false self cls args kwargs"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Share of queries per kind (English / Chinese / mixed), per term count.
_KIND_WEIGHTS = (("en", 0.45), ("zh", 0.40), ("mixed", 0.15))


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    """One benchmark query.

    Attributes:
        text: the query string, terms joined by one space.
        terms: the terms.
        kind: ``"en"``, ``"zh"`` or ``"mixed"``.
        source: ``(rel path, line number)`` of the line the terms came from.
    """

    text: str
    terms: tuple[str, ...]
    kind: str
    source: tuple[str, int]


def _segmenter() -> tuple[str, object | None]:
    try:
        import rjieba  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return "han-slices", None
    return "rjieba", rjieba


def _chinese_words(text: str, rng: random.Random, jieba: object | None) -> list[str]:
    if jieba is not None:
        words = [w for w in jieba.cut(text) if _HAN_WORD.match(w)]  # type: ignore[attr-defined]
    else:
        words = []
        for run in _HAN_RUN.findall(text):
            pos = 0
            while pos + 2 <= len(run):
                size = rng.randint(2, 4)
                words.append(run[pos : pos + size])
                pos += size
    return [w for w in words if len(w) >= 2]


def _english_words(text: str) -> list[str]:
    return [w for w in _LATIN_WORD.findall(text) if len(w) >= 3 and w.lower() not in _STOPWORDS]


def _distinct(words: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for word in words:
        seen.setdefault(word.lower(), word)
    return list(seen.values())


def _pick(rng: random.Random, words: list[str], k: int) -> list[str]:
    chosen = sorted(rng.sample(range(len(words)), k))
    return [words[i] for i in chosen]


def _terms_for(
    kind: str, k: int, body: str, rng: random.Random, jieba: object | None
) -> list[str] | None:
    english = _distinct(_english_words(body))
    chinese = _distinct(_chinese_words(body, rng, jieba))
    if kind == "en":
        return _pick(rng, english, k) if len(english) >= k else None
    if kind == "zh":
        return _pick(rng, chinese, k) if len(chinese) >= k else None
    n_zh = (k + 1) // 2 if k > 1 else rng.randint(0, 1)
    if len(chinese) < max(n_zh, 1) or len(english) < max(k - n_zh, 1):
        return None  # a mixed line must have both scripts, even for one-term queries
    return _pick(rng, chinese, n_zh) + _pick(rng, english, k - n_zh)


def make_queries(
    root: Path,
    rels: list[str],
    *,
    per_count: int,
    max_terms: int = 5,
    whole_lines: int = 0,
    seed: int = 1,
) -> tuple[list[Query], str]:
    """``per_count`` queries for each term count 1..``max_terms``, deterministic for ``seed``.

    ``whole_lines`` more queries (kind ``"line"``) are the whole text of a bullet, as when
    someone pastes a sentence they remember; their one "term" is that text.

    Returns the queries (shuffled, so term counts interleave in time) and the name of the
    Chinese segmenter used.
    """
    rng = random.Random(f"queries:{seed}")
    segmenter, jieba = _segmenter()
    cache: dict[str, list[str]] = {}
    queries: list[Query] = []
    for k in range(1, max_terms + 1):
        for n in range(per_count):
            roll, kind = rng.random(), "mixed"
            for name, weight in _KIND_WEIGHTS:
                if roll < weight:
                    kind = name
                    break
                roll -= weight
            for _attempt in range(10_000):
                rel = rng.choice(rels)
                if rel not in cache:
                    cache[rel] = (root / rel).read_text(encoding="utf-8").splitlines()
                lines = cache[rel]
                number = rng.randrange(len(lines))
                match = _BULLET.match(lines[number])
                terms = _terms_for(kind, k, match[1], rng, jieba) if match else None
                if terms:
                    queries.append(
                        Query(
                            text=" ".join(terms),
                            terms=tuple(terms),
                            kind=kind,
                            source=(rel, number + 1),
                        )
                    )
                    break
            else:
                raise RuntimeError(f"no corpus line yields a {kind} query of {k} terms (#{n})")
    while whole_lines > 0:
        rel = rng.choice(rels)
        if rel not in cache:
            cache[rel] = (root / rel).read_text(encoding="utf-8").splitlines()
        number = rng.randrange(len(cache[rel]))
        match = _BULLET.match(cache[rel][number])
        if match and len(match[1].strip()) >= 20:
            body = match[1].strip()
            queries.append(Query(text=body, terms=(body,), kind="line", source=(rel, number + 1)))
            whole_lines -= 1
    rng.shuffle(queries)
    return queries, segmenter


class TruthIndex:
    """Case-insensitive substring truth: which lines contain every term of a query.

    The whole corpus is held lower-cased in one string with a line-offset table, so a lookup is
    a C-speed ``str.find`` walk instead of a Python loop over every line.
    """

    def __init__(self, root: Path, rels: list[str]) -> None:
        parts: list[str] = []
        self._starts = array("q")
        self._file_of = array("l")
        self._number_of = array("l")
        self._file_span: dict[str, tuple[int, int]] = {}
        self._rels = list(rels)
        offset = 0
        for file_no, rel in enumerate(rels):
            base = len(self._starts)
            text = (root / rel).read_text(encoding="utf-8")
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                low = line.lower()
                self._starts.append(offset)
                self._file_of.append(file_no)
                self._number_of.append(number)
                parts.append(low)
                offset += len(low) + 1
            self._file_span[rel] = (base, len(self._starts))
        self._text = "\n".join(parts)

    @property
    def lines(self) -> int:
        """Non-blank lines held."""
        return len(self._starts)

    def _line(self, idx: int) -> str:
        end = self._starts[idx + 1] - 1 if idx + 1 < len(self._starts) else len(self._text)
        return self._text[self._starts[idx] : end]

    def matches(self, terms: tuple[str, ...], limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` lines ``(rel, line number)`` containing all ``terms``, in file order.

        The walk follows the longest term (a cheap proxy for the rarest) and stops at ``limit``.
        """
        needles = sorted({t.lower() for t in terms if t.strip()}, key=len, reverse=True)
        if not needles:
            return []
        first, rest = needles[0], needles[1:]
        found: list[tuple[str, int]] = []
        text, starts = self._text, self._starts
        pos = text.find(first)
        while pos >= 0 and len(found) < limit:
            idx = bisect_right(starts, pos) - 1
            line = self._line(idx)
            if all(t in line for t in rest):
                found.append((self._rels[self._file_of[idx]], self._number_of[idx]))
            nxt = idx + 1
            if nxt >= len(starts):
                break
            pos = text.find(first, starts[nxt])
        return found

    def contains_all(self, rel: str, first: int, last: int, terms: tuple[str, ...]) -> bool:
        """Whether some line ``first..last`` of ``rel`` contains every term (any case)."""
        span = self._file_span.get(rel)
        if span is None:
            return False
        base, end = span
        numbers = self._number_of[base:end]
        lo, hi = bisect_left(numbers, first), bisect_right(numbers, last)
        needles = [t.lower() for t in terms]
        return any(all(t in self._line(base + i) for t in needles) for i in range(lo, hi))
