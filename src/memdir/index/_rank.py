"""Re-ranking of candidate spans in Python.

The engine finds a few hundred candidates cheaply; this module scores them precisely:

* **BM25** per query term (idf from the whole index, length-normalised term frequency), each
  term weighted by how often the query repeats it;
* **coverage**: the BM25 sum is scaled by the share of the query's idf mass the span contains,
  so a line that answers the whole question beats one that repeats a single word (the mass of
  the ``coverage_terms`` rarest terms counts as full: a pasted dialogue needs no line that
  covers most of its words). In a line longer than ``window`` tokens only the words that
  stand together within ``window`` tokens count: a page of an answer holds every word of a
  question somewhere, and that is no sign it answers it;
* **length**: a line longer than ``length_free`` tokens is scored ``(length_free /
  length) ** length_power`` of what it earns (BM25's own length norm is relative to the
  average line, which long lines raise): the short line that states a fact beats the page
  that mentions its words, and a page still ranks when nothing shorter matches;
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
* **rules**: a line that states a standing rule (``Always format dates as MM/DD/YYYY when I
  ask about deadlines``, ``以后回答都用中文``: :func:`memdir.index._rules.standing_rule`) is
  scored ``1 + rule_boost`` times what it earns: it holds for every later request on its
  topic, and such a request shares only a word or two with it;
* **dedupe**: identical lines (same text after normalisation) are shown once, the best one.

Each feature can be switched off in :class:`RankConfig`; ``benchmarks/retrieval.py --ablate``
measures what each contributes.

A row's length and the positions of its words are read from what was stored with it when it
was indexed (:mod:`memdir.index._unit_terms`), never from its text: scoring a candidate costs
a few ``str.find`` calls, whatever its length.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from memdir.index._dates import DateCue
from memdir.index._engine import FileInfo, StoredRow
from memdir.index._forms import key_stems
from memdir.index._porter import stem
from memdir.index._rules import standing_rule
from memdir.index._unit_terms import (
    MAX_LEXEME,
    MAX_POSITION,
    MAX_POSITIONS,
    fast_tokens,
    key_needles,
    positions_at,
)
from memdir.store.ledger import normalize_bullet

__all__ = [
    "DEFAULT",
    "Holders",
    "Memo",
    "QueryWords",
    "RankConfig",
    "ScoredRow",
    "Scorer",
    "WeightedTerm",
    "finish",
    "idf",
    "positions_of",
    "query_words",
]


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
    candidates: int = 30  # re-ranked at least; ``per_hit`` per hit asked for when more
    per_hit: int = 2
    feedback: bool = True
    feedback_top: int = 2
    feedback_terms: int = 3
    feedback_weight: float = 0.3
    feedback_query_terms: int = 6
    postings_budget: int = 1_000
    window: int = 32
    length_free: int = 64
    length_power: float = 0.75
    pre_length: bool = True  # the candidates are chosen with the length factor too
    updates: bool = True
    updates_top: int = 10
    updates_reach: int = 16
    updates_cue_reach: int = 6
    rules: bool = True
    rule_boost: float = 1.0


DEFAULT = RankConfig()


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    """A query term ready for scoring: its tokens' word keys, idf and query weight."""

    tokens: tuple[str, ...]  # :func:`memdir.index._forms.word_key` of each folded token
    idf: float
    weight: float
    part: bool = False  # a partial match: adds to BM25, not to coverage or proximity
    holders: Holders | None = None  # a one-word term's rows, as far as they are known


@dataclass(frozen=True, slots=True)
class ScoredRow:
    """A candidate with its final score."""

    score: float
    row: StoredRow


Holders = tuple[frozenset[int], int]
"""``(rows, floor)``: every row whose id is ``floor`` or more and that holds a word is one of
``rows`` (a posting list read newest first, down to ``floor``; ``-1``: read whole)."""
Lookup = tuple[str, tuple[str, ...], Holders | None]
"""A query word as a row is searched for it: its word key, :func:`key_needles` of it, and
its :data:`Holders` when known (a row at or above the floor not among them is not looked at)."""


@dataclass(frozen=True, slots=True)
class QueryWords:
    """The words of a query as rows are searched for them (:func:`query_words`)."""

    lookups: tuple[Lookup, ...]
    keys_by_stem: dict[str, tuple[str, ...]]  # each stem of a form: the words it is a form of
    prefixes: frozenset[str]  # their first two characters (Porter never changes those)


def query_words(keys: Sequence[str], holders: dict[str, Holders] | None = None) -> QueryWords:
    """:class:`QueryWords` of ``keys`` (:func:`~memdir.index._forms.word_key` of each word)."""
    known = holders or {}
    by_stem: dict[str, tuple[str, ...]] = {}
    for key in keys:
        for lexeme in key_stems(key):
            by_stem[lexeme] = (*by_stem.get(lexeme, ()), key)
    return QueryWords(
        tuple((key, key_needles(key), known.get(key)) for key in keys),
        by_stem,
        frozenset(lexeme[:2] for lexeme in by_stem),
    )


Memo = dict[tuple[int, str], list[int]]
"""Positions already read, by ``(row id, word key)`` (an empty list: not in the row), shared
by the searches of one compound question (:func:`memdir.index._search.run_search`)."""


def positions_of(
    row: StoredRow, words: QueryWords, memo: Memo | None = None
) -> tuple[int, dict[str, list[int]]]:
    """Token count of a row and the positions of the query ``words`` in it (by word key).

    Read from the terms stored with the row (:mod:`memdir.index._unit_terms`), or from its
    text when none were (a short line), with the same result; from ``memo`` when it holds
    them, and kept there.
    """
    terms = row.terms
    if not terms:
        return _scan(row.content, words)
    if memo is not None:
        return row.words, _remembered(row, words, memo)
    where: dict[str, list[int]] = {}
    rowid = row.rowid
    for key, needles, known in words.lookups:
        if known is not None and rowid >= known[1] and rowid not in known[0]:
            continue
        if len(needles) == 1:
            needle = needles[0]
            start = terms.find(needle)
            if start < 0:
                continue
            start += len(needle)
            end = terms.find(" ", start)
            where[key] = [*map(int, terms[start : end if end >= 0 else None].split(","))]
        elif found := positions_at(terms, needles):
            where[key] = found
    return row.words, where


def _remembered(row: StoredRow, words: QueryWords, memo: Memo) -> dict[str, list[int]]:
    """:func:`positions_of` a row with stored terms, through ``memo``."""
    where: dict[str, list[int]] = {}
    rowid, terms = row.rowid, row.terms
    for key, needles, known in words.lookups:
        if known is not None and rowid >= known[1] and rowid not in known[0]:
            continue
        found = memo.get((rowid, key))
        if found is None:
            found = memo[rowid, key] = positions_at(terms, needles)
        if found:
            where[key] = found
    return where


def _scan(content: str, words: QueryWords) -> tuple[int, dict[str, list[int]]]:
    """:func:`positions_of` read from a row's text: what :func:`unit_terms` would store of it
    for the query's words (only tokens starting like one of them are stemmed)."""
    tokens = fast_tokens(content)
    prefixes, by_stem = words.prefixes, words.keys_by_stem
    where: dict[str, list[int]] = {}
    for i, token in enumerate(tokens, start=1):
        if token[:2] not in prefixes:
            continue
        if len(token) * 4 >= MAX_LEXEME and len(token.encode()) >= MAX_LEXEME:
            continue  # never stored
        for key in by_stem.get(stem(token), ()):
            found = where.setdefault(key, [])
            at = min(i, MAX_POSITION)
            if len(found) < MAX_POSITIONS and (not found or found[-1] != at):
                found.append(at)
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


def _gap(xs: list[int], ys: list[int]) -> int:
    """The smallest distance between a position of ``xs`` and one of ``ys`` (both sorted):
    each position of the shorter list is looked up in the longer one by bisection."""
    if len(xs) > len(ys):
        xs, ys = ys, xs
    n = len(ys)
    best = abs(xs[0] - ys[0])
    for x in xs:
        k = bisect_left(ys, x)
        if k < n and ys[k] - x < best:
            best = ys[k] - x
        if k and x - ys[k - 1] < best:
            best = x - ys[k - 1]
    return best


def _window_idf(found: list[tuple[list[int], float, int]], width: int) -> float:
    """The most idf of distinct matched terms standing within ``width`` tokens of each other
    (``found``: each term's sorted positions, idf and number; a sliding window)."""
    if max(f[0][-1] for f in found) - min(f[0][0] for f in found) < width:
        return sum(f[1] for f in found)  # all of them within one window
    if len(found) == 2:
        (xs, x_idf, _), (ys, y_idf, _) = found
        return x_idf + y_idf if _gap(xs, ys) < width else max(x_idf, y_idf)
    # Each position with its term's number in the low bits: one sort of plain ints.
    events = sorted([p << 7 | i for i, (where, _, _) in enumerate(found) for p in where])
    counts = [0] * len(found)
    idfs = [f[1] for f in found]
    total = sum(idfs)
    best = current = 0.0
    lo = 0
    for event in events:
        i = event & 127
        if counts[i] == 0:
            current += idfs[i]
        counts[i] += 1
        start = (event >> 7) - width
        while events[lo] >> 7 <= start:
            j = events[lo] & 127
            counts[j] -= 1
            if counts[j] == 0:
                current -= idfs[j]
            lo += 1
        if current > best:
            best = current
            if best >= total:
                break
    return best


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
        memo: Memo | None = None,
    ) -> None:
        self.terms = terms
        self._memo = memo
        self.dates = dates or None  # an empty cue names no day
        self.keys = tuple(dict.fromkeys(token for term in terms for token in term.tokens))
        # The rows known to hold a key (one-word terms, from their posting lists).
        self._holders: dict[str, Holders] = {}
        multi = {token for term in terms if len(term.tokens) > 1 for token in term.tokens}
        for term in terms:
            key = term.tokens[0]
            if term.holders is not None and len(term.tokens) == 1 and key not in multi:
                known = self._holders.get(key)
                self._holders[key] = (
                    term.holders
                    if known is None
                    else (known[0] | term.holders[0], max(known[1], term.holders[1]))
                )
        self._words = query_words(self.keys, self._holders)
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
        length, index = positions_of(row, self._words, self._memo)
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
        if config.window and length > config.window and len(found) > 1:
            matched_idf = _window_idf(found, config.window)
        if config.coverage and self.total_idf > 0:
            share = min(1.0, matched_idf / self.total_idf)
            score *= share**config.coverage_power
        if config.proximity and len(found) > 1:
            bonus = 0.0
            for i in range(len(found)):
                for j in range(i + 1, len(found)):
                    if config.proximity_adjacent and found[j][2] != found[i][2] + 1:
                        continue
                    gap = _gap(found[i][0], found[j][0])
                    bonus += min(found[i][1], found[j][1]) / (gap * gap if gap else 1)
            score += config.proximity_weight * bonus
        if config.length_power and length > config.length_free:
            score *= (config.length_free / length) ** config.length_power
        if config.rules and standing_rule(row.content):
            score *= 1 + config.rule_boost
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
    # Lines that read the same hold as many tokens, or one more (a numbered list marker): a
    # line is normalised (a pass over its whole text) only when a shown one is about as long.
    pending: dict[int, list[StoredRow]] = {}  # shown, not normalised yet, by token count
    normalised: set[int] = set()  # token counts of shown lines whose forms are in ``seen``
    for item in ranked:
        words = item.row.words
        span = (words - 1, words, words + 1)
        if any(n in pending or n in normalised for n in span):
            for n in span:
                for row in pending.pop(n, ()):
                    seen.add(normalize_bullet(row.content))
                    normalised.add(n)
            key = normalize_bullet(item.row.content)
            if key in seen:
                continue
            seen.add(key)
            normalised.add(words)
        else:
            pending.setdefault(words, []).append(item.row)
        out.append(item)
        if len(out) >= limit:
            break
    return out


def idf(df: int, total: int) -> float:
    """BM25 inverse document frequency (always positive)."""
    return math.log(1 + (total - df + 0.5) / (df + 0.5))
