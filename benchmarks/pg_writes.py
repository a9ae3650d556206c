"""Concurrent ledger appends on PostgreSQL from two hosts, beside the same run on a directory.

``--writers`` processes (default 8) each append ``--appends`` ledger blocks (default 10,000;
one ``## Memory Add`` heading and one bullet, :func:`memdir.store.ledger.append_block`) to the
same day's ledger of one namespace, all at once (a start gate). On PostgreSQL the writers are
split over two agent hosts: with ``--hosts netns`` (the default, needs root) the network
namespaces of ``tests/_netns.py`` (the server in one, each half of the writers in another,
over veth links); with ``--hosts loopback`` two process groups on this machine talking to a
server on 127.0.0.1. The server is a throwaway PostgreSQL with durable commits (``fsync=on``,
``synchronous_commit=on``). The file store runs the same writers on a temporary directory
(fsync'd appends under ``fcntl`` locks).

Reported per store: total appends per second (all appends over the time from the first
writer's start to the last one's end) and each append's latency (median, p99); then the
ledger is read back once and checked: every block present (0 lost), exactly once (0
duplicated), every line a heading or a bullet of its block (0 torn), each writer's blocks in
its order.

Usage::

    python benchmarks/pg_writes.py [--writers 8] [--appends 10000] [--hosts netns|loopback]
        [--skip-files]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

NAMESPACE = "bench"
DURABLE = "-c fsync=on -c synchronous_commit=on"
_BLOCK = re.compile(r"## Memory Add — \S+\n- writer (\d+) append (\d+)")


# -- the child processes ------------------------------------------------------------------------


def write(target: str, writer: int, appends: int, gate: Path) -> None:
    """Append ``appends`` blocks as writer ``writer`` once ``gate`` exists; timings as JSON."""
    from memdir.store.ledger import append_block
    from memdir.workspace import Workspace

    ws = Workspace(target, tz="UTC", namespace=NAMESPACE)
    append_block(ws, [f"writer {writer} warm-up"], header="Memory Warm-up")  # connected
    (gate.parent / f"ready-{writer}").touch()
    while not gate.exists():
        time.sleep(0.001)
    latencies: list[float] = []
    started = time.time()
    for i in range(appends):
        t0 = time.perf_counter()
        append_block(ws, [f"writer {writer} append {i}"], header="Memory Add")
        latencies.append(time.perf_counter() - t0)
    ended = time.time()
    print(json.dumps({"start": started, "end": ended, "latencies": latencies}))


def check(target: str, writers: int, appends: int) -> dict[str, int]:
    """Read the ledger back: blocks lost, duplicated, torn lines, writers out of order."""
    from memdir.workspace import Workspace

    ws = Workspace(target, tz="UTC", namespace=NAMESPACE)
    text = "".join(ws.read_text(rel) for _, rel in ws.ledgers())
    torn = sum(1 for line in text.splitlines() if line and not line.startswith(("## ", "- ")))
    blocks = [(int(w), int(i)) for w, i in _BLOCK.findall(text)]
    counts = Counter(blocks)
    expected = {(w, i) for w in range(writers) for i in range(appends)}
    out_of_order = 0
    for w in range(writers):
        mine = [i for ww, i in blocks if ww == w]
        out_of_order += sum(1 for a, b in itertools.pairwise(mine) if b <= a)
    return {
        "lost": len(expected - set(counts)),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "torn": torn + sum(1 for k in counts if k not in expected),
        "out_of_order": out_of_order,
    }


# -- a run ----------------------------------------------------------------------------------------

Placement = list[tuple[list[str], str]]
"""Per writer: the command prefix that puts it on its host, and the workspace it opens."""


def _child(prefix: list[str], *args: str) -> subprocess.Popen[str]:
    argv = [*prefix, sys.executable, __file__, *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)


def _last_json(proc: subprocess.Popen[str]) -> Any:
    out, _ = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"a child process failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def run(placement: Placement, appends: int) -> dict[str, Any]:
    """Every writer at once; throughput, latencies and the read-back checks."""
    writers = len(placement)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-pgw-") as tmp:
        gate = Path(tmp) / "go"
        procs = [
            _child(prefix, "--writer", str(w), "--target", target, "--appends", str(appends),
                   "--gate", str(gate))
            for w, (prefix, target) in enumerate(placement)
        ]  # fmt: skip
        while not all((Path(tmp) / f"ready-{w}").exists() for w in range(writers)):
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a writer ended before the start")
            time.sleep(0.05)
        gate.touch()
        results = [_last_json(proc) for proc in procs]
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies"])
    prefix, target = placement[0]
    checked = _last_json(
        _child(prefix, "--check", "--target", target, "--writers", str(writers),
               "--appends", str(appends))
    )  # fmt: skip
    return {
        "appends_per_s": writers * appends / elapsed,
        "seconds": elapsed,
        "median_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        **checked,
    }


@contextlib.contextmanager
def postgres(mode: str, writers: int) -> Iterator[Placement]:
    """A throwaway server; the first half of the writers on host a, the others on host b."""
    hosts = ["a" if w < writers // 2 else "b" for w in range(writers)]
    if mode == "netns":
        from _netns import hosts as network

        with network(server_options=DURABLE) as net:
            yield [(net.command(h, []), net.urls[h]) for h in hosts]
        return
    from _postgres import Server, _system_bin, bundled_bin

    found = _system_bin() or bundled_bin()
    if found is None:
        raise SystemExit("no PostgreSQL binaries: apt-get install postgresql-15")
    srv = Server(found, options=DURABLE)
    try:
        url = srv.start()
        # Two process groups on this machine: each group its own session (process group).
        yield [(["setsid", "--"] if h == "b" else [], url) for h in hosts]
    finally:
        srv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=10_000)
    parser.add_argument("--hosts", choices=["netns", "loopback"], default="netns")
    parser.add_argument("--skip-files", action="store_true")
    parser.add_argument("--writer", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--gate", help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer is not None:
        write(args.target, args.writer, args.appends, Path(args.gate))
        return
    if args.check:
        print(json.dumps(check(args.target, args.writers, args.appends)))
        return

    rows: list[tuple[str, dict[str, Any]]] = []
    with postgres(args.hosts, args.writers) as placement:
        rows.append((f"PostgreSQL, 2 hosts ({args.hosts})", run(placement, args.appends)))
    if not args.skip_files:
        with tempfile.TemporaryDirectory(prefix="memdir-bench-pgw-files-") as tmp:
            where = str(Path(tmp) / "ws")
            rows.append(("files (one directory)", run([([], where)] * args.writers, args.appends)))

    print(f"{args.writers} writers x {args.appends:,} appends to one ledger, load "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| store | appends/s | median / p99 ms | lost | duplicated | torn | out of order |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(
            f"| {name} | {r['appends_per_s']:,.0f} | {r['median_ms']:.2f} / {r['p99_ms']:.2f} "
            f"| {r['lost']} | {r['duplicated']} | {r['torn']} | {r['out_of_order']} |"
        )


if __name__ == "__main__":
    main()
