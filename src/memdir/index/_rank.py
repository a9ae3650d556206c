"""Re-ranking of candidate spans in Python.

The engine finds a few hundred candidates cheaply; this module scores them precisely:

* **BM25** per query term (idf from the whole index, length-normalised term frequency), each
  term weighted by how often the query repeats it;
* **coverage**: the BM25 sum is scaled by the share of the query's idf mass the span contains,
  so a line that answers the whole question beats one that repeats a single word (the mass of
  the ``coverage_terms`` rarest terms counts as full: a pasted dialogue needs no line that
  covers most of its words);
* **proximity**: matched terms standing close together earn a bonus (BM25TP-style);
* **recency**: spans from recent daily files get a small boost, relative to the newest day in
  the index (not the wall clock, so an old archive ranks the same today and next year);
* **curated**: ``MEMORY.md`` gets a small boost (it holds distilled, long-lived facts);
* **dates**: when the query names a day, a month or a year (:mod:`memdir.index._dates`), the
  daily files of those days are boosted, and the week after a named day by half as much (a
  ledger records an event on its day or later);
* **context**: a matching line next to a strong match (same file and section) inherits part
  of its score: in a conversation the answer often follows the line that names the topic.
  Lines without any query term are returned only through feedback;
* **feedback**: when the query's own words find fewer lines than were asked for, and the query
  is short, the rarest new words of the best hits (the entity they name: ``小米11`` for
  ``我的手机是小米11``) find the lines that go on about the same thing (a follow-up that says
  ``小米11真的…`` but not ``手机``, the other half of a two-step question), ranked below the hits
  that named it (:mod:`memdir.index._feedback`);
* **dedupe**: identical lines (same text after normalisation) are shown once, the best one.

Each feature can be switched off in :class:`RankConfig`; ``benchmarks/retrieval.py --ablate``
measures what each contributes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memdir.index._dates import DateCue
from memdir.index._engine import FileInfo, StoredRow
from memdir.index._forms import form_prefixes, word_key
from memdir.index._text import text_tokens
from memdir.store.ledger import normalize_bullet

__all__ = ["DEFAULT", "RankConfig", "ScoredRow", "Scorer", "WeightedTerm", "finish", "idf"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RankConfig:
    """Ranking features and their strengths (see the module docstring)."""

    coverage: bool = True
    proximity: bool = True
    recency: bool = True
    curated: bool = True
    dedupe: bool = True
    context: bool = True
    k1: float = 1.2
    b: float = 0.75
    coverage_power: float = 1.0
    coverage_terms: int = 8
    proximity_weight: float = 0.25
    proximity_adjacent: bool = True
    subword_weight: float = 0.5
    bigram_weight: float = 1.0
    query_tf: float = 0.5
    recency_weight: float = 0.1
    recency_days: float = 30.0
    curated_boost: float = 0.15
    dates: bool = True
    date_boost: float = 2.0
    date_after_days: int = 7
    date_after_weight: float = 0.5
    context_weight: float = 0.3
    context_top: int = 10
    candidates: int = 30  # re-ranked at least; three per hit asked for when more
    feedback: bool = True
    feedback_top: int = 2
    feedback_terms: int = 3
    feedback_weight: float = 0.3
    feedback_query_terms: int = 6
    postings_budget: int = 1_000


DEFAULT = RankConfig()


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    """A query term ready for scoring: its tokens' word keys, idf and query weight."""

    tokens: tuple[str, ...]  # :func:`memdir.index._forms.word_key` of each folded token
    idf: float
    weight: float
    part: bool = False  # a partial match: adds to BM25, not to coverage or proximity


@dataclass(frozen=True, slots=True)
class ScoredRow:
    """A candidate with its final score."""

    score: float
    row: StoredRow


# What unicode61 (and ``text_tokens``) makes of ASCII text: runs of letters and digits, case
# folded. ``bytes.translate`` and ``split`` find them several times faster than the regex.
_ASCII_FOLD = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256)
)


def _tokens(content: str) -> list[str]:
    """:func:`text_tokens` of ``content`` (a fast path for ASCII text)."""
    if content.isascii():
        return content.encode().translate(_ASCII_FOLD).decode().split()
    return text_tokens(content)


def _analyse(content: str, prefixes: frozenset[str]) -> tuple[int, dict[str, list[int]]]:
    """Token count of a span and the positions of its tokens that may match a query term.

    Only tokens sharing their first two characters with a form of a query word are keyed
    (:func:`memdir.index._forms.word_key`): Porter stemming never changes the first two
    letters, so the others cannot match.
    """
    tokens = _tokens(content)
    where: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        if token[:2] in prefixes:
            key = word_key(token)
            found = where.get(key)
            if found is None:
                where[key] = [i]
            else:
                found.append(i)
    return len(tokens), where


def _positions(where: dict[str, list[int]], term: tuple[str, ...]) -> list[int]:
    starts = where.get(term[0])
    if not starts or len(term) == 1:
        return starts or []
    rest = [where.get(token) for token in term[1:]]
    if not all(rest):
        return []
    following = [set(r or ()) for r in rest]
    return [p for p in starts if all(p + k in s for k, s in enumerate(following, start=1))]


class Scorer:
    """Scores rows for one query (see :class:`RankConfig` for the features)."""

    def __init__(
        self,
        terms: Sequence[WeightedTerm],
        *,
        avgdl: float,
        newest_day: int | None,
        config: RankConfig,
        dates: DateCue | None = None,
    ) -> None:
        self.terms = terms
        self.dates = dates or None  # an empty cue names no day
        self.prefixes = frozenset(
            prefix for term in terms for token in term.tokens for prefix in form_prefixes(token)
        )
        idfs = sorted((term.idf for term in terms if not term.part), reverse=True)
        if config.coverage_terms:
            idfs = idfs[: config.coverage_terms]
        self.total_idf = sum(idfs)
        self.avgdl = max(avgdl, 1.0)
        self.newest_day = newest_day
        self.config = config
        # Per term: tokens, the token when there is one (a plain lookup), weight x idf, idf.
        self._plan = [
            (
                term.tokens,
                term.tokens[0] if len(term.tokens) == 1 else None,
                term.weight * term.idf,
                term.idf,
                term.part,
            )
            for term in terms
        ]
        # The terms by their first token: a row is matched against the terms that start with
        # one of its tokens, in query order (the sums come out as with every term tried).
        starting: dict[str, list[int]] = {}
        for number, term in enumerate(terms):
            starting.setdefault(term.tokens[0], []).append(number)
        self._starting = starting
        self._priors: dict[int, tuple[FileInfo, float]] = {}

    def score(self, row: StoredRow) -> float:
        """Relevance of one row on its own (0: no query term in it)."""
        config = self.config
        length, index = _analyse(row.content, self.prefixes)
        if not index:
            return 0.0
        norm = config.k1 * (1 - config.b + config.b * (length or 1) / self.avgdl)
        k1_1 = config.k1 + 1
        bm25 = 0.0
        matched_idf = 0.0
        found: list[tuple[list[int], float, int]] = []
        starting = self._starting
        numbers = [n for key in index for n in starting.get(key, ())]
        if len(numbers) > 1:
            numbers.sort()
        plan = self._plan
        for number in numbers:
            tokens, single, gain, term_idf, part = plan[number]
            where = index[single] if single is not None else _positions(index, tokens)
            if not where:
                continue
            tf = len(where)
            bm25 += gain * tf * k1_1 / (tf + norm)
            if not part:
                matched_idf += term_idf
                found.append((where, term_idf, number))
        if bm25 <= 0:
            return 0.0
        score = bm25
        if config.coverage and self.total_idf > 0:
            share = min(1.0, matched_idf / self.total_idf)
            score *= share**config.coverage_power
        if config.proximity and len(found) > 1:
            bonus = 0.0
            for i in range(len(found)):
                for j in range(i + 1, len(found)):
                    if config.proximity_adjacent and found[j][2] != found[i][2] + 1:
                        continue
                    gap = min(abs(a - b) for a in found[i][0] for b in found[j][0])
                    bonus += min(found[i][1], found[j][1]) / (gap * gap if gap else 1)
            score += config.proximity_weight * bonus
        return score * self.prior(row)

    def prior(self, row: StoredRow) -> float:
        """The row's file factor (:meth:`file_prior`)."""
        file = row.file
        known = self._priors.get(file.id)
        if known is not None and known[0] is file:
            return known[1]
        factor = self.file_prior(file)
        self._priors[file.id] = (file, factor)
        return factor

    def file_prior(self, file: FileInfo) -> float:
        """Factor of one file: recency of a daily file, curated memory, the query's dates."""
        config = self.config
        factor = 1.0
        if self.dates is not None and file.day is not None:
            factor *= 1 + config.date_boost * self.dates.weight(file.day)
        if config.recency and self.newest_day is not None and file.day is not None:
            age = max(0, self.newest_day - file.day)
            factor *= 1 + config.recency_weight / (1 + age / config.recency_days)
        if config.curated and file.curated:
            factor *= 1 + config.curated_boost
        return factor

    def file_priors(self, files: dict[int, FileInfo]) -> dict[int, float]:
        """:meth:`file_prior` of every file, by file id."""
        return {file_id: self.file_prior(info) for file_id, info in files.items()}


def finish(
    scores: dict[int, float], rows: dict[int, StoredRow], *, limit: int, config: RankConfig
) -> list[ScoredRow]:
    """Best first (ties: newer file, then earlier line), identical lines merged, ``limit``."""
    ranked = sorted(
        (ScoredRow(score, rows[rowid]) for rowid, score in scores.items() if score > 0),
        key=lambda s: (-s.score, -(s.row.file.day or 0), s.row.rowid),
    )
    if not config.dedupe:
        return ranked[:limit]
    out: list[ScoredRow] = []
    seen: set[str] = set()
    for item in ranked:
        key = normalize_bullet(item.row.content)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= limit:
            break
    return out


def idf(df: int, total: int) -> float:
    """BM25 inverse document frequency (always positive)."""
    return math.log(1 + (total - df + 0.5) / (df + 0.5))
