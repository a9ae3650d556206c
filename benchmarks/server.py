"""Search and add through ``memdir serve`` beside the same calls made in process, in one run.

On a 100,000-line memory (the deterministic corpus of ``benchmarks/_corpus.py``: daily ledgers
of 2,000 lines, English, Chinese and mixed bullets under flush headings), in one namespace of
a fresh workspace on each store (a directory; a fresh schema of PostgreSQL: the server of
``$MEMDIR_TEST_POSTGRES_URL``, else a throwaway one started by ``tests/_postgres.py``):

- **server**: ``memdir serve --workers W`` (its guards on: a token bucket no request empties,
  no cap on requests in flight, the quotas, the metrics and the access log, which goes to a
  file), called over loopback HTTP by ``C`` closed-loop clients (``httpx.AsyncClient``, one
  keep-alive connection each) in this process: ``GET /v1/namespaces/{ns}/search?q=..&limit=10``
  and ``POST /v1/namespaces/{ns}/memories``;
- **in process**: ``W`` worker processes, ``C`` threads spread over them, calling
  ``memdir.tools.memory_search(q, 10)`` and ``memory_add(text)`` on the same namespace (what
  the routes call: the shared index, its refresh, the search; the append and its re-index).

Both sides make the same calls (call ``i`` searches query ``i`` of 2-5-term queries drawn from
the corpus, or adds fact ``i``) at 1, 8 and 32 callers, ``--rounds`` times, the two sides
alternating which goes first; searches before adds in each round, so both sides search the
same memory. Reported per store, operation and callers: the medians over the rounds of the
p50, p99 and calls/s of each side, and of the ratios server / in process; the CPU time each
side's serving processes spent per call, and the client's. Lexical search
(``MEMDIR_EMBEDDER=off``): the corpus has no vectors.

Usage::

    python benchmarks/server.py [--store files --store postgres] [--lines 100000]
        [--clients 1 --clients 8 --clients 32] [--workers 1] [--requests 1000]
        [--adds 500] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _corpus import (
    CorpusSpec,
    TextPools,
    cached_corpus,
    default_cache_root,
    extra_bullets,
    ledger_rels,
    load_pools,
)
from _scale_queries import make_queries
from _server_load import NS, Cell, InProcess, Served, http_cell

SERVER_ARGS = ["--rate", "1000000", "--burst", "1000000", "--inflight-per-tenant", "0"]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def workspace(store: str, tmp: Path) -> Iterator[str]:
    """A fresh workspace on ``store``: a directory, or a schema dropped afterwards."""
    if store == "files":
        yield str(tmp / "ws")
        return
    from _postgres import server

    with server() as url:
        schema = f"sb_{uuid.uuid4().hex[:12]}"
        sep = "&" if "?" in url else "?"
        try:
            yield f"{url}{sep}schema={schema}"
        finally:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def fill(ws_url: str, corpus: Path, rels: list[str]) -> dict[str, float]:
    """The corpus written into the namespace ``NS`` of ``ws_url`` and indexed."""
    from memdir.index import MemoryIndex
    from memdir.workspace import Workspace

    root = Workspace(ws_url, create=True)
    ws = root.namespaced(NS)
    ws.init()
    ws.create_text("MEMORY.md", "# Memory\n")
    started = time.perf_counter()
    for rel in rels:
        ws.write_bytes(rel, (corpus / rel).read_bytes())
    copied = time.perf_counter() - started
    started = time.perf_counter()
    with MemoryIndex(ws) as index:
        stats = index.index_all_from_workspace(full=True)
    return {
        "copy_s": round(copied, 1),
        "build_s": round(time.perf_counter() - started, 1),
        "lines": stats.lines_indexed,
    }


def add_texts(pools: TextPools, count: int) -> list[str]:
    """``count`` facts to add: corpus-like bullet bodies (without their ``- HH:MM``)."""
    texts: list[str] = []
    day = date(2031, 1, 1)
    while len(texts) < count:
        bullets = extra_bullets(pools, seed=11, count=100, day=day)
        texts.extend(bullet.split(" ", 2)[2] for bullet in bullets)
        day += timedelta(days=1)
    return texts[:count]


def summary(cell: Cell) -> dict[str, float]:
    """p50 and p99 (ms), calls/s and CPU ms per call of one side's cell."""
    n = len(cell.latencies)
    return {
        "p50_ms": statistics.median(cell.latencies) * 1000,
        "p99_ms": percentile(cell.latencies, 0.99) * 1000,
        "rps": n / cell.wall,
        "cpu_ms": cell.cpu / n * 1000,
        "sys_cpu_ms": cell.sys_cpu / n * 1000,
        "client_cpu_ms": cell.client_cpu / n * 1000,
    }


def run_store(store: str, args: argparse.Namespace, corpus: Path, rels: list[str],
              queries: list[str], texts: list[str]) -> dict[str, Any]:  # fmt: skip
    """Every cell of one store: ``{"search": {clients: {...}}, "add": {...}}``."""
    from _server import create_key

    out: dict[str, Any] = {"store": store}
    with tempfile.TemporaryDirectory(prefix="memdir-serverbench-") as tmp, \
            workspace(store, Path(tmp)) as ws_url:  # fmt: skip
        _log(f"{store}: writing and indexing {args.lines:,} lines")
        out["fill"] = fill(ws_url, corpus, rels)
        key = create_key(ws_url, "acme", "write")["key"]
        server = Served(ws_url, ["--workers", str(args.workers), *SERVER_ARGS], Path(tmp) / "log")
        local = InProcess(ws_url, args.workers)
        try:
            rows: dict[str, dict[int, list[dict[str, dict[str, float]]]]] = {}
            for round_ in range(args.rounds):
                for op, items, count in (("search", queries, args.requests),
                                         ("add", texts, args.adds)):  # fmt: skip
                    for n, clients in enumerate(args.clients):
                        _log(f"{store} round {round_ + 1}: {op}, {clients} callers")
                        sides = ["in_process", "server"]
                        if (round_ + n) % 2:
                            sides.reverse()
                        got: dict[str, dict[str, float]] = {}
                        for side in sides:
                            if side == "server":
                                cell = http_cell(server, key, op, items, clients, count)
                            else:
                                cell = local.cell(op, items, clients, count)
                            got[side] = summary(cell)
                        rows.setdefault(op, {}).setdefault(clients, []).append(got)
        finally:
            local.stop()
            server.stop()
        if args.profile:
            out["profile"] = {
                op: profile(ws_url, key, op, items, args.profile, Path(tmp))
                for op, items in (("search", queries), ("add", texts))
            }
    for op, by_clients in rows.items():
        out[op] = {clients: combine(rounds) for clients, rounds in by_clients.items()}
    return out


def profile(ws_url: str, key: str, op: str, items: list[str], count: int, tmp: Path
            ) -> dict[str, Any]:  # fmt: skip
    """Where the time of ``count`` calls of ``op`` goes, one at a time, in a server with
    timers around its parts (``_server_profile.py``): the mean µs per call of each part."""
    _log(f"profiling {op}")
    out = tmp / f"profile-{op}.json"
    server = Served(ws_url, SERVER_ARGS, tmp / f"profile-{op}.log", profile=out)
    try:
        cell = http_cell(server, key, op, items, 1, count)
    finally:
        server.stop()
    n = len(cell.latencies)
    timers = json.loads(out.read_text(encoding="utf-8"))
    found = {name: total / n * 1e6 for name, (total, _) in timers.items()}
    client = statistics.fmean(cell.latencies) * 1e6
    return {
        "calls": n,
        "client_us": client,
        "p50_ms": statistics.median(cell.latencies) * 1000,
        "cpu_ms": cell.cpu / n * 1000,
        "timers_us": found,
        "parts_us": parts(found, client),
    }


def parts(t: dict[str, float], client: float) -> dict[str, float]:
    """The mean µs of each part of a call, each counted once: inclusive timers minus the
    timers inside them."""
    # Not a request's own trips: the key poller's (in the background), and the key look-up
    # and the quota measure (once each, inside the auth and guard timers, which count them).
    threads = [name.removeprefix("thread call: ") for name in t if name.startswith("thread call")]
    threads = [n for n in threads if n not in ("poll", "lookup", "measure")]
    handoff = sum(t[f"thread call: {n}"] - t.get(f"in thread: {n}", 0.0) for n in threads)
    deps = [n for n in threads if n not in ("route", "validate")]  # validate: the response's
    library = t.get("library", 0.0)
    auth = t.get("auth", 0.0) - t.get("guards: rate, in flight", 0.0)
    guards = t.get("guards: rate, in flight", 0.0) + t.get("guards: idempotency, quota", 0.0)
    dependencies = (t.get("dependencies", 0.0) - t.get("auth", 0.0)
                    - sum(t[f"thread call: {n}"] for n in deps)
                    - t.get("guards: idempotency, quota", 0.0))  # fmt: skip
    response = t.get("response: validate, to JSON", 0.0) + t.get("response: JSON text", 0.0)
    response -= t.get("thread call: validate", 0.0) - t.get("in thread: validate", 0.0)
    named = {
        "library: the search or the add (as in process)": library,
        "route: the library's answer to models": t.get("in thread: route", 0.0) - library,
        "auth: the key, its scope": auth,
        "guards: rate, in flight, idempotency, quota": guards,
        "namespace check, other dependencies run in a thread": sum(
            t.get(f"in thread: {n}", 0.0) for n in deps
        ),
        "parameters and body: parsing, validation": dependencies,
        "hand-offs to worker threads and back": handoff,
        "response: validation and JSON": response,
        "HTTP: writing the response (uvicorn, h11)": t.get("http: write (uvicorn, h11)", 0.0),
        "access log line": t.get("access log: line", 0.0) + t.get("access log: write", 0.0),
    }
    named["framework: middleware, routing, the rest"] = t.get("application", 0.0) - sum(
        named.values()
    )
    named["HTTP: parsing the request (uvicorn, h11)"] = t.get("http: parse (uvicorn, h11)", 0.0)
    named["outside the server: client, loopback, event loop wake-ups"] = (
        client - t.get("application", 0.0) - t.get("http: parse (uvicorn, h11)", 0.0)
    )
    return named


def combine(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Medians over the rounds: each side's numbers, and the ratios of each round."""
    out: dict[str, Any] = {}
    for side in ("in_process", "server"):
        out[side] = {k: statistics.median(r[side][k] for r in rounds) for k in rounds[0][side]}
    out["rps_ratio"] = statistics.median(r["server"]["rps"] / r["in_process"]["rps"]
                                         for r in rounds)  # fmt: skip
    out["p99_ratio"] = statistics.median(r["server"]["p99_ms"] / r["in_process"]["p99_ms"]
                                         for r in rounds)  # fmt: skip
    out["p50_over_ms"] = statistics.median(r["server"]["p50_ms"] - r["in_process"]["p50_ms"]
                                           for r in rounds)  # fmt: skip
    return out


def markdown(report: dict[str, Any]) -> str:
    """The results as the table of ``docs/benchmarks.md``."""
    lines = [
        "| store | call | callers | in process p50 / p99 ms | calls/s | server p50 / p99 ms "
        "| calls/s | server / in process: calls/s, p99 | CPU ms per call: in process, server, "
        "client |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in report["stores"]:
        for op in ("search", "add"):
            for clients, row in result[op].items():
                a, b = row["in_process"], row["server"]
                lines.append(
                    f"| {result['store']} | {op} | {clients} "
                    f"| {a['p50_ms']:.2f} / {a['p99_ms']:.1f} | {a['rps']:,.0f} "
                    f"| {b['p50_ms']:.2f} / {b['p99_ms']:.1f} | {b['rps']:,.0f} "
                    f"| {row['rps_ratio']:.0%}, {row['p99_ratio']:.2f}x "
                    f"| {a['cpu_ms']:.2f}, {b['cpu_ms']:.2f}, {b['client_cpu_ms']:.2f} |"
                )
    for result in report["stores"]:
        found = result.get("profile")
        if not found:
            continue
        lines += ["", f"{result['store']}: where a call's time goes, one caller, mean µs",
                  "", "| part | search | add |", "|---|---:|---:|"]  # fmt: skip
        for part in found["search"]["parts_us"]:
            cells = [f"{found[op]['parts_us'].get(part, 0):,.0f}" for op in ("search", "add")]
            lines.append(f"| {part} | {' | '.join(cells)} |")
        cells = [f"{found[op]['client_us']:,.0f}" for op in ("search", "add")]
        lines.append(f"| **the client's mean** | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", action="append", choices=["files", "postgres"])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--clients", type=int, action="append")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--requests", type=int, default=1000, help="searches per cell")
    parser.add_argument("--adds", type=int, default=500, help="adds per cell")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--profile",
        type=int,
        default=1000,
        help="calls of each kind to a timed server, one at a time (0: none)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.store = args.store or ["files", "postgres"]
    args.clients = args.clients or [1, 8, 32]
    os.environ["MEMDIR_EMBEDDER"] = "off"  # for this process, the server and the workers
    pools = load_pools()
    spec = CorpusSpec(lines=args.lines)
    corpus = cached_corpus(pools, spec, default_cache_root())
    rels = ledger_rels(spec)
    found, _ = make_queries(corpus, rels, per_count=150, max_terms=5)
    queries = [q.text for q in found if len(q.terms) >= 2]
    texts = add_texts(pools, max(args.adds, 1))
    report: dict[str, Any] = {
        "lines": args.lines,
        "workers": args.workers,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "stores": [],
    }
    for store in args.store:
        report["stores"].append(run_store(store, args, corpus, rels, queries, texts))
    report["load_after"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(markdown(report))
    print(f"\nload {report['load_before'][0]:.1f} -> {report['load_after'][0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
