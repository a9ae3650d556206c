"""What ``memdir serve``'s per-request guards cost: the same requests to a server with them
and to one without, side by side in one run.

Two ``memdir serve`` processes (one worker each) on the same kind of store, each over a
workspace of its own filled alike (``--facts`` adds in one namespace):

- ``bare``: ``--rate 0 --inflight-per-tenant 0 --quota-bytes 0 --quota-namespaces 0
  --no-metrics`` (no bucket, no in-flight count, no quota, no metrics);
- ``guarded``: every guard on: a token bucket (with a rate no request reaches, so the bucket is
  taken but never refuses), the in-flight cap, the storage quotas (1 GiB, 1,000 namespaces)
  and the Prometheus middleware.

One client sends, one request at a time, ``--requests`` rounds of: ``GET /v1/whoami``,
``GET search``, ``POST memories`` without a key, each to both servers in turn (which goes
first changes every round), and (guarded
only) ``POST memories`` with a fresh ``Idempotency-Key`` (the claim, the intent and the stored
answer: three store writes). Reported per request kind and server: the median and p99 of the
client's wall time, and the differences of the medians. With ``--store files``, the same two
configurations are then called in this process through ASGI (``in_process``: what the guards
cost the server itself, without the network and HTTP parsing around it).

Usage::

    python benchmarks/server_guards.py [--store files|postgres] [--requests 400] [--facts 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

BARE = ("--rate", "0", "--inflight-per-tenant", "0", "--quota-bytes", "0")
BARE += ("--quota-namespaces", "0", "--no-metrics")
GUARDED = ("--rate", "1000000", "--burst", "1000000")
NS = "acme.bench"


@contextlib.contextmanager
def workspaces(store: str) -> Iterator[tuple[str, str]]:
    """Two fresh workspaces on ``store``."""
    if store == "files":
        with tempfile.TemporaryDirectory(prefix="memdir-guards-") as tmp:
            yield f"{tmp}/bare", f"{tmp}/guarded"
        return
    from _postgres import server

    with server() as url:
        sep = "&" if "?" in url else "?"
        yield tuple(f"{url}{sep}schema=g_{uuid.uuid4().hex[:12]}" for _ in range(2))  # type: ignore[misc]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(store: str, requests: int, facts: int) -> dict[str, Any]:
    from _server import ServerProcess, create_key

    timings: dict[str, dict[str, list[float]]] = {"bare": {}, "guarded": {}}
    with workspaces(store) as (bare_ws, guarded_ws):
        keys = {name: create_key(ws, "acme", "write")["key"] for name, ws in
                (("bare", bare_ws), ("guarded", guarded_ws))}  # fmt: skip
        servers = {
            "bare": ServerProcess(bare_ws, *BARE).start(),
            "guarded": ServerProcess(guarded_ws, *GUARDED).start(),
        }
        try:
            clients = {name: s.client(keys[name]) for name, s in servers.items()}
            for client in clients.values():
                for i in range(facts):
                    text = f"fact {i}: the otter team moved deploys to Friday, build {i * 7}"
                    client.post(f"/v1/namespaces/{NS}/memories", json={"text": text})
            kinds: dict[str, Callable[[httpx.Client, str], httpx.Response]] = {
                "whoami": lambda c, _: c.get("/v1/whoami"),
                "search": lambda c, _: c.get(
                    f"/v1/namespaces/{NS}/search", params={"q": "otter deploys Friday"}
                ),
                "add": lambda c, _: c.post(
                    f"/v1/namespaces/{NS}/memories", json={"text": "a new fact about otters"}
                ),
                "add+key": lambda c, _: c.post(
                    f"/v1/namespaces/{NS}/memories",
                    json={"text": "a new fact about otters"},
                    headers={"Idempotency-Key": str(uuid.uuid4())},
                ),
            }
            for name in servers:
                timings[name] = {kind: [] for kind in kinds}
            order = list(clients.items())
            for _ in range(requests):  # interleaved: a growing ledger weighs on all alike
                order.reverse()  # and each server goes first every other round
                for kind, call in kinds.items():
                    for name, client in order:
                        if kind == "add+key" and name == "bare":  # both ledgers grow alike
                            kinds["add"](client, name)
                            continue
                        started = time.perf_counter()
                        response = call(client, name)
                        elapsed = time.perf_counter() - started
                        if not response.is_success:
                            raise SystemExit(f"{name} {kind}: {response.status_code}")
                        timings[name][kind].append(elapsed)
        finally:
            for server in servers.values():
                server.stop()
    report: dict[str, Any] = {"store": store, "requests": requests, "facts": facts}
    p50 = {name: {k: statistics.median(v) * 1000 for k, v in t.items() if v}
           for name, t in timings.items()}  # fmt: skip
    for kind in kinds:
        row: dict[str, float] = {}
        for name in ("bare", "guarded"):
            found = timings[name][kind]
            if found:
                row[f"{name}_p50_ms"] = round(p50[name][kind], 3)
                row[f"{name}_p99_ms"] = round(percentile(found, 0.99) * 1000, 3)
        if kind == "add+key":  # the key's own cost, and all of it over a bare add
            row["p50_over_guarded_add_ms"] = round(p50["guarded"][kind] - p50["guarded"]["add"], 3)
            row["p50_over_bare_add_ms"] = round(p50["guarded"][kind] - p50["bare"]["add"], 3)
        else:
            row["p50_overhead_ms"] = round(p50["guarded"][kind] - p50["bare"][kind], 3)
        report[kind] = row
    return report


async def _in_process(requests: int) -> dict[str, Any]:
    """The same two configurations as applications called in this process (no network, no
    HTTP parsing): what the guards cost the server itself, per request."""
    from _server import create_key
    from memdir.server.app import create_app
    from memdir.server.settings import ServerSettings

    configs = {
        "bare": {"rate": 0, "inflight_per_tenant": 0, "quota_bytes": 0, "quota_namespaces": 0,
                 "metrics": False},
        "guarded": {"rate": 1e6, "burst": 1_000_000},
    }  # fmt: skip
    times: dict[str, dict[str, list[float]]] = {name: {"whoami": [], "add": []} for name in configs}
    with tempfile.TemporaryDirectory(prefix="memdir-guards-") as tmp:
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for name, extra in configs.items():
                ws = f"{tmp}/{name}"
                key = create_key(ws, "acme", "write")["key"]
                app = create_app(ServerSettings(workspace=ws, **extra))  # type: ignore[arg-type]
                await stack.enter_async_context(app.router.lifespan_context(app))
                clients[name] = await stack.enter_async_context(
                    httpx.AsyncClient(
                        transport=httpx.ASGITransport(app=app),
                        base_url="http://memdir",
                        headers={"Authorization": f"Bearer {key}"},
                    )
                )
            order = list(clients.items())
            for i in range(requests):
                order.reverse()
                for name, client in order:
                    for kind in ("whoami", "add"):
                        started = time.perf_counter()
                        if kind == "whoami":
                            response = await client.get("/v1/whoami")
                        else:
                            body = {"text": f"fact {i} about otters"}
                            response = await client.post(f"/v1/namespaces/{NS}/memories", json=body)
                        times[name][kind].append(time.perf_counter() - started)
                        if not response.is_success:
                            raise SystemExit(f"in process {name} {kind}: {response.status_code}")
    out: dict[str, Any] = {}
    for kind in ("whoami", "add"):
        bare, guarded = (statistics.median(times[n][kind]) * 1e6 for n in ("bare", "guarded"))
        out[kind] = {"bare_p50_us": round(bare), "guarded_p50_us": round(guarded),
                     "p50_overhead_us": round(guarded - bare)}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["files", "postgres"], default="files")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--facts", type=int, default=200)
    args = parser.parse_args()
    report = run(args.store, args.requests, args.facts)
    if args.store == "files":
        report["in_process"] = asyncio.run(_in_process(args.requests * 5))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
