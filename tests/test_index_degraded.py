"""Search keeps answering in a read-only workspace and on a full disk.

A read-only workspace is real: the searching process runs as a user who may not write it
(``nobody`` when the tests run as root, else the tree is made read-only with ``chmod``). A
full disk is real too: the process's file size limit is 0 (``RLIMIT_FSIZE``), so no file can
grow, which is what a full disk does to writes; and SQLite's own ``max_page_count`` gives a
database that is full while the rest of the disk is not.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import signal
import sqlite3
import stat
import tempfile
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memdir.errors import IndexError_
from memdir.index import MemoryIndex
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-30.md"
NOBODY = 65534


def _today() -> datetime:
    return datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _preload() -> None:
    """Import what the scenarios may import, while the interpreter's own files can be read.

    memdir imports most modules on first use; as ``nobody`` a Python installed under
    ``/root`` could not read them any more (a user can read their own Python).
    """
    import importlib
    import pkgutil

    import memdir

    for found in pkgutil.walk_packages(memdir.__path__, "memdir."):
        if not found.name.startswith(("memdir.adapters.", "memdir.server")):
            importlib.import_module(found.name)
    for name in ("rich.console", "rich.table", "rich.progress", "rich.markup", "colorsys"):
        importlib.import_module(name)


def _child(root: str, scenario: str, mode: str, out: Any) -> None:
    """Run ``scenario`` read-only (``mode="ro"``) or with no room to grow a file (``"full"``)."""
    _preload()
    if mode == "ro" and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    if mode == "full":
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    handler = _Warnings()
    logging.getLogger("memdir").addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = SCENARIOS[scenario](root)
        out.put(("ok", result, handler.messages))
    except BaseException as exc:
        out.put(("error", repr(exc), handler.messages))


def _search(root: str) -> dict[str, Any]:
    from memdir.cli import cli
    from memdir.tools import memory_get, memory_search

    runner = CliRunner()
    base = ["--workspace", root]
    return {
        "tool": memory_search("otters", workspace=root),
        "new": memory_search("beavers", workspace=root),
        "cli": runner.invoke(cli, [*base, "search", "beavers"]).output,
        "get": memory_get(LEDGER, workspace=root),
        "index": (lambda r: (r.exit_code, r.output))(runner.invoke(cli, [*base, "index"])),
    }


def _hybrid(root: str) -> dict[str, Any]:
    from memdir.testing import ConceptEmbedder

    with MemoryIndex(root, embedder=ConceptEmbedder({"animal": ["otter", "水獭"]})) as index:
        index.refresh()
        return {"hits": [h.content for h in index.search("水獭", 5)]}


def _add(root: str) -> dict[str, Any]:
    from memdir.tools import memory_add

    before = (Path(root) / LEDGER).read_bytes()
    ws = Workspace(root, tz="UTC", clock=_today)
    out = memory_add("the heron fishes at dawn", workspace=ws)
    return {"add": out, "unchanged": (Path(root) / LEDGER).read_bytes() == before}


def _cli_search(root: str) -> dict[str, Any]:
    from memdir.cli import cli

    result = CliRunner().invoke(cli, ["--workspace", root, "search", "beavers"])
    return {"code": result.exit_code, "output": result.output}


def _tool_search(root: str) -> dict[str, Any]:
    from memdir.tools import memory_get, memory_search

    return {
        "tool": memory_search("beavers", workspace=root),
        "get": memory_get(LEDGER, workspace=root),
    }


SCENARIOS: dict[str, Callable[[str], dict[str, Any]]] = {
    "search": _search,
    "tool-search": _tool_search,
    "cli-search": _cli_search,
    "hybrid": _hybrid,
    "add": _add,
}


def _run(root: Path, scenario: str, mode: str) -> tuple[dict[str, Any], list[str]]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(str(root), scenario, mode, out))
    proc.start()
    status, result, logged = out.get(timeout=120)
    proc.join(timeout=60)
    if proc.is_alive():
        proc.kill()
    assert status == "ok", result
    return result, logged


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A workspace another user can read (pytest's own tmp directories are private)."""
    top = Path(tempfile.mkdtemp(prefix="memdir-ro-"))
    top.chmod(0o755)
    try:
        yield top / "ws"
    finally:
        for path in [top, *top.rglob("*")]:
            with contextlib.suppress(OSError):
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(top, ignore_errors=True)


def _read_only(root: Path) -> None:
    if os.geteuid() == 0:
        return  # the child drops to nobody, who may not write what root owns
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _workspace(root: Path, *, index: bool, stale: bool) -> Workspace:
    ws = Workspace(root, tz="UTC", clock=_today)
    ws.write_text(LEDGER, "# Notes\n- otters hold hands while they sleep\n")
    if index:
        with MemoryIndex(ws) as idx:
            idx.refresh()
    if stale or not index:
        ws.append_text(LEDGER, "- beavers build dams at night\n")
    return ws


@pytest.mark.parametrize(
    ("index", "stale"),
    [(True, False), (True, True), (False, True)],
    ids=["index-current", "index-stale", "no-index"],
)
def test_a_read_only_workspace_is_searched(shared_root: Path, index: bool, stale: bool) -> None:
    ws = _workspace(shared_root, index=index, stale=stale)
    if not stale:
        ws.append_text(LEDGER, "- beavers build dams at night\n")
        with MemoryIndex(ws) as idx:
            idx.refresh()
    before = {p: p.read_bytes() for p in shared_root.rglob("*") if p.is_file()}
    _read_only(shared_root)
    result, logged = _run(shared_root, "search", "ro")
    assert f"{LEDGER}#L2-L2" in result["tool"]
    assert f"{LEDGER}#L3-L3" in result["new"] and "beavers build dams" in result["new"]
    assert "beavers build dams" in result["cli"]
    assert "otters hold hands" in result["get"]
    code, output = result["index"]
    assert code == 1 and output.startswith("Error: ") and output.count("\n") == 1
    if stale or not index:  # the files were read directly: said so
        assert any("reads the memory files directly" in m for m in logged), logged
    after = {p: p.read_bytes() for p in shared_root.rglob("*") if p.is_file()}
    assert after == before  # nothing was written


def test_a_read_only_copy_without_the_index_directory_is_searched(shared_root: Path) -> None:
    _workspace(shared_root, index=True, stale=True)
    shutil.rmtree(shared_root / ".index")  # as a checkout of the memory files would be
    _read_only(shared_root)
    result, logged = _run(shared_root, "cli-search", "ro")
    assert result["code"] == 0 and f"{LEDGER}#L3-L3" in result["output"]
    assert any("reads the memory files directly" in m for m in logged), logged


def test_the_tools_search_a_read_only_copy_of_the_memory_files(shared_root: Path) -> None:
    # A checkout holding only MEMORY.md and memory/ (no sessions/, no .index/).
    _workspace(shared_root, index=True, stale=True)
    for rel in (".index", "sessions", "large_tool_results"):
        shutil.rmtree(shared_root / rel, ignore_errors=True)
    _read_only(shared_root)
    result, _ = _run(shared_root, "tool-search", "ro")
    assert f"{LEDGER}#L3-L3" in result["tool"] and "beavers build dams" in result["tool"]
    assert "otters hold hands" in result["get"]
    assert not (shared_root / "sessions").exists()


def test_a_read_only_workspace_keeps_hybrid_search(shared_root: Path) -> None:
    pytest.importorskip("numpy")
    from memdir.testing import ConceptEmbedder

    ws = Workspace(shared_root, tz="UTC", clock=_today)
    ws.write_text(LEDGER, "- an otter slept in the river\n- the weather was fine\n")
    with MemoryIndex(ws, embedder=ConceptEmbedder({"animal": ["otter", "水獭"]})) as idx:
        idx.refresh()
        idx.embed_pending()
    _read_only(shared_root)
    result, _ = _run(shared_root, "hybrid", "ro")
    assert result["hits"] == ["- an otter slept in the river"]  # by meaning: no shared word


def test_a_full_disk_keeps_search_and_refuses_writes_cleanly(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ws = _workspace(root, index=True, stale=True)
    result, logged = _run(root, "search", "full")
    assert f"{LEDGER}#L3-L3" in result["new"]  # appended after the index was built
    assert f"{LEDGER}#L2-L2" in result["tool"] and "beavers build dams" in result["cli"]
    assert any("reads the memory files directly" in m for m in logged), logged
    added, _ = _run(root, "add", "full")
    assert added["add"].startswith("Error: ") and added["unchanged"]
    with MemoryIndex(ws) as idx:  # room again: the index catches up by itself
        idx.refresh()
        assert [h.line_number for h in idx.search("beavers", 5)] == [3]


class _Full:
    """While ``on``, every index connection opened is full: it may not grow by a page."""

    def __init__(self) -> None:
        self.on = False
        self.connections: list[sqlite3.Connection] = []

    def room_again(self) -> None:
        self.on = False
        for con in self.connections:
            con.execute("PRAGMA max_page_count = 1073741823")


@pytest.fixture
def full_database(monkeypatch: pytest.MonkeyPatch) -> _Full:
    from memdir.index import _schema

    full = _Full()
    real = _schema.connect

    def connect(path: Path) -> sqlite3.Connection:
        con = real(path)
        if full.on and path.name == "memory_index.db":
            pages = con.execute("PRAGMA page_count").fetchone()[0]
            con.execute(f"PRAGMA max_page_count = {pages}")
            full.connections.append(con)
        return con

    monkeypatch.setattr("memdir.index._sqlite.connect", connect)
    return full


def test_a_full_database_answers_from_the_files_until_there_is_room(
    ws: Workspace, full_database: _Full
) -> None:
    ws.write_text(LEDGER, "- otters hold hands while they sleep\n")
    with MemoryIndex(ws) as idx:
        idx.refresh()
    ws.append_text(LEDGER, "".join(f"- beaver dam number {i} at night\n" for i in range(3000)))
    full_database.on = True
    with MemoryIndex(ws) as idx:
        with pytest.warns(RuntimeWarning, match="reads the memory files directly"):
            stats = idx.refresh()
        assert stats.lines_indexed == 3000  # into the index kept in memory
        assert len(idx.search("beaver dam", 1000)) == 1000
        assert [h.content for h in idx.search("number 2999", 1)] == [
            "- beaver dam number 2999 at night"
        ]
        with pytest.raises(IndexError_, match="full"):
            idx.index_all_from_workspace()  # what must reach the disk says why it cannot
        full_database.room_again()
        assert idx.refresh().lines_indexed == 3000  # written to the database this time
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with MemoryIndex(ws) as idx:
            assert len(idx.search("beaver dam", 1000)) == 1000


def test_maintenance_reports_the_index_step_failed_when_the_index_is_full(
    tmp_path: Path, full_database: _Full
) -> None:
    from memdir.memory import MaintenanceConfig, MemoryConsolidator, MemoryMaintenanceScheduler
    from memdir.models import ExtractiveModel

    ws = _workspace(tmp_path / "ws", index=True, stale=False)
    ws.append_text(
        LEDGER, "".join(f"- fact {i} about river otter number {i}\n" for i in range(3000))
    )
    scheduler = MemoryMaintenanceScheduler(
        ws, MemoryConsolidator(ws, ExtractiveModel()), config=MaintenanceConfig()
    )
    full_database.on = True
    report = scheduler.run_once()
    assert any("reindex" in str(e) for e in report.errors), report.errors
