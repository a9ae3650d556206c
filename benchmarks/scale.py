"""Scale benchmark of memdir's memory index against two baselines, side by side in one run.

For each corpus size it builds a deterministic synthetic memory (daily ledgers of 2,000 lines,
mixed English / Chinese / code, see ``_corpus.py``) in a temporary workspace and measures, for
memdir's ``MemoryIndex`` (public API only), a plain FTS5 ``unicode61`` table with a bm25 ``OR``
query, the reference case-insensitive substring scan, and two peers where installed (tantivy and
bm25s, configured as ``_peer_engines.py`` says; ``pip install -e '.[bench]'``):

* full build time, throughput and size on disk;
* search latency (p50 / p99, top 10) for 1-5-term queries drawn from corpus lines;
* the cost of re-indexing one ledger after appending 10 lines and after rewriting it;
* a recall sanity check against the substring truth (lines containing every term).

Usage::

    python benchmarks/scale.py --lines 100000 [--lines 1000000] [--queries 100] \
        [--json OUT] [--skip-baseline substring]

The machine may be shared: the load average is printed at the start and end of every size.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import memdir
from _corpus import (
    DEFAULT_SEED,
    CorpusSpec,
    TextPools,
    cached_corpus,
    default_cache_root,
    extra_bullets,
    generate_file,
    ledger_rels,
    load_pools,
)
from _peer_engines import Bm25sEngine, TantivyEngine, missing_packages, peer_directory
from _scale_engines import Engine, Fts5Engine, MemdirEngine, SubstringEngine, dir_size
from _scale_queries import Query, TruthIndex, make_queries
from _scale_report import WHOLE_LINE, EngineResult, QueryRecord, SizeResult, markdown
from memdir.workspace import Workspace

__all__ = ["main", "run_size"]

BASELINES = ("fts5", "substring", "tantivy", "bm25s")
PEERS = {"tantivy": TantivyEngine, "bm25s": Bm25sEngine}
TOP = 10
WARMUP = 5


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _ms_since(start: int) -> float:
    return (time.perf_counter_ns() - start) / 1e6


def _timed(action: object) -> float:
    start = time.perf_counter_ns()
    action()  # type: ignore[operator]
    return _ms_since(start)


def _search_phase(
    engines: list[Engine],
    results: dict[str, EngineResult],
    queries: list[Query],
    truth: TruthIndex,
    size: SizeResult,
    caps: dict[str, int],
) -> None:
    """Time every query on every engine; ``caps`` limits an engine's queries per term count."""
    for engine in engines:
        for query in queries[:WARMUP]:
            engine.search(query.text, TOP)
    gc.collect()
    for i, query in enumerate(queries):
        limit = len(truth.matches(query.terms, TOP))
        bucket = WHOLE_LINE if query.kind == "line" else len(query.terms)
        record = QueryRecord(text=query.text, kind=query.kind, terms=bucket, truth10=limit)
        # Rotate the order so no engine always runs right after another one's cache misses.
        for engine in engines[i % len(engines) :] + engines[: i % len(engines)]:
            res = results[engine.name]
            if len(res.latency_ms.get(record.terms, [])) >= caps.get(engine.name, len(queries)):
                continue
            start = time.perf_counter_ns()
            hits = engine.search(query.text, TOP)[:TOP]
            elapsed = _ms_since(start)
            good = sum(1 for rel, a, b in hits if truth.contains_all(rel, a, b, query.terms))
            share = min(good, limit) / limit if limit else 1.0
            res.latency_ms.setdefault(record.terms, []).append(elapsed)
            res.recall.setdefault(record.terms, []).append(share)
            record.ms[engine.name] = elapsed
            record.recall[engine.name] = share
        size.queries.append(record)
        if (i + 1) % 100 == 0:
            _log(f"  {i + 1}/{len(queries)} queries")


def _reindex_phase(
    ws: Workspace,
    pools: TextPools,
    spec: CorpusSpec,
    memdir: MemdirEngine,
    others: list[Engine],
    results: dict[str, EngineResult],
    reps: int,
    size: SizeResult,
) -> None:
    rels = ledger_rels(spec)
    index = len(rels) // 2
    rel = rels[index]
    day = spec.start + timedelta(days=index)

    def record(name: str, op: str, ms: float) -> None:
        results[name].reindex_ms.setdefault(op, []).append(ms)

    def append(rep: int, salt: int) -> None:
        lines = extra_bullets(pools, seed=spec.seed * 1000 + salt * 100 + rep, count=10, day=day)
        ws.append_text(rel, "\n".join(lines) + "\n")

    detected: list[int] = []
    for rep in range(reps):
        append(rep, 1)
        record("memdir", "append10_index_file", _timed(lambda: memdir.reindex(rel)))
        for engine in others:
            record(engine.name, "append10_index_file", _timed(lambda e=engine: e.reindex(rel)))
    for rep in range(reps):
        append(rep, 2)
        start = time.perf_counter_ns()
        detected.append(memdir.refresh())
        record("memdir", "append10_refresh", _ms_since(start))
    probe = extra_bullets(pools, seed=spec.seed * 1000 + 200 + reps - 1, count=10, day=day)[-1]
    # The whole line with its time: bodies are drawn from pools, so the same body is in many
    # lines of the corpus, and a newer copy may rank above the appended one.
    probe_text = probe.removeprefix("- ")
    lines_now = ws.read_text(rel).splitlines()
    hits = memdir.search(probe_text, TOP)
    size.checks["appended line found after refresh"] = any(
        r == rel and lines_now[a - 1].strip() == probe.strip() for r, a, _b in hits
    )
    variant = 0
    for _rep in range(reps):
        variant += 1
        ws.write_text(rel, generate_file(pools, spec, index, variant=variant))
        record("memdir", "rewrite_index_file", _timed(lambda: memdir.reindex(rel)))
        for engine in others:
            record(engine.name, "rewrite_index_file", _timed(lambda e=engine: e.reindex(rel)))
    for _rep in range(reps):
        variant += 1
        ws.write_text(rel, generate_file(pools, spec, index, variant=variant))
        start = time.perf_counter_ns()
        detected.append(memdir.refresh())
        record("memdir", "rewrite_refresh", _ms_since(start))
    for _rep in range(reps):
        start = time.perf_counter_ns()
        detected.append(memdir.refresh())
        record("memdir", "noop_refresh", _ms_since(start))
    size.checks["files re-indexed by each refresh()"] = detected


def run_size(
    pools: TextPools,
    spec: CorpusSpec,
    *,
    per_count: int,
    max_terms: int,
    reps: int,
    skip: set[str],
    cache_root: Path,
    substring_queries: int = 1_000_000,
    profile_dir: Path | None = None,
    keep: bool = False,
) -> SizeResult:
    """Measure every engine on one corpus size; the workspace is a fresh temporary copy."""
    source = cached_corpus(pools, spec, cache_root)
    root = Path(tempfile.mkdtemp(prefix=f"memdir-scale-{spec.lines}-"))
    try:
        shutil.copytree(source / "memory", root / "memory")
        ws = Workspace(root, tz="UTC")
        rels = ledger_rels(spec)
        size = SizeResult(
            lines=spec.lines,
            files=spec.files,
            corpus_bytes=dir_size(root / "memory"),
            load_start=os.getloadavg(),
        )
        _log(f"{spec.lines:,} lines in {root} (load {size.load_start[0]:.2f})")
        truth = TruthIndex(root, rels)
        queries, segmenter = make_queries(
            root, rels, per_count=per_count, max_terms=max_terms, whole_lines=per_count
        )
        size.checks["query segmenter"] = segmenter
        size.checks["corpus lines (non-blank)"] = truth.lines

        memdir = MemdirEngine(ws)
        engines: list[Engine] = [memdir]
        if "fts5" not in skip:
            engines.append(Fts5Engine(ws, Path(tempfile.mkdtemp(dir=root)) / "fts5.db"))
        if "substring" not in skip:
            engines.append(SubstringEngine(ws))
        for name, peer in PEERS.items():
            if name in skip:
                continue
            if missing := missing_packages(name):
                size.checks[f"{name} left out"] = "not installed: " + ", ".join(missing)
                continue
            engines.append(peer(ws, peer_directory(root, name)))
        results = {e.name: EngineResult(name=e.name) for e in engines}
        for engine in engines:
            if isinstance(engine, SubstringEngine):
                continue
            _log(f"  building {engine.name}")
            start = time.perf_counter_ns()
            rows = engine.build()
            results[engine.name].build_s = _ms_since(start) / 1000
            results[engine.name].rows = rows
            results[engine.name].size_bytes = engine.size_bytes()
        size.checks["memdir spans indexed"] = results["memdir"].rows

        _log(f"  searching ({len(queries)} queries)")
        caps = {"substring": substring_queries}
        _search_phase(engines, results, queries, truth, size, caps)
        if profile_dir is not None:
            profile_dir.mkdir(parents=True, exist_ok=True)
            with cProfile.Profile() as prof:
                for query in queries:
                    memdir.search(query.text, TOP)
            prof.dump_stats(profile_dir / f"memdir-search-{spec.lines}.prof")
        del truth

        _log("  re-indexing")
        # bm25s has no incremental update: its re-index is a full rebuild, timed once.
        others = [
            e
            for e in engines
            if e is not memdir and not isinstance(e, SubstringEngine | Bm25sEngine)
        ]
        _reindex_phase(ws, pools, spec, memdir, others, results, reps, size)
        if profile_dir is not None:
            with cProfile.Profile() as prof:
                memdir.build()
            prof.dump_stats(profile_dir / f"memdir-build-{spec.lines}.prof")
        for engine in engines:
            engine.close()
        size.engines = [results[e.name] for e in engines]
        size.load_end = os.getloadavg()
        return size
    finally:
        if keep:
            _log(f"  kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _fmt_load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(memdir.__file__).resolve().parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def _commit() -> str:
    """Commit of the memdir package measured, ``+modified`` if its source differs from it."""
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+modified" if _git("status", "--porcelain", "--", ".") else "")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, action="append", help="corpus size (repeatable)")
    parser.add_argument("--queries", type=int, default=100, help="queries per term count")
    parser.add_argument("--max-terms", type=int, default=5, help="largest query term count")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each re-index case")
    parser.add_argument("--lines-per-file", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--long-every",
        type=int,
        default=0,
        help="every Nth bullet a long one (a page of prose and code; 0: none)",
    )
    parser.add_argument(
        "--skip-baseline", action="append", default=[], choices=BASELINES, help="repeatable"
    )
    parser.add_argument(
        "--substring-queries",
        type=int,
        default=20,
        help="queries per term count timed for the substring scan (it reads every file)",
    )
    parser.add_argument("--json", type=Path, help="also write raw results to this file")
    parser.add_argument("--cache", type=Path, default=None, help="corpus cache directory")
    parser.add_argument("--stdlib-files", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspaces")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the markdown report on stdout."""
    args = _parser().parse_args(argv)
    sizes = args.lines or [100_000]
    if any(n < args.lines_per_file for n in sizes) or args.queries < 1 or args.reps < 1:
        _parser().error("--lines must be at least one file; --queries and --reps at least 1")
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    pools = load_pools(max_stdlib_files=args.stdlib_files)
    cache_root = args.cache or default_cache_root()
    results = [
        run_size(
            pools,
            CorpusSpec(
                lines=n,
                lines_per_file=args.lines_per_file,
                seed=args.seed,
                long_every=args.long_every,
            ),
            per_count=args.queries,
            max_terms=args.max_terms,
            reps=args.reps,
            skip=set(args.skip_baseline),
            cache_root=cache_root,
            substring_queries=args.substring_queries,
            profile_dir=args.profile,
            keep=args.keep,
        )
        for n in sizes
    ]
    command = " ".join(["python benchmarks/scale.py", *(sys.argv[1:] if argv is None else argv)])
    loads = f"{_fmt_load(load)} → {_fmt_load(os.getloadavg())}"
    header = [
        "## Scale run",
        "",
        f"`{command}` — started {started}, memdir {_commit()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, load {loads}.",
        "",
        f"Text: {len(pools.english):,} English docstring paragraphs, {len(pools.code):,} code "
        f"lines, {len(pools.chinese):,} Chinese lines from {pools.chinese_source}.",
    ]
    report = markdown(results, header=header, max_terms=args.max_terms)
    print(report)
    if args.json:
        payload = {
            "argv": argv if argv is not None else sys.argv[1:],
            "started": started,
            "commit": _commit(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "pools": pools.fingerprint,
            "sizes": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
