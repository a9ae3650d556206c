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
4. Rows are pre-ranked by the idf mass of the terms whose lists hold them; the best
   ``RankConfig.candidates`` are fetched and scored precisely by :class:`memdir.index._rank.Scorer`.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Container

from memdir.index import _rank
from memdir.index._engine import Engine, FileInfo, StoredRow
from memdir.index._porter import stem
from memdir.index._query import Term, analyze_query
from memdir.index._rank import Scorer, WeightedTerm, finish, idf
from memdir.index._schema import LINE_BITS
from memdir.index._text import fold
from memdir.index._types import SearchHit

__all__ = ["run_search"]

MIN_PER_TERM = 200
MAX_AND_TERMS = 4


def _estimate_df(engine: Engine, ids: list[int], cap: int, total: int) -> int:
    if len(ids) < cap:
        return len(ids)
    reached = max(1, engine.rows_from(ids[-1]))
    return min(total, max(cap, round(cap * total / reached)))


def _with_context(
    engine: Engine,
    scorer: Scorer,
    rows: dict[int, StoredRow],
    scores: dict[int, float],
    matching: Container[int],
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
    for row in engine.fetch(missing):
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


def _choose(
    pre: dict[int, float], wanted: int, scorer: Scorer, files: dict[int, FileInfo]
) -> list[int]:
    """The ``wanted`` rows of best pre-rank times file prior (ties: the higher row id), best first.

    Priors are computed only for the files that hold candidates; the heap compares plain
    tuples (no key function called per row).
    """
    shift = LINE_BITS
    prior = {
        file_id: scorer.file_prior(files[file_id])
        for file_id in {rowid >> shift for rowid in pre}
        if file_id in files
    }
    get = prior.get
    keyed = [(weight * get(rowid >> shift, 1.0), rowid) for rowid, weight in pre.items()]
    return [rowid for _, rowid in heapq.nlargest(wanted, keyed)]


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
        found = engine.rowids(" AND ".join(term.fts for term, _, _ in group), wanted)
        for rowid in found:
            pre[rowid] = max(pre.get(rowid, 0.0), bonus)
        if len(found) >= wanted:
            break


def run_search(engine: Engine, query: str, limit: int) -> list[SearchHit]:
    """Search ``engine`` for ``query``; at most ``limit`` hits, best first."""
    terms = analyze_query(query)
    active = [term for term in terms if not term.stop] or terms
    if not active:
        return []
    total, avgdl = engine.totals()
    if total == 0:
        return []
    config = _rank.DEFAULT
    scale = {"": 1.0, "sub": config.subword_weight, "bi": config.bigram_weight}
    active = [term for term in active if scale[term.part] > 0]
    wanted = max(config.candidates, limit * 3)
    if len(active) == 1:
        per_term = wanted  # one term: every row holds it; take the newest
    else:
        per_term = max(MIN_PER_TERM, config.postings_budget // len(active))
    weighted: list[WeightedTerm] = []
    main: list[tuple[Term, int, float]] = []
    lists: list[tuple[list[int], float]] = []
    for term in active:
        ids = engine.rowids(term.fts, per_term)
        if not ids:
            continue
        df = _estimate_df(engine, ids, per_term, total)
        wt = WeightedTerm(
            tuple(stem(fold(token)) for token in term.tokens),
            idf(df, total),
            scale[term.part] * (1 + config.query_tf * math.log(term.count)),
            part=bool(term.part),
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
    scorer = Scorer(weighted, avgdl=avgdl, newest_day=engine.newest_day(), config=config)
    chosen = _choose(pre, wanted, scorer, engine.files_by_id())
    rows = {row.rowid: row for row in engine.fetch(chosen)}
    scores = {rowid: scorer.score(row) for rowid, row in rows.items()}
    if config.context:
        scores = _with_context(engine, scorer, rows, scores, pre)
    return [
        SearchHit(
            path=item.row.file.path,
            line_number=item.row.line_number,
            line_end=item.row.line_end,
            content=item.row.content,
            score=round(item.score, 6),
            heading=item.row.heading,
            archived=item.row.file.archived,
        )
        for item in finish(scores, rows, limit=limit, config=config)
    ]
