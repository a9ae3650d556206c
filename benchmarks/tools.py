"""Cost of the memory tools per call, against the index calls underneath them.

For each corpus size: copy the deterministic corpus (see ``_corpus.py``) into a temporary
workspace, index it, then time, interleaved per query:

* ``index.search(q, 10)`` — the ranked FTS5 search alone;
* ``index.refresh()`` with nothing changed — the staleness check every tool search runs;
* ``memory_search(q, 10)`` — the tool: argument checks, refresh, search, formatting;

and separately ``memory_get(path, start, 50)`` on a 2,000-line ledger and ``memory_add(text)``
(locked append with fsync + re-index of today's ledger). Prints a markdown section.

Run: ``.venv/bin/python benchmarks/tools.py [--lines 10000 --lines 100000] [--queries 200]``
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import CorpusSpec, cached_corpus, default_cache_root, ledger_rels, load_pools
from _scale_queries import make_queries
from memdir.index import MemoryIndex
from memdir.tools import close_shared_indexes, memory_add, memory_get, memory_search
from memdir.workspace import Workspace


def _ms(samples: list[int]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{statistics.median(ordered) / 1e6:.2f} / {p95 / 1e6:.2f}"


def _time(fn: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def run_size(lines: int, queries: int, cache_root: Path) -> list[str]:
    """Time one corpus size; return its markdown table rows."""
    pools = load_pools()
    spec = CorpusSpec(lines=lines, lines_per_file=2000)
    source = cached_corpus(pools, spec, cache_root)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-tools-") as tmp:
        root = Path(tmp) / "ws"
        shutil.copytree(source, root, ignore=shutil.ignore_patterns(".complete"))
        fixed = datetime(2031, 1, 1, 9, 0, tzinfo=UTC)  # a day with no ledger in the corpus
        ws = Workspace(root, tz="UTC", clock=lambda: fixed)
        with MemoryIndex(ws) as index:
            build = _time(lambda: index.index_all_from_workspace())
        rels = ledger_rels(spec)
        qs, _ = make_queries(root, rels, per_count=max(1, queries // 3), max_terms=3, seed=7)
        index = MemoryIndex(ws).open()
        memory_search("warm up", workspace=ws)
        raw: list[int] = []
        refresh: list[int] = []
        tool: list[int] = []
        for n, query in enumerate(qs):
            steps = [
                (raw, lambda q=query.text: index.search(q, 10)),
                (refresh, index.refresh),
                (tool, lambda q=query.text: memory_search(q, 10, workspace=ws)),
            ]
            for k in range(3):  # rotate the order so no step always runs first
                bucket, fn = steps[(n + k) % 3]
                bucket.append(_time(fn))
        rng = random.Random(3)
        get = [
            _time(lambda: memory_get(rng.choice(rels), rng.randrange(1, 1950), 50, workspace=ws))
            for _ in range(len(qs))
        ]
        add = [
            _time(lambda i=i: memory_add(f"benchmark fact number {i}", workspace=ws))
            for i in range(min(100, len(qs)))
        ]
        index.close()
        close_shared_indexes()
    n = len(qs)
    return [
        f"| {lines:,} | index build (once) | {build / 1e9:.2f} s | 1 |",
        f"| {lines:,} | `index.search(q, 10)` | {_ms(raw)} | {n} |",
        f"| {lines:,} | `index.refresh()`, nothing changed | {_ms(refresh)} | {n} |",
        f"| {lines:,} | `memory_search(q, 10)` (checks, refresh, search, format) "
        f"| {_ms(tool)} | {n} |",
        f"| {lines:,} | `memory_get(path, start, 50)` | {_ms(get)} | {len(get)} |",
        f"| {lines:,} | `memory_add(text)` (fsync'd append, re-index) | {_ms(add)} | {len(add)} |",
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the markdown section."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, action="append", help="corpus size (repeatable)")
    parser.add_argument("--queries", type=int, default=150, help="queries per size")
    parser.add_argument("--cache", type=Path, default=None, help="corpus cache directory")
    args = parser.parse_args(argv)
    sizes = args.lines or [10_000, 100_000]
    load = os.getloadavg()
    rows = [
        row for n in sizes for row in run_size(n, args.queries, args.cache or default_cache_root())
    ]
    command = " ".join(["python benchmarks/tools.py", *(sys.argv[1:] if argv is None else argv)])
    print("## Memory tools per call\n")
    print(
        f"`{command}` — Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, load {load[0]:.1f} → {os.getloadavg()[0]:.1f}.\n"
    )
    print("| lines | call | median / p95 ms | calls |")
    print("|---:|---|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
