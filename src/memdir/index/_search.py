"""Query execution: bounded candidate retrieval, then ranking in Python.

FTS5 scores every row that matches before it can apply a ``LIMIT``, so asking it to rank an
``OR`` of common words costs time in proportion to their postings (hundreds of milliseconds
at a million lines). Instead:

1. The query is cut into terms (:mod:`memdir.index._query`); stopwords are dropped unless
   nothing else is left.
2. For each term FTS5 returns at most ``per_term`` row ids, newest first (a bounded walk of
   its posting list, no scoring). A short list is the term's exact document frequency; a
   full one gives an estimate from how far back it reached.
3. ``AND`` queries over the rarest terms add the rows that contain several of them even
   when a common term's list was cut short.
4. Rows are pre-ranked by the idf mass of the terms whose lists hold them, a long row's
   scaled by the scorer's length factor (token counts read for the rows that may be
   chosen); the best
   ``RankConfig.candidates`` are fetched and scored precisely by :class:`memdir.index._rank.Scorer`.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import defaultdict
from collections.abc import Collection, Container, Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from memdir.index import _rank
from memdir.index._clauses import Question, fuse_rankings, question_clauses
from memdir.index._dates import DateCue, date_cue
from memdir.index._engine import Engine, FileInfo, StoredRow
from memdir.index._feedback import with_feedback
from memdir.index._forms import word_forms, word_key
from memdir.index._query import Term, analyze_query
from memdir.index._rank import Memo, RankConfig, Scorer, WeightedTerm, finish, idf
from memdir.index._schema import LINE_BITS
from memdir.index._text import fold
from memdir.index._types import SearchHit

__all__ = ["hit_of", "run_search"]

MIN_PER_TERM = 200
MAX_AND_TERMS = 4
MAX_AND_FORMS = 4  # AND queries per conjunction when its words have irregular forms


def _phrases(term: Term) -> list[tuple[str, ...]]:
    """The phrases a term is looked up as: itself, and a word's irregular forms."""
    if len(term.tokens) != 1 or term.cjk:
        return [term.tokens]
    return [(form,) for form in word_forms(term.tokens[0])]


def _rowids_of_any(
    engine: Engine,
    alternatives: Iterable[list[tuple[str, ...]]],
    limit: int,
    *,
    within: tuple[int, int] | None = None,
) -> list[int]:
    """Up to ``limit`` ids of rows holding every phrase of any of ``alternatives``, newest
    first (:meth:`Engine.rowids` of each, merged)."""
    lists = [engine.rowids(phrases, limit, within=within) for phrases in alternatives]
    if len(lists) == 1:
        return lists[0]
    return sorted({rowid for ids in lists for rowid in ids}, reverse=True)[:limit]


def _term_rowids(
    engine: Engine, term: Term, limit: int, *, within: tuple[int, int] | None = None
) -> list[int]:
    """Up to ``limit`` ids of rows holding ``term`` in any of its forms, newest first."""
    return _rowids_of_any(engine, ([p] for p in _phrases(term)), limit, within=within)


_later_cache: tuple[dict[int, FileInfo], list[int], list[int]] | None = None


def _units_after(files: dict[int, FileInfo], file_id: int) -> int:
    """Units held by the files whose id is above ``file_id``.

    Suffix sums over the file table, kept for the last ``files`` mapping seen (the engine
    hands out a new one whenever the index changes).
    """
    global _later_cache
    cache = _later_cache
    if cache is None or cache[0] is not files:
        ids = sorted(files)
        suffix = [0] * (len(ids) + 1)
        for i in range(len(ids) - 1, -1, -1):
            suffix[i] = suffix[i + 1] + files[ids[i]].units
        cache = _later_cache = (files, ids, suffix)
    _, ids, suffix = cache
    return suffix[bisect.bisect_right(ids, file_id)]


_bounds_cache: tuple[dict[int, FileInfo], dict[int, tuple[int | None, int | None]]] | None = None


def _file_bounds(
    engine: Engine, files: dict[int, FileInfo], file_ids: set[int]
) -> dict[int, tuple[int | None, int | None]]:
    """The first and last unit of each file of ``file_ids`` (one batched lookup).

    Kept for the last ``files`` mapping seen (a new one whenever the index changes).
    """
    global _bounds_cache
    cache = _bounds_cache
    if cache is None or cache[0] is not files:
        cache = _bounds_cache = (files, {})
    known = cache[1]
    wanted = [f for f in file_ids if f not in known]
    if wanted:
        shift = LINE_BITS
        # Line 0 is never a unit (lines are 1-based), and no file reaches the last line.
        probes = [f << shift for f in wanted] + [((f + 1) << shift) - 1 for f in wanted]
        links = engine.neighbors(probes)
        for f in wanted:
            known[f] = (
                links.get(f << shift, (None, None))[1],
                links.get(((f + 1) << shift) - 1, (None, None))[0],
            )
    return known


def _units_from(engine: Engine, rowids: Collection[int]) -> dict[int, int]:
    """For each row id, the number of units whose id is that one or higher.

    Files after the row's own contribute their unit counts (:meth:`Engine.files_by_id`); in
    the row's file the units from its line to the file's last unit are estimated from the
    line span (one batched :meth:`Engine.neighbors` lookup finds the file's first and last
    unit), instead of counted: counting them costs a scan of the file's rows per term.
    """
    if not rowids:
        return {}
    files = engine.files_by_id()
    shift = LINE_BITS
    mask = (1 << shift) - 1
    bounds = _file_bounds(engine, files, {rowid >> shift for rowid in rowids})
    out: dict[int, int] = {}
    for rowid in rowids:
        file_id = rowid >> shift
        info = files.get(file_id)
        first, last = bounds.get(file_id, (None, None))
        if info is None or first is None or last is None or not first <= rowid <= last:
            out[rowid] = engine.rows_from(rowid)  # not a consistent view: count exactly
            continue
        share = ((last & mask) - (rowid & mask) + 1) / ((last & mask) - (first & mask) + 1)
        here = min(info.units, max(1, round(info.units * share)))
        out[rowid] = _units_after(files, file_id) + here
    return out


def _estimate_dfs(engine: Engine, lists: list[list[int]], cap: int, total: int) -> list[int]:
    """Document frequency of each term from its bounded list of row ids (newest first).

    A short list is exact; a full one is scaled by how far back into the index it reached.
    """
    reached = _units_from(engine, {ids[-1] for ids in lists if len(ids) >= cap})
    return [
        len(ids)
        if len(ids) < cap
        else min(total, max(cap, round(cap * total / max(1, reached[ids[-1]]))))
        for ids in lists
    ]


def _with_context(
    engine: Engine,
    scorer: Scorer,
    rows: dict[int, StoredRow],
    scores: dict[int, float],
    matching: Container[int],
    shared: _Shared | None = None,
) -> dict[int, float]:
    """Let the strongest rows lift their matching neighbours in the same section.

    ``matching`` holds every row known to contain a query term; only those can be lifted.
    """
    config = scorer.config
    top = heapq.nlargest(
        config.context_top, (r for r in scores if scores[r] > 0), key=scores.__getitem__
    )
    links = engine.neighbors(top)
    missing = [
        n
        for pair in links.values()
        for n in pair
        if n is not None and n not in rows and n in matching
    ]
    for row in _fetch(engine, missing, shared):
        rows[row.rowid] = row
        scores[row.rowid] = scorer.score(row)
    lifted = dict(scores)
    for rowid in top:
        source = rows[rowid]
        for other in links.get(rowid, (None, None)):
            if other is None or other not in rows or rows[other].head != source.head:
                continue
            if scores[other] <= 0:
                continue  # only lines that contain a query term are ever shown
            gain = config.context_weight * scores[rowid] * scorer.prior(rows[other])
            lifted[other] = max(lifted[other], scores[other] + gain)
    return lifted


def _pre_rank(lists: list[tuple[list[int], float]], wanted: int) -> dict[int, float]:
    """Sum of term weights per row, rarest lists first.

    Once the rarer lists have supplied enough rows, a more common term's list only adds
    weight to rows already found (a set intersection, done in C) instead of adding its many
    single-term rows, which could not outrank rows holding several terms.
    """
    pre: defaultdict[int, float] = defaultdict(float)
    for ids, gain in sorted(lists, key=lambda item: len(item[0])):
        if len(pre) < wanted * 4:
            for rowid in ids:
                pre[rowid] += gain
        else:
            for rowid in pre.keys() & ids:
                pre[rowid] += gain
    return pre


def _choose_with_lengths(
    engine: Engine, pre: dict[int, float], wanted: int, scorer: Scorer, config: RankConfig
) -> list[int]:
    """:func:`_choose`, a row longer than ``length_free`` tokens weighed as the scorer will
    weigh it (``(length_free / length) ** length_power`` of its pre-rank weight, ``pre`` is
    scaled in place): a page of an answer holds most words of any question, and without its
    length it would take the place of the short line that the scorer ranks above it.

    Only the lengths of rows that may be chosen are read: the best ``2 * wanted`` first, then
    more while a row scaled down lets another in (a weight not scaled yet is an upper bound),
    so a memory of short lines costs one small query.
    """
    free, power = config.length_free, config.length_power
    files = engine.files_by_id()
    known: set[int] = set()
    while True:
        ranked = _choose(pre, 2 * wanted, scorer, files)
        chosen = ranked[:wanted]  # what ``_choose(pre, wanted, ...)`` gives
        if known.issuperset(chosen):
            return chosen
        ahead = [rowid for rowid in ranked if rowid not in known]
        known.update(ahead)
        long = engine.lengths(ahead, free)
        if not long:
            return chosen  # nothing to scale: the order stands
        for rowid, words in long.items():
            pre[rowid] *= (free / words) ** power


_prior_cache: (
    tuple[dict[int, FileInfo], int | None, RankConfig, DateCue | None, dict[int, float]] | None
) = None


def _file_priors(
    scorer: Scorer, files: dict[int, FileInfo], file_ids: set[int]
) -> dict[int, float]:
    """:meth:`Scorer.file_prior` of the known files among ``file_ids`` (and maybe others).

    Kept for the last ``files`` mapping seen (a new one whenever the index changes) while the
    newest day, the configuration and the query's dates are the same: a file's prior depends
    on nothing else.
    """
    global _prior_cache
    cache = _prior_cache
    if (
        cache is None
        or cache[0] is not files
        or cache[1] != scorer.newest_day
        or cache[2] != scorer.config
        or cache[3] != scorer.dates
    ):
        cache = _prior_cache = (files, scorer.newest_day, scorer.config, scorer.dates, {})
    priors = cache[4]
    for file_id in file_ids - priors.keys():
        info = files.get(file_id)
        if info is not None:
            priors[file_id] = scorer.file_prior(info)
    return priors


def _choose(
    pre: dict[int, float], wanted: int, scorer: Scorer, files: dict[int, FileInfo]
) -> list[int]:
    """The ``wanted`` rows of best pre-rank times file prior (ties: the higher row id), best first.

    Only the rows whose key reaches the ``wanted``-th largest (found by sorting bare floats)
    are compared as ``(key, row id)`` tuples.
    """
    shift = LINE_BITS
    get = _file_priors(scorer, files, {rowid >> shift for rowid in pre}).get
    keys = [weight * get(rowid >> shift, 1.0) for rowid, weight in pre.items()]
    if len(keys) > wanted:
        floor = sorted(keys)[-wanted]
        best = [(key, rowid) for key, rowid in zip(keys, pre, strict=True) if key >= floor]
    else:
        best = list(zip(keys, pre, strict=True))
    best.sort(reverse=True)
    return [rowid for _, rowid in best[:wanted]]


def _add_conjunctions(
    engine: Engine,
    main: list[tuple[Term, int, float]],
    pre: dict[int, float],
    wanted: int,
    sizes: tuple[int, ...],
) -> None:
    """Rows holding all of the rarest ``size`` terms, for each size until enough are found.

    ``AND`` queries skip through the posting lists in FTS5, so they find rows holding several
    terms that cut-short lists may have missed.
    """
    by_rarity = sorted(main, key=lambda item: item[1])
    tried: set[int] = set()
    for size in sizes:
        size = min(size, len(by_rarity))
        if size in tried:
            continue
        tried.add(size)
        group = by_rarity[:size]
        bonus = sum(gain for _, _, gain in group)
        combos = itertools.product(*(_phrases(term) for term, _, _ in group))
        found = _rowids_of_any(
            engine, (list(combo) for combo in itertools.islice(combos, MAX_AND_FORMS)), wanted
        )
        for rowid in found:
            pre[rowid] = max(pre.get(rowid, 0.0), bonus)
        if len(found) >= wanted:
            break


def _with_dated_rows(
    engine: Engine,
    found: list[tuple[Term, list[int]]],
    cue: DateCue,
    per_term: int,
) -> list[tuple[Term, list[int]]]:
    """``found`` with the rows of the daily files ``cue`` names that a cut-short list missed.

    A term's list holds its newest rows; when it stops before the named files, the term is
    looked up again within the row ids of those files (from the first to the last of them).
    """
    files = engine.files_by_id()
    named = [file_id for file_id, info in files.items() if cue.weight(info.day)]
    if not named:
        return found
    lo, hi = min(named) << LINE_BITS, (max(named) + 1) << LINE_BITS
    out: list[tuple[Term, list[int]]] = []
    for term, ids in found:
        if len(ids) >= per_term and ids[-1] > lo:
            seen = set(ids)
            more = _term_rowids(engine, term, per_term, within=(lo, hi))
            ids = ids + [rowid for rowid in more if rowid not in seen]
        out.append((term, ids))
    return out


def run_search(
    engine: Engine,
    query: str,
    limit: int,
    *,
    today: date | None = None,
    terms: Sequence[Term] | None = None,
    questions: Sequence[Question] | None = None,
) -> list[SearchHit]:
    """Search ``engine`` for ``query``; at most ``limit`` hits, best first.

    ``today`` is the day the query's ``today`` and ``yesterday`` mean (the local date if not
    given); ``terms`` is :func:`analyze_query` of ``query`` and ``questions`` its
    :func:`question_clauses` when the caller has them already. A compound question is
    searched whole and question by question, the rankings fused (:mod:`memdir.index._clauses`).
    """
    if terms is None:
        terms = analyze_query(query)
    if questions is None:
        questions = question_clauses(query, terms)
    if not questions:
        return _search(engine, query, limit, today, terms)
    # The whole and its questions share most words and candidates: each row is read, and
    # each of its words looked for, once.
    shared = _Shared({}, {})
    rankings = [_search(engine, query, limit, today, terms, shared)]
    rankings += [_search(engine, q.text, limit, today, q.terms, shared) for q in questions]
    return fuse_rankings(rankings, limit)


@dataclass(frozen=True, slots=True)
class _Shared:
    """What the searches of one compound question share: rows read, positions found."""

    rows: dict[int, StoredRow]
    positions: Memo


def _fetch(engine: Engine, rowids: Sequence[int], shared: _Shared | None) -> list[StoredRow]:
    """:meth:`Engine.fetch` of ``rowids``, reading only those ``shared`` lacks (in the order
    the engines return them: by row id, which ties among equal scores follow)."""
    if shared is None:
        return engine.fetch(rowids)
    known = shared.rows
    for row in engine.fetch([rowid for rowid in rowids if rowid not in known]):
        known[row.rowid] = row
    return [known[rowid] for rowid in sorted(rowids) if rowid in known]


def _search(
    engine: Engine,
    query: str,
    limit: int,
    today: date | None,
    terms: Sequence[Term],
    shared: _Shared | None = None,
) -> list[SearchHit]:
    """:func:`run_search` of one question."""
    active = [term for term in terms if not term.stop] or terms
    if not active:
        return []
    total, avgdl = engine.totals()
    if total == 0:
        return []
    config = _rank.DEFAULT
    scale = {"": 1.0, "sub": config.subword_weight, "bi": config.bigram_weight}
    active = [term for term in active if scale[term.part] > 0]
    wanted = max(config.candidates, limit * config.per_hit)
    if len(active) == 1:
        per_term = wanted  # one term: every row holds it; take the newest
    else:
        per_term = max(MIN_PER_TERM, config.postings_budget // len(active))
    weighted: list[WeightedTerm] = []
    main: list[tuple[Term, int, float]] = []
    lists: list[tuple[list[int], float]] = []
    found = [(term, ids) for term in active if (ids := _term_rowids(engine, term, per_term))]
    # Below which row id each list may have missed rows (it was cut short there), or -1.
    floors = [ids[-1] if len(ids) >= per_term else -1 for _, ids in found]
    dfs = _estimate_dfs(engine, [ids for _, ids in found], per_term, total)
    cue = None
    if config.dates:
        cue = date_cue(
            query,
            today=today,
            after=config.date_after_days,
            after_weight=config.date_after_weight,
        )
        found = _with_dated_rows(engine, found, cue, per_term) if cue else found
    for (term, ids), df, floor in zip(found, dfs, floors, strict=True):
        # A plain word's list holds every row from its floor up that holds the word.
        plain = len(term.tokens) == 1 and not term.cjk and len(_phrases(term)) == 1
        wt = WeightedTerm(
            tuple(word_key(fold(token)) for token in term.tokens),
            idf(df, total),
            scale[term.part] * (1 + config.query_tf * math.log(term.count)),
            part=bool(term.part),
            holders=(frozenset(ids), floor) if plain else None,
        )
        weighted.append(wt)
        lists.append((ids, wt.idf * wt.weight))
        if not term.part:
            main.append((term, df, wt.idf * wt.weight))
    if not lists:
        return []
    pre = _pre_rank(lists, wanted)
    if 2 <= len(main) <= MAX_AND_TERMS and max(df for _, df, _ in main) >= per_term:
        # A common term's list was cut short: rows holding every term may be missing, or be
        # undercounted in ``pre``. An AND is cheap (FTS5 skips through the posting lists).
        _add_conjunctions(engine, main, pre, wanted, (len(main), 2))
    elif len(main) > MAX_AND_TERMS:
        # A long query (a pasted line): its rarest terms together pin the line down, while
        # the pre-rank undercounts rows whose other terms sat in cut-short lists.
        _add_conjunctions(engine, main, pre, wanted, (MAX_AND_TERMS,))
    scorer = Scorer(
        weighted,
        avgdl=avgdl,
        newest_day=engine.newest_day(),
        config=config,
        dates=cue,
        memo=None if shared is None else shared.positions,
    )
    if config.pre_length and config.length_power:
        chosen = _choose_with_lengths(engine, pre, wanted, scorer, config)
    else:
        chosen = _choose(pre, wanted, scorer, engine.files_by_id())
    rows = {row.rowid: row for row in _fetch(engine, chosen, shared)}
    scores = {rowid: scorer.score(row) for rowid, row in rows.items()}
    if config.context:
        scores = _with_context(engine, scorer, rows, scores, pre, shared)
    if config.feedback:
        scores = with_feedback(
            engine,
            rows,
            scores,
            terms,
            len(main),
            total=total,
            avgdl=avgdl,
            limit=limit,
            config=config,
        )
    return [
        hit_of(item.row, item.score) for item in finish(scores, rows, limit=limit, config=config)
    ]


def hit_of(row: StoredRow, score: float) -> SearchHit:
    """The public hit for a stored row (score rounded to 6 decimals)."""
    return SearchHit(
        path=row.file.path,
        line_number=row.line_number,
        line_end=row.line_end,
        content=row.content,
        score=round(score, 6),
        heading=row.heading,
        archived=row.file.archived,
    )
