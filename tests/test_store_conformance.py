"""The Store contract, on every store: files on disk, rows in a real PostgreSQL server, and a
namespace on a real ``memdir serve`` (over each of those) through its store routes."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest

from conftest import STORES_AND_SERVERS, FixedClock, store_workspace
from memdir.errors import MemdirError, WorkspaceError
from memdir.store._safeopen import PathMissing
from memdir.workspace import Workspace


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The same workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


def test_write_read_stat_list_delete(any_ws: Workspace) -> None:
    ws = any_ws
    assert ws.stat("memory/a.md") is None
    ws.write_text("memory/a.md", "- first 数据库\n")
    assert ws.read_text("memory/a.md") == "- first 数据库\n"
    st = ws.stat("memory/a.md")
    assert st is not None and st.size == len("- first 数据库\n".encode())
    ws.write_text("memory/a.md", "- second\n")
    st2 = ws.stat("memory/a.md")
    assert st2 is not None and st2.tag != st.tag
    ws.write_text("memory/archive/old.md", "- old\n")
    names = {(e.name, e.kind) for e in ws.listdir("memory")}
    assert {("a.md", "file"), ("archive", "dir")} <= names
    assert ws.memory_files()[:1] == [] or "memory/a.md" in ws.memory_files()
    assert "memory/archive/old.md" in ws.memory_files()
    assert ws.delete("memory/a.md") and not ws.delete("memory/a.md")
    with pytest.raises(PathMissing):
        ws.read_bytes("memory/a.md")
    assert ws.read_text("memory/a.md") == ""


def test_create_only_once_and_compare_and_swap(any_ws: Workspace) -> None:
    ws = any_ws
    assert ws.create_text("memory/.state.json", '{"n": 1}')
    assert not ws.create_text("memory/.state.json", '{"n": 2}')
    got = ws.read_versioned("memory/.state.json")
    assert got is not None and got.data == b'{"n": 1}'
    assert ws.replace_if("memory/.state.json", '{"n": 2}', got.version)
    assert not ws.replace_if("memory/.state.json", '{"n": 3}', got.version)  # stale version
    assert ws.read_text("memory/.state.json") == '{"n": 2}'
    assert ws.replace_if("memory/new.json", "{}", None)
    assert not ws.replace_if("memory/new.json", "{}", None)


def test_appends_are_ordered_offsets_and_repair_a_torn_tail(any_ws: Workspace) -> None:
    ws = any_ws
    assert ws.append_text("memory/l.md", "a\n") == (0, 2)
    assert ws.append_text("memory/l.md", "bb\n") == (2, 5)
    ws.write_text("memory/t.md", "no newline")
    start, end = ws.append_text("memory/t.md", "next\n")
    assert ws.read_text("memory/t.md") == "no newline\nnext\n"
    assert (start, end) == (11, 16)
    assert ws.read_from("memory/l.md", 2) == b"bb\n"
    assert ws.read_from("memory/l.md", 3) == b"b\n"
    assert ws.read_from("memory/l.md", 99) == b""


def test_concurrent_appends_from_threads_never_lose_or_tear(any_ws: Workspace) -> None:
    ws = any_ws
    workers, each = 4, 50

    def write(n: int) -> None:
        for i in range(each):
            ws.append_text("memory/c.md", f"- writer {n} line {i} " + "x" * 40 + "\n")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    lines = ws.read_text("memory/c.md").splitlines()
    assert len(lines) == workers * each
    assert len(set(lines)) == workers * each
    assert all(line.endswith("x" * 40) for line in lines)


def test_named_locks_exclude_each_other(any_ws: Workspace) -> None:
    ws = any_ws
    inside: list[int] = []
    overlap: list[bool] = []

    def work(n: int) -> None:
        for _ in range(5):
            with ws.lock("job"):
                inside.append(n)
                overlap.append(len(inside) > 1)
                inside.remove(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(overlap) == 15 and not any(overlap)


async def test_an_async_lock_times_out_while_another_holds_it(any_ws: Workspace) -> None:
    ws = any_ws
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with ws.lock("busy"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(30)
    try:
        with pytest.raises(MemdirError, match="held by another"):
            async with ws.async_lock("busy", timeout=0.3):
                pass
    finally:
        release.set()
        t.join(30)
    async with ws.async_lock("busy", timeout=10):
        pass


def test_namespaces_are_separate_on_every_store(any_ws: Workspace) -> None:
    # On a server every workspace is a namespace of the key's tenant (acme.*).
    prefix = "acme." if any_ws.remote is not None else ""
    names = [f"{prefix}alice-{uuid.uuid4().hex[:8]}", f"{prefix}bob-{uuid.uuid4().hex[:8]}"]
    alice, bob = (any_ws.namespaced(name) for name in names)
    alice.write_text("MEMORY.md", "- alice only\n")
    assert "alice" not in bob.read_text("MEMORY.md")
    assert "alice" not in any_ws.read_text("MEMORY.md")
    assert set(names) <= set(any_ws.namespaces())


def test_paths_are_confined_on_every_store(any_ws: Workspace) -> None:
    for bad in ("../x", "a/../../x", "", "a\x00b"):
        with pytest.raises(WorkspaceError):
            any_ws.write_text(bad, "x")


def test_a_postgres_workspace_has_no_directory(pg_url: str) -> None:
    ws = Workspace(pg_url)
    assert not ws.is_local
    with pytest.raises(WorkspaceError, match="PostgreSQL"):
        _ = ws.root
    assert "***" not in repr(ws) or "@" in repr(ws)
    with pytest.raises(WorkspaceError, match="relative"):
        ws.read_text("/etc/passwd")


def test_a_password_never_shows_in_messages(postgres_server: str) -> None:
    from memdir.store._urls import redact_url

    assert redact_url("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    ws = Workspace("postgresql://u:s3cret@127.0.0.1:1/db?connect_timeout=1", create=False)
    assert "s3cret" not in repr(ws)
    with pytest.raises(WorkspaceError) as info:
        ws.read_text("MEMORY.md")
    assert "s3cret" not in str(info.value)


def test_asyncio_lock_usable_from_one_loop(any_ws: Workspace) -> None:
    async def both() -> None:
        async with any_ws.async_lock("a", timeout=5), any_ws.async_lock("b", timeout=5):
            pass

    asyncio.run(both())
