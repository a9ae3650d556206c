"""Crash safety and concurrency of the memory pipeline, with real processes.

A worker process is paused at a critical point (``MEMDIR_TEST_PAUSE_AT``), killed with
SIGKILL, and the files are checked; then the work is run again and must complete without a
line lost or written twice. Four processes flushing and consolidating one workspace at once
must land every bullet exactly once, with one consolidation at a time.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from memdir.workspace import Workspace

WORKER = r"""
import asyncio, json, sys, time
from datetime import UTC, datetime, timedelta
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.memory._retention import expire_ledgers
from memdir.messages import Msg
from memdir.models import CURRENT_KEY, ENTRIES_KEY, MESSAGES_KEY
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

root, mode, session, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ws = Workspace(root, tz="UTC")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
msgs = [
    Msg(role="user", content=f"{session} fact {i}", id=f"{session}-m{i}",
        created_at=T0 + timedelta(seconds=i))
    for i in range(count)
]

def extract(call):
    texts = [Msg.from_dict(d).text for d in call.messages[-1].metadata[MESSAGES_KEY]]
    return "\n".join(f"- remembered {t}" for t in texts) or "NO_REPLY"

def merge(call):
    meta = call.messages[-1].metadata
    lines = [ln for ln in meta[CURRENT_KEY].splitlines() if ln.startswith("- ")]
    lines += [f"- {e}" for e in meta[ENTRIES_KEY] if f"- {e}" not in lines]
    return "# Memory\n" + "\n".join(lines) + "\n"

if mode == "flush":
    result = asyncio.run(MemoryFlushManager(ws, FunctionModel(extract)).flush_memories(
        msgs, session_id=session))
    print(json.dumps({"bullets": list(result.bullets), "skipped": result.skipped}))
elif mode == "consolidate":
    result = asyncio.run(MemoryConsolidator(ws, FunctionModel(merge)).consolidate())
    print(json.dumps({"skipped": result.skipped, "added": list(result.added)}))
elif mode == "archive":
    print(json.dumps({"moved": expire_ledgers(ws, retention_days=90)}))
"""


def run_worker(
    root: Path, mode: str, *, session: str = "s1", count: int = 6, pause: str | None = None
) -> dict[str, Any] | None:
    """Run the worker; with ``pause``, SIGKILL it at that point and return ``None``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_TEST_")}
    marker = root.parent / f"paused-{time.monotonic_ns()}"
    if pause:
        env |= {"MEMDIR_TEST_PAUSE_AT": pause, "MEMDIR_TEST_PAUSE_FILE": str(marker)}
    args = [sys.executable, "-c", WORKER, str(root), mode, session, str(count)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if pause is None:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "the worker never reached the pause point"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return None


def bullets(root: Path) -> list[str]:
    out = []
    for path in sorted((root / "memory").glob("*.md")) + sorted(
        (root / "memory/archive").glob("*.md")
    ):
        out += [ln[2:] for ln in path.read_text().splitlines() if ln.startswith("- ")]
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return Workspace(tmp_path / "ws", tz="UTC").root


@pytest.mark.parametrize("point", ["flush:before-append", "flush:after-append"])
def test_killed_flush_loses_and_duplicates_nothing(root: Path, point: str) -> None:
    expected = [f"remembered s1 fact {i}" for i in range(6)]
    assert run_worker(root, "flush", pause=point) is None
    written = bullets(root)
    assert written in ([], expected)  # nothing, or the whole block: never a torn half
    result = run_worker(root, "flush")
    assert bullets(root) == expected
    assert result is not None
    assert result["skipped"] == "no_new_messages" if written else result["bullets"] == expected
    cursor = json.loads((root / "memory/.flush_state/s1.json").read_text())
    assert cursor["pending"] is None and cursor["last_id"] == "s1-m5"
    assert run_worker(root, "flush") == {"bullets": [], "skipped": "no_new_messages"}
    assert bullets(root) == expected


@pytest.mark.parametrize("point", ["consolidate:before-replace", "consolidate:after-replace"])
def test_killed_consolidation_leaves_old_or_new_memory(root: Path, point: str) -> None:
    run_worker(root, "flush", count=4)
    old = "# Memory\n- kept fact\n"
    (root / "MEMORY.md").write_text(old)
    new = old + "".join(f"- remembered s1 fact {i}\n" for i in range(4))
    assert run_worker(root, "consolidate", pause=point) is None
    assert (root / "MEMORY.md").read_text() in (old, new)
    assert (root / "memory/.consolidation.lease").exists()  # left behind by the killed run
    result = run_worker(root, "consolidate")
    assert result is not None
    assert (root / "MEMORY.md").read_text() == new
    if point.endswith("after-replace"):
        assert result["skipped"] == "nothing_new"  # settled from the pending record, no rerun
    else:
        assert result["skipped"] is None and len(result["added"]) == 4
    history = sorted((root / "memory/.history").glob("MEMORY.*.md"))
    assert history and history[-1].read_text() == old
    assert run_worker(root, "consolidate") == {"skipped": "nothing_new", "added": []}


def test_killed_archive_move_is_completed(root: Path) -> None:
    ledger = root / "memory/2020-01-01.md"
    ledger.write_text("## Memory Add — 2020-01-01T00:00:00Z\n- an old fact\n")
    content = ledger.read_bytes()
    assert run_worker(root, "archive", pause="archive:after-link") is None
    archived = root / "memory/archive/2020-01-01.md"
    assert ledger.exists() or archived.exists()
    for path in (ledger, archived):
        assert not path.exists() or path.read_bytes() == content
    assert run_worker(root, "archive") == {"moved": ["2020-01-01.md"]}
    assert not ledger.exists() and archived.read_bytes() == content


# -- four processes at once ----------------------------------------------------------------


def _contender(root: str, index: int, barrier: Any, trace: str) -> None:
    import asyncio

    from memdir.memory import MemoryConsolidator, MemoryFlushManager
    from memdir.messages import Msg
    from memdir.models import CURRENT_KEY, ENTRIES_KEY, MESSAGES_KEY
    from memdir.testing import FunctionModel, ModelCall

    ws = Workspace(root, tz="UTC")

    def extract(call: ModelCall) -> str:
        texts = [Msg.from_dict(d).text for d in call.messages[-1].metadata[MESSAGES_KEY]]
        return "\n".join(f"- {t}" for t in texts)

    async def merge(call: ModelCall) -> str:
        with open(trace, "a") as handle:
            handle.write(f"start {os.getpid()}\n")
        await asyncio.sleep(0.05)
        meta = call.messages[-1].metadata
        lines = [ln for ln in meta[CURRENT_KEY].splitlines() if ln.startswith("- ")]
        lines += [f"- {e}" for e in meta[ENTRIES_KEY] if f"- {e}" not in lines]
        with open(trace, "a") as handle:
            handle.write(f"end {os.getpid()}\n")
        return "# Memory\n" + "\n".join(lines) + "\n"

    async def main() -> None:
        flusher = MemoryFlushManager(ws, FunctionModel(extract))
        consolidator = MemoryConsolidator(ws, FunctionModel(merge))
        history: list[Msg] = []
        for turn in range(4):
            # Every process says its own facts and one fact everybody says.
            history.append(Msg.user(f"process {index} turn {turn} fact"))
            history.append(Msg.user(f"shared turn {turn} fact"))
            await flusher.flush_memories(history, session_id=f"p{index}")
            await flusher.flush_memories(history, session_id=f"p{index}")  # a repeat: no-op
            await consolidator.consolidate()

    barrier.wait(timeout=60)
    asyncio.run(main())


def run_contenders(target: str, trace: str, count: int = 4) -> None:
    """``count`` processes flushing and consolidating ``target`` at once; all must succeed."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(count)
    procs = [ctx.Process(target=_contender, args=(target, i, barrier, trace)) for i in range(count)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=180)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    assert [p.exitcode for p in procs] == [0] * count


def assert_one_consolidation_at_a_time(trace: str) -> None:
    """The ``start`` / ``end`` lines of a consolidation trace never nest."""
    events = [line.split()[0] for line in trace.splitlines()]
    assert events and events.count("start") == events.count("end")
    depth = 0
    for event in events:
        depth += 1 if event == "start" else -1
        assert depth in (0, 1), "two consolidations overlapped"


def assert_every_fact_once(bullets: Iterable[str]) -> None:
    """The ledger bullets of :func:`run_contenders` hold each contender's facts exactly once."""
    expected = {f"process {i} turn {t} fact" for i in range(4) for t in range(4)}
    expected |= {f"shared turn {t} fact" for t in range(4)}
    counts = Counter(bullets)
    assert set(counts) == expected
    assert all(n == 1 for n in counts.values()), counts.most_common(3)


def test_four_processes_flush_and_consolidate_one_workspace(root: Path) -> None:
    trace = str(root.parent / "trace.txt")
    run_contenders(str(root), trace)

    assert_every_fact_once(bullets(root))

    assert_one_consolidation_at_a_time(Path(trace).read_text())

    # A last run picks up whatever arrived while others held the lease.
    import asyncio

    from memdir.memory import MemoryConsolidator
    from memdir.testing import FunctionModel

    def merge(call: Any) -> str:
        meta = call.messages[-1].metadata
        lines = [ln for ln in meta["memdir.current"].splitlines() if ln.startswith("- ")]
        lines += [f"- {e}" for e in meta["memdir.entries"] if f"- {e}" not in lines]
        return "# Memory\n" + "\n".join(lines) + "\n"

    ws = Workspace(root, tz="UTC")
    asyncio.run(MemoryConsolidator(ws, FunctionModel(merge)).consolidate())
    assert_every_fact_once(
        ln[2:] for ln in ws.read_text("MEMORY.md").splitlines() if ln[:2] == "- "
    )
