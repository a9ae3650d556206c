"""Query execution: candidate retrieval from the engine, then ranking in Python."""

from __future__ import annotations

from memdir.index._engine import Engine
from memdir.index._query import analyze_query
from memdir.index._types import SearchHit

__all__ = ["run_search"]


def run_search(engine: Engine, query: str, limit: int) -> list[SearchHit]:
    """Search ``engine`` for ``query``; at most ``limit`` hits, best first."""
    terms = analyze_query(query)
    active = [term for term in terms if not term.stop] or terms
    if not active:
        return []
    expression = " OR ".join(term.fts for term in active)
    ranked = engine.rank(expression, limit)
    rows = {row.rowid: row for row in engine.fetch([rowid for rowid, _ in ranked])}
    hits: list[SearchHit] = []
    for rowid, bm25 in ranked:
        row = rows.get(rowid)
        if row is None:
            continue
        hits.append(
            SearchHit(
                path=row.file.path,
                line_number=row.line_number,
                line_end=row.line_end,
                content=row.content,
                score=-bm25,
                heading=row.heading,
                archived=row.file.archived,
            )
        )
    return hits
