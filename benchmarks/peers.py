"""Retrieval quality of memdir beside tantivy and bm25s, side by side in one run.

Every engine gets the same corpus files and the same questions, under the protocol of
``retrieval.py`` (one fresh workspace per corpus, one doc per bullet, 50 results, hits mapped
to doc ids in order, de-duplicated, scored by ``retrieval.score_query``):

* ``memdir``: :class:`memdir.MemoryIndex` with its defaults (lexical; ``--embedder e5`` adds
  ``memdir-hybrid``, every line embedded before the questions);
* ``tantivy``: the ``tantivy`` package, one document per non-blank line, pre-tokenised by
  rjieba, the ``default`` tokenizer, the question's words OR-ed; ``tantivy-en_stem`` the same
  with English stemming (``_peer_engines.py``);
* ``bm25s``: rjieba, English and Chinese stopwords, PyStemmer's English stemmer.

Usage::

    pip install -e '.[bench]'
    python benchmarks/peers.py $BENCH/locomo/memret.json $BENCH/madial-bench/memret_zh.json \\
        [--engines memdir,tantivy,bm25s] [--limit-corpora N] [--json OUT]

The questions of a corpus go to the engines in turn, so the latency columns are comparable;
LoCoMo's adversarial questions are scored apart, as ``retrieval.py`` does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from _peer_engines import Bm25sEngine, TantivyEngine, missing_packages
from memdir import MemoryIndex, Workspace
from memdir.embeddings import Embedder, embedder_from_string
from retrieval import (
    ADVERSARIAL,
    LIMIT,
    load_memret,
    ranked_docs,
    score_query,
    sessions_of,
    write_corpus,
)

ENGINES = ("memdir", "tantivy", "tantivy-en_stem", "bm25s")
SHOWN = ("R@5", "R@1", "R@10", "MRR", "empty")


class _Hit(NamedTuple):
    path: str
    line_number: int
    line_end: int


Search = Callable[[str], list[Any]]


def _open_engines(
    names: list[str], ws: Workspace, root: Path, embedder: Embedder | None
) -> tuple[dict[str, Search], list[Callable[[], None]]]:
    """A search function per engine over the corpus in ``ws`` (built here), and closers."""
    searches: dict[str, Search] = {}
    closers: list[Callable[[], None]] = []
    for name in names:
        if name == "memdir":
            lexical = MemoryIndex(ws, embedder=False)
            lexical.index_all_from_workspace()
            searches[name] = lambda q, index=lexical: index.search(q, limit=LIMIT)
            closers.append(lexical.close)
            if embedder is not None:
                hybrid = MemoryIndex(ws, embedder=embedder)
                hybrid.index_all_from_workspace()
                hybrid.embed_pending()
                searches["memdir-hybrid"] = lambda q, index=hybrid: index.search(q, limit=LIMIT)
                closers.append(hybrid.close)
            continue
        if name.startswith("tantivy"):
            tokenizer = name.partition("-")[2] or "default"
            peer: TantivyEngine | Bm25sEngine = TantivyEngine(
                ws, root / f".{name}", tokenizer=tokenizer
            )
        else:
            peer = Bm25sEngine(ws, root / f".{name}")
        peer.build()
        searches[name] = lambda q, engine=peer: [_Hit(*h) for h in engine.search(q, LIMIT)]
        closers.append(peer.close)
    return searches, closers


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {m: statistics.fmean(r["metrics"][m] for r in rows) for m in SHOWN}
    lat = sorted(r["ms"] for r in rows)
    out["p50_ms"] = statistics.median(lat)
    out["p99_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    out["n"] = len(rows)
    return out


def run(
    path: Path, names: list[str], *, limit_corpora: int | None, embedder: Embedder | None
) -> dict[str, Any]:
    """Every engine of ``names`` on one memret/1 file; summaries per engine and group."""
    data, corpora, by_corpus = load_memret(path, limit_corpora=limit_corpora)
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="memdir-peers-") as tmp:
        for number, corpus in enumerate(corpora):
            root = Path(tmp) / f"c{number}"
            where = write_corpus(root, corpus["docs"])
            session_of = sessions_of(corpus["docs"])
            searches, closers = _open_engines(names, Workspace(root, tz="UTC"), root, embedder)
            try:
                for query in by_corpus.get(corpus["id"], []):
                    relevant = set(query.get("relevant") or [])
                    if not relevant:
                        continue
                    for name, search in searches.items():
                        started = time.perf_counter()
                        hits = search(query["text"])
                        ms = (time.perf_counter() - started) * 1000
                        ranked = ranked_docs(hits, where)
                        rows[name].append(
                            {
                                "id": query["id"],
                                "category": query.get("category") or "all",
                                "ms": ms,
                                "metrics": score_query(ranked, relevant, session_of),
                            }
                        )
            finally:
                for close in closers:
                    close()
    summaries: dict[str, dict[str, dict[str, float]]] = {}
    for name, engine_rows in rows.items():
        answerable = [r for r in engine_rows if r["category"] != ADVERSARIAL]
        groups = {"answerable": answerable}
        if len(answerable) < len(engine_rows):
            groups[ADVERSARIAL] = [r for r in engine_rows if r["category"] == ADVERSARIAL]
        summaries[name] = {group: _summary(rs) for group, rs in groups.items() if rs}
    return {"file": str(path), "dataset": data.get("dataset"), "summaries": summaries}


def _print(results: list[dict[str, Any]]) -> None:
    for result in results:
        print(f"\n{result['dataset']} ({result['file']})\n")
        print("| engine | group | n | " + " | ".join(SHOWN) + " | p50 ms | p99 ms |")
        print("|---|---|---:|" + "---:|" * (len(SHOWN) + 2))
        for name, groups in result["summaries"].items():
            for group, s in groups.items():
                cells = " | ".join(f"{s[m]:.3f}" for m in SHOWN)
                print(
                    f"| {name} | {group} | {int(s['n'])} | {cells} | {s['p50_ms']:.2f}"
                    f" | {s['p99_ms']:.2f} |"
                )
    print("\nR@5 (answerable questions), best of each set in bold:\n")
    names = list(dict.fromkeys(n for r in results for n in r["summaries"]))
    print("| engine | " + " | ".join(str(r["dataset"]) for r in results) + " |")
    print("|---|" + "---:|" * len(results))
    best = [max(s["answerable"]["R@5"] for s in r["summaries"].values()) for r in results]
    for name in names:
        cells = []
        for result, top in zip(results, best, strict=True):
            value = result["summaries"].get(name, {}).get("answerable", {}).get("R@5")
            text = "–" if value is None else f"{value:.3f}"
            cells.append(f"**{text}**" if value is not None and value == top else text)
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="memret/1 JSON files")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma list of engines")
    parser.add_argument("--embedder", help="also memdir hybrid with this embedder (e.g. e5)")
    parser.add_argument("--limit-corpora", type=int, help="only the first N corpora of a file")
    parser.add_argument("--json", type=Path, help="write the summaries here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        parser.error(f"unknown engines: {', '.join(unknown)} (known: {', '.join(ENGINES)})")
    for name in list(names):
        base = name.partition("-")[0]
        if base != "memdir" and (missing := missing_packages(base)):
            print(f"{name}: left out, needs {', '.join(missing)} (pip install -e '.[bench]')")
            names.remove(name)
    embedder = embedder_from_string(args.embedder) if args.embedder else None
    results = [
        run(path, names, limit_corpora=args.limit_corpora, embedder=embedder) for path in args.files
    ]
    _print(results)
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
