"""How long the ``memdir`` command takes to start: ``--version`` and ``search`` beside a bare
interpreter, this code beside an older commit.

Each command runs ``--runs`` times as a fresh process (``python -m memdir ...`` with the
checkout's ``src`` first on ``PYTHONPATH``), interleaved with the baseline's and with ``python
-c pass``; reported: the median wall time of each, and the median minus the bare
interpreter's (what memdir adds). ``search`` runs on a workspace of 200 ledger lines that is
indexed first, with hybrid search off (``MEMDIR_EMBEDDER=off``) so that the time is the
command's start and a lexical search, not loading an embedding model.

Usage::

    python benchmarks/cli_startup.py [--runs 21] [--baseline REV | --no-baseline]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "8c3f311"
"""The last commit whose command imported the agent, the models and every command up front."""


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _worktree(rev: str, where: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
        check=True,
        capture_output=True,
    )
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memdir-startup-"))
    ws = tmp / "ws"
    sources = {"this": ROOT / "src"}
    if not args.no_baseline:
        sources["baseline"] = _worktree(args.baseline, tmp / "baseline") / "src"
    base_env = {**os.environ, "MEMDIR_WORKSPACE": str(ws), "MEMDIR_EMBEDDER": "off"}
    envs = {name: {**base_env, "PYTHONPATH": str(src)} for name, src in sources.items()}
    py = [sys.executable]
    lines = "\n".join(f"- fact {i}: the service number {i} runs on host h{i}" for i in range(200))
    subprocess.run([*py, "-m", "memdir", "init"], env=envs["this"], check=True, capture_output=True)
    subprocess.run(
        [*py, "-m", "memdir", "add", "-"],
        input=lines.encode(),
        env=envs["this"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [*py, "-m", "memdir", "index"], env=envs["this"], check=True, capture_output=True
    )
    commands = {"--version": ["--version"], "search": ["search", "host h42"]}
    times: dict[str, list[float]] = {"bare": []}
    for _ in range(args.runs):
        times["bare"].append(_timed([*py, "-c", "pass"], base_env))
        for name, env in envs.items():
            for label, cmd in commands.items():
                times.setdefault(f"{name} {label}", []).append(
                    _timed([*py, "-m", "memdir", *cmd], env)
                )
    bare = statistics.median(times["bare"])
    print(f"{'command':24} {'median':>9} {'minus bare':>11}   ({args.runs} runs each)")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:24} {median * 1000:7.0f}ms {(median - bare) * 1000:9.0f}ms")
    if not args.no_baseline:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "baseline")],
            check=False,
        )


if __name__ == "__main__":
    main()
