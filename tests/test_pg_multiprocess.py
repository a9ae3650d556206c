"""Processes sharing one memory in PostgreSQL: crashes, one consolidation at a time, locks.

The flush and consolidation scenarios of ``test_memory_crash.py`` (a worker ``kill -9``'d at a
pause point, then the work run again; four processes flushing and consolidating at once) run
here on a real PostgreSQL server, with the same worker code, and every check reads the store
through the workspace. Named locks across processes are checked on both stores. Workers that
are killed hold PostgreSQL lock rows with a 2 s expiry instead of 30 s, so that their
successors take the locks over within the test.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import MemdirError
from memdir.memory._lease import LeaseInfo, pid_alive
from memdir.workspace import Workspace
from test_memory_crash import (
    WORKER,
    assert_every_fact_once,
    assert_one_consolidation_at_a_time,
    run_contenders,
)

SHORT_LOCKS = (
    "from memdir.store.postgres._locks import RowLock\n"
    "RowLock.__init__.__kwdefaults__['ttl'] = 2.0\n"
)


def _short_locks() -> None:
    from memdir.store.postgres._locks import RowLock

    assert RowLock.__init__.__kwdefaults__ is not None
    RowLock.__init__.__kwdefaults__["ttl"] = 2.0


def run_worker(
    target: str, scratch: Path, mode: str, *, count: int = 6, pause: str | None = None
) -> dict[str, Any] | None:
    """Run ``test_memory_crash``'s worker on ``target``; with ``pause``, SIGKILL it there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_TEST_")}
    marker = scratch / f"paused-{time.monotonic_ns()}"
    if pause:
        env |= {"MEMDIR_TEST_PAUSE_AT": pause, "MEMDIR_TEST_PAUSE_FILE": str(marker)}
    args = [sys.executable, "-c", SHORT_LOCKS + WORKER, target, mode, "s1", str(count)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if pause is None:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "the worker never reached the pause point"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return None


def ledger_bullets(ws: Workspace) -> list[str]:
    """Every bullet of every ledger, the archive included, read from the store."""
    out: list[str] = []
    for archived in (False, True):
        for _, rel in ws.ledgers(archived=archived):
            out += [ln[2:] for ln in ws.read_text(rel).splitlines() if ln.startswith("- ")]
    return out


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path


# -- kill -9 at the critical points -----------------------------------------------------------


@pytest.mark.parametrize("point", ["flush:before-append", "flush:after-append"])
def test_killed_flush_loses_and_duplicates_nothing(pg_url: str, scratch: Path, point: str) -> None:
    ws = Workspace(pg_url, tz="UTC")
    expected = [f"remembered s1 fact {i}" for i in range(6)]
    assert run_worker(pg_url, scratch, "flush", pause=point) is None
    written = ledger_bullets(ws)
    assert written in ([], expected)  # nothing, or the whole block: never a torn half
    # The dead worker held the append lock: the next one takes it over when its row expires.
    result = run_worker(pg_url, scratch, "flush")
    assert ledger_bullets(ws) == expected
    assert result is not None
    assert result["skipped"] == "no_new_messages" if written else result["bullets"] == expected
    cursor = json.loads(ws.read_text("memory/.flush_state/s1.json"))
    assert cursor["pending"] is None and cursor["last_id"] == "s1-m5"
    assert run_worker(pg_url, scratch, "flush") == {"bullets": [], "skipped": "no_new_messages"}
    assert ledger_bullets(ws) == expected


@pytest.mark.parametrize("point", ["consolidate:before-replace", "consolidate:after-replace"])
def test_killed_consolidation_leaves_old_or_new_memory_and_its_lease_is_taken_over(
    pg_url: str, scratch: Path, point: str
) -> None:
    ws = Workspace(pg_url, tz="UTC")
    run_worker(pg_url, scratch, "flush", count=4)
    old = "# Memory\n- kept fact\n"
    ws.write_text("MEMORY.md", old)
    new = old + "".join(f"- remembered s1 fact {i}\n" for i in range(4))
    assert run_worker(pg_url, scratch, "consolidate", pause=point) is None
    assert ws.read_text("MEMORY.md") in (old, new)
    found = ws.read_versioned("memory/.consolidation.lease")
    assert found is not None  # left behind by the killed run, held by a process now dead
    dead = LeaseInfo.parse(found.data)
    assert dead is not None and not pid_alive(dead.pid)
    result = run_worker(pg_url, scratch, "consolidate")
    assert result is not None
    assert ws.read_text("MEMORY.md") == new
    if point.endswith("after-replace"):
        assert result["skipped"] == "nothing_new"  # settled from the pending record, no rerun
    else:
        assert result["skipped"] is None and len(result["added"]) == 4
    taken = LeaseInfo.parse(ws.read_bytes("memory/.consolidation.lease"))
    assert taken is not None and taken.token != dead.token
    history = sorted(e.name for e in ws.listdir("memory/.history") if e.name.startswith("MEMORY."))
    assert history and ws.read_text(f"memory/.history/{history[-1]}") == old
    assert run_worker(pg_url, scratch, "consolidate") == {"skipped": "nothing_new", "added": []}


# -- four processes at once -------------------------------------------------------------------


def test_four_processes_flush_and_consolidate_one_memory(pg_url: str, scratch: Path) -> None:
    Workspace(pg_url, tz="UTC")
    trace = str(scratch / "trace.txt")
    run_contenders(pg_url, trace)

    ws = Workspace(pg_url, tz="UTC")
    assert_every_fact_once(ledger_bullets(ws))

    assert_one_consolidation_at_a_time(Path(trace).read_text())
    # A last run picks up whatever arrived while others held the lease.
    run_worker(pg_url, scratch, "consolidate")
    assert_every_fact_once(
        ln[2:] for ln in ws.read_text("MEMORY.md").splitlines() if ln[:2] == "- "
    )


# -- named locks across processes, on both stores ---------------------------------------------


@pytest.fixture(params=["files", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A workspace for child processes to open: a directory, or a PostgreSQL URL."""
    where = str(tmp_path / "ws") if request.param == "files" else request.getfixturevalue("pg_url")
    Workspace(where)
    return where


COUNTER = "memory/.counter"


def _increment(target: str, barrier: Any, rounds: int) -> None:
    ws = Workspace(target)
    barrier.wait(timeout=60)
    for _ in range(rounds):
        with ws.lock("counter"):
            seen = int(ws.read_text(COUNTER) or "0")
            time.sleep(0.005)  # without the lock, another process would read the same value
            ws.write_text(COUNTER, str(seen + 1))


def test_a_named_lock_excludes_other_processes(target: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers, rounds = 3, 8
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_increment, args=(target, barrier, rounds)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    assert [p.exitcode for p in procs] == [0] * workers
    assert Workspace(target).read_text(COUNTER) == str(workers * rounds)  # no update lost


def _hold(target: str, holding: Any) -> None:
    _short_locks()
    ws = Workspace(target)
    with ws.lock("job"):
        ws.write_text("memory/.job", f"held by {os.getpid()}")
        holding.set()
        time.sleep(120)


async def test_a_lock_of_a_killed_process_is_taken_over(target: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    holding = ctx.Event()
    proc = ctx.Process(target=_hold, args=(target, holding))
    proc.start()
    try:
        assert holding.wait(timeout=60)
        ws = Workspace(target)
        with pytest.raises(MemdirError, match="held by another"):
            async with ws.async_lock("job", timeout=0.3):
                pass
    finally:
        proc.kill()
        proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL
    # Files: the kernel drops the dead process's lock. PostgreSQL: its row expires (2 s here).
    async with ws.async_lock("job", timeout=30):
        ws.write_text("memory/.job", "taken over")
    assert ws.read_text("memory/.job") == "taken over"
