"""Session-level retrieval quality: a conversation's session, not its message, as the unit.

Published LoCoMo retrieval figures often score sessions: a query is answered when the
session holding its evidence comes first (Hit@1), and NDCG@5 rewards the relevant sessions
near the top. This scores the ranked doc lists of ``retrieval.py`` that way: each list is
collapsed to sessions in order of first appearance, a session is relevant when it holds one
of the query's relevant docs, and relevance is binary.

Usage::

    python benchmarks/session_level.py FILE.json [--embedder e5 [--embed-cache FILE]]
        [--from-json RESULTS.json] [--limit-corpora N]

``--from-json`` scores the per-query results a ``retrieval.py --json`` run wrote, without
searching again. LoCoMo's adversarial queries are left out, as in ``retrieval.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from retrieval import ADVERSARIAL, load_memret, run, sessions_of

__all__ = ["score_sessions", "session_metrics"]


def session_metrics(
    ranked: list[str], relevant: set[str], session_of: dict[str, str]
) -> dict[str, float]:
    """Hit@1, Hit@5 and NDCG@5 of one query, sessions as the unit."""
    sessions: list[str] = []
    for doc in ranked:
        session = session_of.get(doc)
        if session is not None and session not in sessions:
            sessions.append(session)
    wanted = {session_of[doc] for doc in relevant if doc in session_of}
    gains = [1.0 if s in wanted else 0.0 for s in sessions[:5]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(5, len(wanted))))
    return {
        "Hit@1": gains[0] if gains else 0.0,
        "Hit@5": 1.0 if any(gains) else 0.0,
        "NDCG@5": dcg / ideal if ideal else 0.0,
    }


def score_sessions(memret: Path, rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean session metrics of ``rows`` (``retrieval.run`` rows), overall and per category."""
    data, corpora, _ = load_memret(memret)
    corpus_of = {q["id"]: q["corpus"] for q in data["queries"]}
    session_of = {corpus["id"]: sessions_of(corpus["docs"]) for corpus in corpora}
    scored: dict[str, list[dict[str, float]]] = {}
    for row in rows:
        if row["category"] == ADVERSARIAL:
            continue
        metrics = session_metrics(
            row["ranked"], set(row["relevant"]), session_of[corpus_of[row["id"]]]
        )
        scored.setdefault("answerable", []).append(metrics)
        scored.setdefault(row["category"], []).append(metrics)
    return {
        group: {
            **{m: statistics.fmean(r[m] for r in items) for m in ("Hit@1", "Hit@5", "NDCG@5")},
            "n": len(items),
        }
        for group, items in scored.items()
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a memret/1 JSON file")
    parser.add_argument("--from-json", type=Path, help="results of retrieval.py --json")
    parser.add_argument("--embedder", help="hybrid search with this embedder (e.g. e5)")
    parser.add_argument("--embed-cache", type=Path, help="keep the embedder's vectors here")
    parser.add_argument("--limit-corpora", type=int, help="only the first N corpora")
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(args.from_json.read_text(encoding="utf-8"))
    else:
        from memdir.embeddings import embedder_from_string

        embedder = embedder_from_string(args.embedder) if args.embedder else None
        if embedder is not None and args.embed_cache:
            from _embed_cache import CachedEmbedder

            embedder = CachedEmbedder(embedder, args.embed_cache)
        result = run(args.file, limit_corpora=args.limit_corpora, embedder=embedder)
    print(f"{result['dataset']}: sessions as the unit ({result.get('embedder') or 'lexical'})")
    print(f"{'group':<26}{'n':>6}{'Hit@1':>9}{'Hit@5':>9}{'NDCG@5':>9}")
    for group, summary in score_sessions(args.file, result["rows"]).items():
        print(
            f"{group:<26}{int(summary['n']):>6}{summary['Hit@1']:>9.3f}"
            f"{summary['Hit@5']:>9.3f}{summary['NDCG@5']:>9.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
