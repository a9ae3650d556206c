"""Eight writers, maintenance passes and searches on one workspace: no write waits in vain."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import re
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memdir.index import MemoryIndex
from memdir.memory import MemoryConsolidator
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-30.md"
WRITERS = 8
ADDS = 30
PASSES = 4
# A short busy window, so that a write left waiting behind the others fails within the test
# (the default is 15 s); every process uses it.
WINDOW_S = 5.0


def _today() -> datetime:
    return datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _short_window() -> None:
    from memdir.index import _schema

    _schema.BUSY_TIMEOUT_S = WINDOW_S


def _writer(root: str, worker: int, barrier: Any, out: Any) -> None:
    _short_window()
    from memdir.tools._core import add_memory

    ws = Workspace(root, tz="UTC", clock=_today)
    barrier.wait(timeout=120)
    failures = []
    for i in range(ADDS):
        result = add_memory(ws, f"writer{worker} fact {i} about the otters")
        if result.index_error is not None:
            failures.append(result.index_error)
    out.put(("writer", worker, failures))


def _maintainer(root: str, barrier: Any, out: Any) -> None:
    _short_window()
    from memdir.memory import MemoryConsolidator, MemoryMaintenanceScheduler
    from memdir.models import model_from_string

    ws = Workspace(root, tz="UTC", clock=_today)
    consolidator = MemoryConsolidator(ws, model_from_string("extractive"))
    scheduler = MemoryMaintenanceScheduler(ws, consolidator)
    barrier.wait(timeout=120)
    errors: list[str] = []
    for _ in range(PASSES):
        report = scheduler.run_once()
        errors.extend(report.errors)
    out.put(("maintainer", 0, errors))


def _searcher(root: str, barrier: Any, out: Any) -> None:
    _short_window()
    from memdir.tools import memory_search

    barrier.wait(timeout=120)
    errors = []
    for i in range(40):
        text = memory_search(f"writer{i % WRITERS} otters", workspace=root)
        if text.startswith("Error"):
            errors.append(text)
    out.put(("searcher", 0, errors))


def test_writers_maintenance_and_searches_share_the_lock(tmp_path: Path) -> None:
    root = str(tmp_path / "ws")
    ws = Workspace(root, tz="UTC", clock=_today)
    # A long day already: each write transaction of an add is as long as the add's work.
    old = "".join(
        f"\n## Memory Add — 2026-11-30T08:00:00Z\n- old fact {i}\n" for i in range(100_000)
    )
    ws.write_text(LEDGER, old)
    summary = FunctionModel(lambda call: "# Memory\n- many old facts\n")
    asyncio.run(MemoryConsolidator(ws, summary).consolidate())  # the old day is consolidated
    with MemoryIndex(ws) as index:
        index.refresh()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS + 2)
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(root, w, barrier, out)) for w in range(WRITERS)]
    procs.append(ctx.Process(target=_maintainer, args=(root, barrier, out)))
    procs.append(ctx.Process(target=_searcher, args=(root, barrier, out)))
    for proc in procs:
        proc.start()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
        assert proc.exitcode == 0
    failures = {(kind, n): errors for kind, n, errors in results if errors}
    assert failures == {}

    # Every add is in the ledger once, and the index holds exactly the ledger.
    text = (ws.root / LEDGER).read_text(encoding="utf-8")
    for worker in range(WRITERS):
        found = re.findall(rf"^- writer{worker} fact (\d+) about the otters$", text, re.M)
        assert sorted(map(int, found)) == list(range(ADDS))
    with MemoryIndex(ws) as index:
        assert index.refresh().files_indexed == 0  # every add was indexed by its writer
        for worker in range(WRITERS):
            hits = index.search(f"writer{worker}", 1000)  # a line in MEMORY.md too: once
            facts = {f"- writer{worker} fact {i} about the otters" for i in range(ADDS)}
            assert {hit.content for hit in hits} == facts
            lines = text.split("\n")
            ledger = [hit for hit in hits if hit.path == LEDGER]
            assert all(hit.content == lines[hit.line_number - 1] for hit in ledger)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            index.index_all_from_workspace(check=True)


def test_an_add_that_could_not_be_indexed_is_found_by_the_next_search(
    ws: Workspace, monkeypatch: Any
) -> None:
    import sqlite3

    from memdir.index import _schema
    from memdir.tools import memory_search
    from memdir.tools._core import add_memory, close_shared_indexes

    monkeypatch.setattr(_schema, "BUSY_TIMEOUT_S", 0.2)
    add_memory(ws, "the first fact")
    holder = sqlite3.connect(ws.index_dir / "memory_index.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock throughout
        result = add_memory(ws, "the beaver builds dams")
        assert result.index_error is not None and "locked" in result.index_error
        lines = (ws.root / result.path).read_text(encoding="utf-8").split("\n")
        assert lines[result.first_line - 1] == "- the beaver builds dams"  # the write is kept
        holder.execute("ROLLBACK")
        found = memory_search("beaver dams", workspace=ws)
    finally:
        holder.close()
        close_shared_indexes()
    assert f"{result.path}#L{result.first_line}-L{result.first_line}" in found


def _rebuilder(root: str, barrier: Any, out: Any) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "MEMDIR_WORKSPACE": root, "MEMDIR_EMBEDDER": "off"}
    barrier.wait(timeout=120)
    errors = []
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-m", "memdir", "index", "--full"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            errors.append(done.stderr)
    out.put(("rebuilder", 0, errors))


def test_a_full_rebuild_waits_for_writers_like_every_writer(tmp_path: Path) -> None:
    # `memdir index --full` while writers run must wait for the lock, never fail
    root = str(tmp_path / "ws")
    ws = Workspace(root, tz="UTC", clock=_today)
    ws.write_text(
        LEDGER,
        "".join(f"\n## Memory Add — 2026-11-30T08:00:00Z\n- old {i}\n" for i in range(3_000)),
    )
    ctx = mp.get_context("spawn")
    writers = 4
    barrier = ctx.Barrier(writers + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(root, w, barrier, out)) for w in range(writers)]
    procs.append(ctx.Process(target=_rebuilder, args=(root, barrier, out)))
    for proc in procs:
        proc.start()
    results = [out.get(timeout=900) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
        assert proc.exitcode == 0
    assert {(kind, n): errors for kind, n, errors in results if errors} == {}
    with MemoryIndex(ws) as index:
        index.refresh()
        for worker in range(writers):
            hits = index.search(f"writer{worker}", 1000)
            assert (
                len({h.content for h in hits if h.content.startswith(f"- writer{worker} ")}) == ADDS
            )
