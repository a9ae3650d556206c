"""Cost of ``memory_add`` as the day's ledger grows, this code beside an older commit.

For each ledger size (in blocks of one ``## Memory Add`` header and one bullet, as
``memory_add`` writes them): a fresh workspace whose ledger for today already holds that many
blocks, indexed; a few warm-up adds, then ``--adds`` timed calls of
``memdir.tools._core.add_memory`` (fsync'd locked append, then indexing) in one process.
Reported per add: median and p95 wall time, and the bytes the process read (``rchar`` of
``/proc/self/io``: page-cache reads count too, which is the work an add does).

The baseline runs the same measurement on a ``git worktree`` of ``--baseline`` (default: the
last commit before appends were indexed from their own bytes), in a subprocess with its
``src`` first on ``PYTHONPATH``.

Usage::

    python benchmarks/append.py [--blocks 1000 --blocks 10000 --blocks 40000] [--adds 200]
        [--baseline REV | --no-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "60bf7d4^"
"""The last commit where an add re-read and re-hashed the whole ledger."""
PROC_IO = Path("/proc/self/io")


def _bytes_read() -> int | None:
    if not PROC_IO.exists():
        return None
    for line in PROC_IO.read_text(encoding="ascii").splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return None


def _day(blocks: int) -> str:
    return "".join(
        f"\n## Memory Add — 2026-11-30T08:{i % 60:02d}:00Z\n- fact {i} about the pangolin plan\n"
        for i in range(blocks)
    )


def measure(blocks: int, adds: int) -> dict[str, Any]:
    """Time ``adds`` calls of ``add_memory`` on a ledger of ``blocks`` blocks (this process)."""
    from memdir.tools._core import add_memory, close_shared_indexes, shared_index
    from memdir.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="memdir-bench-append-") as tmp:
        ws = Workspace(
            Path(tmp) / "ws", tz="UTC", clock=lambda: datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        )
        rel = ws.ledger_rel()
        ws.write_text(rel, _day(blocks))
        shared_index(ws).refresh()
        for i in range(5):
            add_memory(ws, f"warm-up fact {i}")
        size = (ws.root / rel).stat().st_size
        times: list[float] = []
        before = _bytes_read()
        for i in range(adds):
            started = time.perf_counter()
            add_memory(ws, f"the otter fact number {i}")
            times.append(time.perf_counter() - started)
        after = _bytes_read()
        close_shared_indexes()
    ordered = sorted(times)
    return {
        "blocks": blocks,
        "ledger_bytes": size,
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
        "read_per_add": None if before is None or after is None else (after - before) // adds,
    }


def _run(src: Path, blocks: list[int], adds: int) -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, __file__, "--worker", "--adds", str(adds)]
        + [arg for n in blocks for arg in ("--blocks", str(n))],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=src.parent,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _kb(value: int | None) -> str:
    return "–" if value is None else f"{value / 1024:,.0f} kB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, action="append", help="ledger size (repeatable)")
    parser.add_argument("--adds", type=int, default=200, help="timed adds per size")
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--no-baseline", action="store_true", help="measure this code only")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    blocks = args.blocks or [1_000, 10_000, 40_000]
    if args.worker:
        for n in blocks:
            print(json.dumps(measure(n, args.adds)), flush=True)
        return 0
    new = _run(ROOT / "src", blocks, args.adds)
    old: list[dict[str, Any]] = []
    if not args.no_baseline:
        with tempfile.TemporaryDirectory(prefix="memdir-bench-base-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.baseline],
                check=True,
                capture_output=True,
            )
            try:
                old = _run(tree / "src", blocks, args.adds)
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )
    print(f"`memory_add`, {args.adds} adds per size, one process (median / p95 per add)\n")
    print("| blocks in the ledger | ledger | this code | read per add | baseline | read per add |")
    print("|---:|---:|---:|---:|---:|---:|")
    for i, row in enumerate(new):
        base = old[i] if i < len(old) else None
        print(
            f"| {row['blocks']:,} | {row['ledger_bytes'] / 1e6:.1f} MB "
            f"| {row['median_ms']:.2f} / {row['p95_ms']:.2f} ms | {_kb(row['read_per_add'])} "
            + (
                f"| {base['median_ms']:.2f} / {base['p95_ms']:.2f} ms "
                f"| {_kb(base['read_per_add'])} |"
                if base
                else "| – | – |"
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
