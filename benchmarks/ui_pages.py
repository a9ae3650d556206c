"""The web UI's pages on a 100,000-line memory: server-side time per page, p50 and p95.

The memory is the deterministic corpus of ``benchmarks/_corpus.py`` (daily ledgers of 2,000
lines, English, Chinese and mixed bullets) in one namespace of a fresh workspace on each store
(a directory; a fresh schema of PostgreSQL: ``$MEMDIR_TEST_POSTGRES_URL``, else a throwaway
server started by ``tests/_postgres.py``), with a MEMORY.md of ``--bullets`` bullets. A
``memdir serve`` process serves it (no background maintenance; access log to a file); one
logged-in client asks for each page ``--requests`` times in turn, after one warm-up request
each. The time of a page is the server's own, from its access log (``ms``: from the
request's arrival to the last byte of the answer), so the client's cost does not count.

Usage::

    python benchmarks/ui_pages.py [--store files --store postgres] [--lines 100000]
        [--requests 100] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _corpus import CorpusSpec, cached_corpus, default_cache_root, ledger_rels, load_pools
from _scale_queries import make_queries
from _server_load import NS, Served
from server import SERVER_ARGS, fill, percentile, workspace


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _memory_md(corpus: Path, rels: list[str], bullets: int) -> str:
    """A MEMORY.md of ``bullets`` bullets taken from the corpus, under a few headings."""
    lines: list[str] = []
    for rel in rels:
        lines.extend(
            line for line in (corpus / rel).read_text("utf-8").splitlines() if line.startswith("- ")
        )
        if len(lines) >= bullets:
            break
    out = ["# Memory", ""]
    for n, line in enumerate(lines[:bullets]):
        if n % 25 == 0:
            out += ["", f"## Topic {n // 25 + 1}"]
        out.append("- " + line.split(" ", 2)[-1])
    return "\n".join(out) + "\n"


def _key(ws_url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "memdir", "keys", "create", "-w", ws_url, "--tenant", "acme",
         "--scope", "admin", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return str(json.loads(done.stdout)["key"])


def pages(rels: list[str], queries: list[str]) -> dict[str, list[str]]:
    """The pages measured, each with the addresses asked for in turn."""
    base = f"/ui/ns/{NS}"
    middle = rels[len(rels) // 2]
    day = Path(middle).stem
    return {
        "overview": ["/ui/"],
        "MEMORY.md": [f"{base}/"],
        "provenance": [f"{base}/why?at=MEMORY.md%23L5"],
        "history": [f"{base}/history"],
        "ledgers": [f"{base}/ledgers"],
        "ledger day (2,000 lines)": [f"{base}/ledgers/{day}"],
        "file at a line": [f"{base}/file?path={middle}&line=1000"],
        "search": [f"{base}/search?q={q}" for q in queries[:50]],
        "sessions": [f"{base}/sessions"],
    }


def _times(log: Path, start: int) -> list[tuple[str, int, float]]:
    """(route, status, ms) of the access-log lines written since byte ``start``."""
    out = []
    with log.open(encoding="utf-8") as handle:
        handle.seek(start)
        for line in handle:
            if line.startswith("{"):
                entry = json.loads(line)
                out.append((entry["route"], entry["status"], entry["ms"]))
    return out


def run_store(store: str, args: argparse.Namespace, corpus: Path, rels: list[str],
              queries: list[str]) -> dict[str, Any]:  # fmt: skip
    import httpx

    from memdir.workspace import Workspace

    with tempfile.TemporaryDirectory() as tmp, workspace(store, Path(tmp)) as ws_url:
        _log(f"{store}: filling {args.lines:,} lines")
        filled = fill(ws_url, corpus, rels)
        Workspace(ws_url).namespaced(NS).write_text(
            "MEMORY.md", _memory_md(corpus, rels, args.bullets)
        )
        key = _key(ws_url)
        log = Path(tmp) / "server.log"
        server = Served(ws_url, [*SERVER_ARGS, "--no-maintenance"], log)
        result: dict[str, Any] = {"store": store, **filled, "pages": {}}
        try:
            with httpx.Client(base_url=server.url, timeout=120) as client:
                client.cookies.set("memdir_ui", key)
                for name, urls in pages(rels, queries).items():
                    warm = client.get(urls[0])
                    if warm.status_code != 200:
                        result["pages"][name] = {"status": warm.status_code}
                        continue
                    server.log.flush()
                    start = log.stat().st_size
                    for n in range(args.requests):
                        answer = client.get(urls[n % len(urls)])
                        assert answer.status_code == 200, (name, answer.status_code)
                    server.log.flush()
                    ms = [t for _, status, t in _times(log, start) if status == 200]
                    result["pages"][name] = {
                        "n": len(ms),
                        "p50_ms": round(percentile(ms, 0.5), 1),
                        "p95_ms": round(percentile(ms, 0.95), 1),
                        "bytes": len(warm.content),
                    }
                    _log(f"{store} {name}: {result['pages'][name]}")
        finally:
            server.stop()
    return result


def markdown(report: dict[str, Any]) -> str:
    stores = report["stores"]
    head = "| page | " + " | ".join(f"{s['store']} p50 / p95 ms" for s in stores) + " |"
    lines = [head, "|---|" + "---|" * len(stores)]
    for name in stores[0]["pages"]:
        cells = []
        for s in stores:
            cell = s["pages"].get(name, {})
            cells.append(
                f"{cell['p50_ms']} / {cell['p95_ms']}"
                if "p50_ms" in cell
                else f"HTTP {cell.get('status')}"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", action="append", choices=["files", "postgres"])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--bullets", type=int, default=150, help="bullets of MEMORY.md")
    parser.add_argument("--requests", type=int, default=100, help="requests per page")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.store = args.store or ["files", "postgres"]
    os.environ["MEMDIR_EMBEDDER"] = "off"
    pools = load_pools()
    spec = CorpusSpec(lines=args.lines)
    corpus = cached_corpus(pools, spec, default_cache_root())
    rels = ledger_rels(spec)
    found, _ = make_queries(corpus, rels, per_count=50, max_terms=3)
    queries = [q.text for q in found if len(q.terms) >= 2]
    report: dict[str, Any] = {
        "lines": args.lines,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "stores": [run_store(s, args, corpus, rels, queries) for s in args.store],
        "load_after": os.getloadavg(),
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(markdown(report))
    print(f"\nload {report['load_before'][0]:.1f} -> {report['load_after'][0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
