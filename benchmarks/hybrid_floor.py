"""Calibrate the similarity floor of hybrid search for an embedder (offline, no LLM).

A line found only by the vector ranking must reach the embedder's floor
(``memdir.index._hybrid.min_similarity``): every query has a nearest line, however unrelated.
This script measures, on memret/1 files laid out as ``retrieval.py`` lays them out:

1. the cosine similarity of the lines the vector ranking finds (the 50 nearest of each
   query vector) that the lexical ranking does not, relevant and unrelated apart, and of
   those among the 10 results a search shows without a floor (what a floor hides);
2. the best similarity of real questions and of *junk probes*: queries that ask about
   nothing in the memory (unrelated word pairs, made-up tokens; a fixed list below), and
   what share of the probes without a lexical match returns nothing at each floor;
3. R@5 / R@10 / MRR (as ``retrieval.py``) at each floor of ``--floors``.

Usage::

    python benchmarks/hybrid_floor.py FILE.json [FILE.json ...] --embedder e5
        [--embed-cache FILE] [--floors 0,0.8,0.83,default] [--probe-corpora 50] [--json OUT]

``--embed-cache`` keeps the vectors between runs (``retrieval.py``'s cache: one file may
serve every set).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from _embed_cache import CachedEmbedder
from memdir import MemoryIndex, Workspace
from memdir.embeddings import Embedder, embedder_from_string
from memdir.index._clauses import question_clauses
from memdir.index._engine import Engine
from memdir.index._hybrid import MIN_SIMILARITY_ENV, lexical_rows, nearest
from memdir.index._query import analyze_query
from memdir.index._schema import LINE_BITS
from memdir.index._search import run_search
from retrieval import (
    ADVERSARIAL,
    LIMIT,
    load_memret,
    ranked_docs,
    score_query,
    sessions_of,
    write_corpus,
)

PROBES = (
    # unrelated word pairs and triples (none of them is in the sets' memories)
    "xylophone quantum",
    "purple elephant banjo",
    "tungsten photosynthesis",
    "zeppelin marmalade",
    "glacier trombone",
    "quasar lasagna",
    "hedgehog calculus",
    "platypus thermodynamics",
    "kaleidoscope carburetor",
    "meteorite accordion",
    "volcanic origami submarine",
    "saxophone avalanche",
    "walrus spreadsheet",
    "nebula pretzel",
    "mongoose trigonometry",
    "harpsichord lava",
    "chameleon antifreeze",
    "pelican semiconductor",
    "tarantula cappuccino",
    "obsidian flamingo",
    # made-up tokens and identifiers
    "zqxjvwk",
    "blorptangle",
    "vlorbix gramptuous",
    "kfjdhsqw",
    "xkcd7734",
    "a3f9c2e1b7d4",
    "SKU-99812-ZQ",
    "qwzx plombitude",
    "frumious snarkwidget",
    "zzyzx",
    # questions about things no memory holds
    "What is the airspeed velocity of an unladen swallow?",
    "How many moons does Neptune have?",
    "Which firmware does the xylophone controller run?",
    "What did the quantum accountant say about the zeppelin?",
    # Chinese (characters may match lexically: such probes are counted apart)
    "量子木琴",
    "紫色大象班卓琴",
    "火山折纸潜艇",
    "鸭嘴兽热力学",
    "陨石手风琴",
    "萨克斯雪崩",
)
DEFAULT_FLOORS = "0,0.8,0.81,0.82,0.825,0.83,0.835,0.84,0.845,0.85,0.86,default"
SHOWN = 10
"""Results a search shows (the tools' default)."""
PERCENTILES = (5, 10, 25, 50, 75, 90, 95)
_CJK = re.compile("[\u3400-\u9fff]")


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    out: dict[str, float] = {"n": len(ordered)}
    for p in PERCENTILES:
        out[f"p{p}"] = round(ordered[min(len(ordered) - 1, len(ordered) * p // 100)], 4)
    out["min"] = round(ordered[0], 4)
    out["max"] = round(ordered[-1], 4)
    return out


def _vector_side(
    index: MemoryIndex, query: str, today: Any
) -> tuple[list[tuple[str, int]], dict[tuple[str, int], float], int]:
    """The lexical hits (path, line) at fusion depth, the best similarity of each line the
    vector rankings found, and the fusion depth."""
    terms = analyze_query(query)
    questions = question_clauses(query, terms)
    dense, vectors = index._query_side([query, *(q.text for q in questions)], terms)
    depth = LIMIT

    def go(engine: Engine) -> tuple[list[tuple[str, int]], dict[tuple[str, int], float]]:
        with engine.snapshot():
            words = run_search(engine, query, depth, today=today, terms=terms, questions=questions)
            paths = {file_id: info.path for file_id, info in engine.files_by_id().items()}
            mask = (1 << LINE_BITS) - 1
            lexical = [(paths[row >> LINE_BITS], row & mask) for row in lexical_rows(engine, words)]
            best: dict[tuple[str, int], float] = {}
            if dense is not None:
                for vector in vectors:
                    for rowid, sim in nearest(dense, engine, vector, depth):
                        key = (paths[rowid >> LINE_BITS], rowid & mask)
                        best[key] = max(sim, best.get(key, -1.0))
            return lexical, best

    lexical, best = index._run(go, writes=False)
    return lexical, best, depth


def run(
    path: Path, embedder: Any, floors: list[float | None], *, probe_corpora: int = 50
) -> dict[str, Any]:
    """Distributions and per-floor metrics of one memret/1 file.

    Each floor is set in turn through ``$MEMDIR_MIN_SIMILARITY`` (``None``: the embedder's
    own). The junk probes are asked in at most ``probe_corpora`` corpora, spread over the
    file."""
    data, corpora, queries_by_corpus = load_memret(path)
    sims: dict[str, list[float]] = defaultdict(list)
    rows: dict[float | None, list[dict[str, Any]]] = defaultdict(list)
    probes: dict[tuple[float | None, str], list[int]] = defaultdict(list)  # results per probe
    probe_lexical = 0
    step = max(1, -(-len(corpora) // probe_corpora))
    with tempfile.TemporaryDirectory(prefix="memdir-floor-") as tmp:
        for number, corpus in enumerate(corpora):
            root = Path(tmp) / f"c{number}"
            where = write_corpus(root, corpus["docs"])
            session_of = sessions_of(corpus["docs"])
            line_of = {doc: key for key, doc in where.items()}
            ws = Workspace(root, tz="UTC")
            with MemoryIndex(ws, embedder=embedder) as index:
                index.index_all_from_workspace()
                index.embed_pending()
                today = ws.today()
                for query in queries_by_corpus.get(corpus["id"], []):
                    relevant = set(query.get("relevant") or [])
                    if not relevant:
                        continue
                    kind = "adversarial" if query.get("category") == ADVERSARIAL else "answerable"
                    lexical, best, _ = _vector_side(index, query["text"], today)
                    if best:
                        sims[f"{kind} best"].append(max(best.values()))
                    found = set(lexical)
                    for key, sim in best.items():
                        if key in found:
                            continue
                        label = "relevant" if where.get(key) in relevant else "unrelated"
                        sims[f"{kind} vector-only {label}"].append(sim)
                    _set_floor(0.0)
                    shown = ranked_docs(index.search(query["text"], limit=SHOWN), where)
                    for doc in shown:
                        key = line_of[doc]
                        if key not in found and key in best:
                            label = "relevant" if doc in relevant else "unrelated"
                            sims[f"{kind} vector-only shown, {label}"].append(best[key])
                    for floor in floors:
                        _set_floor(floor)
                        hits = index.search(query["text"], limit=LIMIT)
                        rows[floor].append(
                            {
                                "kind": kind,
                                "metrics": score_query(
                                    ranked_docs(hits, where), relevant, session_of
                                ),
                            }
                        )
                for probe in PROBES if number % step == 0 else ():
                    lexical, best, _ = _vector_side(index, probe, today)
                    if lexical:
                        probe_lexical += 1
                        continue
                    script = "zh" if _CJK.search(probe) else "en"
                    if best:
                        sims[f"junk probe best, {script}"].append(max(best.values()))
                    for floor in floors:
                        _set_floor(floor)
                        probes[floor, script].append(len(index.search(probe, limit=SHOWN)))
    result: dict[str, Any] = {
        "file": str(path),
        "dataset": data.get("dataset"),
        "embedder": embedder.name,
        "similarities": {name: _percentiles(values) for name, values in sorted(sims.items())},
        "shown and junk similarities": {
            name: sorted(round(v, 4) for v in values)
            for name, values in sorted(sims.items())
            if "shown" in name or "junk" in name
        },
        "probes": {
            "asked": len(PROBES) * len(range(0, len(corpora), step)),
            "without lexical match, en / zh": (
                len(probes[floors[0], "en"]) if floors else 0,
                len(probes[floors[0], "zh"]) if floors else 0,
            ),
            "lexical match (not counted)": probe_lexical,
        },
        "floors": {},
    }
    for floor in floors:
        summary: dict[str, float] = {}
        for kind in ("answerable", "adversarial"):
            chosen = [r["metrics"] for r in rows[floor] if r["kind"] == kind]
            if chosen:
                for metric in ("R@5", "R@10", "MRR", "empty"):
                    summary[f"{kind} {metric}"] = round(
                        statistics.fmean(m[metric] for m in chosen), 4
                    )
        for label in ("relevant", "unrelated"):
            seen = sims[f"answerable vector-only shown, {label}"]
            if seen and floor is not None:
                kept = sum(sim >= floor for sim in seen) / len(seen)
                summary[f"vector-only shown {label} kept"] = round(kept, 4)
        for script in ("en", "zh"):
            counts = probes[floor, script]
            if counts:
                empty = sum(c == 0 for c in counts) / len(counts)
                summary[f"{script} probes without results"] = round(empty, 4)
                summary[f"{script} probe results (of {SHOWN})"] = round(statistics.fmean(counts), 2)
        result["floors"]["default" if floor is None else str(floor)] = summary
    return result


def _set_floor(floor: float | None) -> None:
    if floor is None:
        os.environ.pop(MIN_SIMILARITY_ENV, None)
    else:
        os.environ[MIN_SIMILARITY_ENV] = str(floor)


def _print(result: dict[str, Any]) -> None:
    print(f"{result['dataset']} ({result['embedder']}); probes: {result['probes']}")
    for name, stats in result["similarities"].items():
        cells = " ".join(f"{key} {value}" for key, value in stats.items())
        print(f"  {name:<42} {cells}")
    for floor, summary in result["floors"].items():
        cells = "  ".join(f"{key} {value}" for key, value in summary.items())
        print(f"  floor {floor:<6} {cells}")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="memret/1 JSON files")
    parser.add_argument("--embedder", default="e5", help="the embedder to calibrate")
    parser.add_argument("--embed-cache", type=Path, help="keep vectors in this SQLite file")
    parser.add_argument(
        "--floors",
        default=DEFAULT_FLOORS,
        help="comma list of floors to measure (default: the embedder's own)",
    )
    parser.add_argument(
        "--probe-corpora", type=int, default=50, help="ask the junk probes in this many corpora"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    floors = [
        None if f.strip() == "default" else float(f) for f in args.floors.split(",") if f.strip()
    ]
    embedder: Embedder = embedder_from_string(args.embedder)
    if args.embed_cache:
        embedder = CachedEmbedder(embedder, args.embed_cache)
    results = []
    for path in args.files:
        result = run(path, embedder, floors, probe_corpora=args.probe_corpora)
        _print(result)
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
