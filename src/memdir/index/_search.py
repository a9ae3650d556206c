"""Query execution: term statistics, cheap candidate retrieval, then ranking in Python.

1. The query is cut into terms (:mod:`memdir.index._query`); stopwords are dropped unless
   nothing else is left.
2. Each term's document frequency comes from the ``fts5vocab`` view (CJK phrases: counted,
   capped); terms absent from the index are dropped.
3. Candidates: FTS5 ranks an ``OR`` of the rarest terms (BM25) and returns the best
   :data:`CANDIDATES`. Very common terms are left out of this step while rarer ones remain
   (their postings would dominate the cost) but still count in step 4.
4. :func:`memdir.index._rank.score_rows` re-ranks the candidates with every term.
"""

from __future__ import annotations

import math

from memdir.index import _rank
from memdir.index._engine import Engine, StoredRow
from memdir.index._porter import stem
from memdir.index._query import Term, analyze_query
from memdir.index._rank import Scorer, WeightedTerm, finish, idf
from memdir.index._text import fold
from memdir.index._types import SearchHit

__all__ = ["CANDIDATES", "run_search"]

CANDIDATES = 300
"""Rows re-ranked in Python per query (more when a caller asks for more hits)."""
POSTINGS_BUDGET = 60_000
"""Candidate generation stops adding terms once their postings would exceed this."""
PHRASE_COUNT_CAP = 20_000
"""Multi-token phrase frequencies are counted up to this (then estimated from the vocab)."""


def _doc_freqs(engine: Engine, terms: list[Term], stems: list[tuple[str, ...]]) -> list[int]:
    vocab = engine.vocab_counts([token for toks in stems for token in toks])
    out: list[int] = []
    for term, toks in zip(terms, stems, strict=True):
        upper = min(vocab.get(token, 0) for token in toks)
        if len(toks) == 1 and upper:
            out.append(upper)
        elif len(toks) > 1 and upper:
            cap = min(upper, PHRASE_COUNT_CAP)
            counted = engine.count(term.fts, cap)
            out.append(upper if counted >= cap else counted)
        else:
            # Not in the vocabulary under our stem: ask FTS5 itself (it stems the same way).
            out.append(engine.count(term.fts, PHRASE_COUNT_CAP))
    return out


def _with_context(
    engine: Engine, scorer: Scorer, rows: dict[int, StoredRow], scores: dict[int, float]
) -> dict[int, float]:
    """Let the strongest rows lift their neighbours in the same section (see ``_rank``)."""
    config = scorer.config
    top = sorted((rowid for rowid in scores if scores[rowid] > 0), key=scores.__getitem__)
    top = top[::-1][: config.context_top]
    links = engine.neighbors(top)
    missing = [n for pair in links.values() for n in pair if n is not None and n not in rows]
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


def run_search(engine: Engine, query: str, limit: int) -> list[SearchHit]:
    """Search ``engine`` for ``query``; at most ``limit`` hits, best first."""
    terms = analyze_query(query)
    active = [term for term in terms if not term.stop] or terms
    if not active:
        return []
    total, avgdl = engine.totals()
    if total == 0:
        return []
    stems = [tuple(stem(fold(token)) for token in term.tokens) for term in active]
    dfs = _doc_freqs(engine, active, stems)
    present = [
        (WeightedTerm(toks, idf(df, total), 1 + math.log(term.count)), term, df)
        for term, toks, df in zip(active, stems, dfs, strict=True)
        if df > 0
    ]
    if not present:
        return []
    by_rarity = sorted(present, key=lambda item: item[2])
    chosen: list[Term] = []
    postings = 0
    for _, term, df in by_rarity:
        if chosen and postings + df > POSTINGS_BUDGET:
            break
        chosen.append(term)
        postings += df
    expression = " OR ".join(term.fts for term in chosen)
    ranked = engine.rank(expression, max(CANDIDATES, limit * 3))
    config = _rank.DEFAULT
    rows = {row.rowid: row for row in engine.fetch([rowid for rowid, _ in ranked])}
    scorer = Scorer(
        [weighted for weighted, _, _ in present],
        avgdl=avgdl,
        newest_day=engine.newest_day(),
        config=config,
    )
    scores = {rowid: scorer.score(row) for rowid, row in rows.items()}
    if config.context:
        scores = _with_context(engine, scorer, rows, scores)
    scored = finish(scores, rows, limit=limit, config=config)
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
        for item in scored
    ]
