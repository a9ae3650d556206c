from __future__ import annotations

import multiprocessing as mp
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memdir.errors import ConfigError, MemdirError, WorkspaceError
from memdir.store.ledger import append_bullets, normalize_bullet
from memdir.workspace import Workspace, resolve_workspace_root


def test_layout_created(ws: Workspace) -> None:
    for rel in ("memory", "memory/archive", "sessions", "large_tool_results", ".index"):
        assert (ws.root / rel).is_dir()


def test_root_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMDIR_WORKSPACE", raising=False)
    assert resolve_workspace_root() == tmp_path / ".memdir" / "workspace"
    monkeypatch.setenv("MEMDIR_WORKSPACE", str(tmp_path / "env"))
    assert resolve_workspace_root() == tmp_path / "env"
    assert resolve_workspace_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.setenv("MEMDIR_WORKSPACE", "   ")
    assert resolve_workspace_root() == tmp_path / ".memdir" / "workspace"


@pytest.mark.parametrize(
    "bad",
    ["../x.md", "memory/../../x.md", "/etc/passwd", "a\x00b", "", "  ", ".", "memory/.."],
)
def test_paths_are_confined(ws: Workspace, bad: str) -> None:
    with pytest.raises(WorkspaceError):
        ws.relpath(bad)


def test_symlink_out_of_workspace_is_refused(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("x", encoding="utf-8")
    (ws.root / "memory" / "link").symlink_to(outside)
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.relpath("memory/link/secret.md")


def test_relpath_normalises(ws: Workspace) -> None:
    assert ws.relpath("./memory//2026-01-01.md") == "memory/2026-01-01.md"
    assert ws.relpath("memory/archive/../x.md") == "memory/x.md"
    assert ws.relpath(str(ws.root / "MEMORY.md")) == "MEMORY.md"
    assert ws.relpath("memory\\x.md") == "memory/x.md"


def test_daily_name_uses_zone_and_clock(tmp_path: Path) -> None:
    late = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
    shanghai = Workspace(tmp_path / "a", tz="Asia/Shanghai", clock=lambda: late)
    london = Workspace(tmp_path / "b", tz="Europe/London", clock=lambda: late)
    assert shanghai.ledger_rel() == "memory/2026-12-01.md"
    assert london.ledger_rel() == "memory/2026-11-30.md"
    with pytest.raises(ConfigError):
        Workspace(tmp_path / "c", tz="Mars/Olympus")


def test_atomic_write_replaces(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "one\n")
    ws.write_text("MEMORY.md", "two\n")
    assert ws.read_text("MEMORY.md") == "two\n"
    assert not [p for p in ws.root.iterdir() if ".tmp-" in p.name]


def test_append_repairs_missing_newline(ws: Workspace) -> None:
    target = ws.path("memory/2026-11-30.md")
    target.write_bytes(b"- torn line without newline")
    ws.append_text("memory/2026-11-30.md", "- next\n")
    assert target.read_text(encoding="utf-8") == "- torn line without newline\n- next\n"


def test_append_bullets_reports_lines(ws: Workspace) -> None:
    rel, first, last = append_bullets(ws, ["alpha", "- beta\nwrapped"], header="Memory Add")
    lines = ws.read_text(rel).splitlines()
    assert rel == "memory/2026-11-30.md"
    assert lines[first - 1] == "- alpha"
    assert lines[last - 1] == "- beta wrapped"
    assert lines[first - 2].startswith("## Memory Add — 2026-11-30T09:00:00Z")
    rel2, first2, _ = append_bullets(ws, ["gamma"], header="Memory Add")
    assert ws.read_text(rel2).splitlines()[first2 - 1] == "- gamma"


def test_normalize_bullet() -> None:
    assert normalize_bullet("- Uses  SQLite.") == normalize_bullet("* uses sqlite")
    assert normalize_bullet("1. 决定：用 PostgreSQL。") == "决定：用 postgresql"


def _appender(root: str, worker: int, n: int, barrier: object) -> None:
    ws = Workspace(root, tz="UTC")
    barrier.wait()  # type: ignore[attr-defined]
    for i in range(n):
        ws.append_text("memory/2026-11-30.md", f"- w{worker} line {i} " + "x" * 300 + "\n")


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_concurrent_appends_never_tear(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    ctx = mp.get_context("spawn")
    root = str(tmp_path / "ws") if store == "files" else request.getfixturevalue("pg_url")
    Workspace(root)
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_appender, args=(root, w, 200, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    lines = Workspace(root).read_text("memory/2026-11-30.md").splitlines()
    assert len(lines) == 800
    assert len(set(lines)) == 800
    assert all(line.startswith("- w") and line.endswith("x" * 300) for line in lines)


def test_memory_files_and_ledgers(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "# M\n")
    ws.write_text("memory/2026-01-02.md", "- a\n")
    ws.write_text("memory/archive/2025-01-01.md", "- b\n")
    ws.write_text("memory/.consolidation_state", "{}")
    ws.write_text("memory/notes.txt", "x")
    assert ws.memory_files() == [
        "MEMORY.md",
        "memory/2026-01-02.md",
        "memory/archive/2025-01-01.md",
    ]
    assert [rel for _, rel in ws.ledgers()] == ["memory/2026-01-02.md"]
    assert [rel for _, rel in ws.ledgers(archived=True)] == ["memory/archive/2025-01-01.md"]
    assert os.path.isdir(ws.history_dir.parent)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: Workspace(123), "workspace path must be"),
        (lambda root: Workspace(root, tz=123), "time zone must be"),
        (lambda root: Workspace(root, clock="now"), "clock must be"),
        (lambda root: Workspace(root).relpath(None), "path must be"),  # type: ignore[arg-type]
        (lambda root: Workspace(root).relpath(7), "path must be"),  # type: ignore[arg-type]
        (lambda root: Workspace(root).write_text("MEMORY.md", None), "text must be"),
        (lambda root: Workspace(root).append_text("memory/x.md", b"x"), "text must be"),
    ],
)
def test_wrong_types_give_one_line_workspace_errors(
    tmp_path: Path, make: object, message: str
) -> None:
    with pytest.raises((WorkspaceError, ConfigError), match=message):
        make(tmp_path / "ws")  # type: ignore[operator]


def test_lock_name_must_be_text(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="lock name"), ws.lock(123):  # type: ignore[arg-type]
        pass


def test_utc_now_refuses_a_naive_clock(tmp_path: Path) -> None:
    naive = Workspace(tmp_path / "ws", clock=lambda: datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(ConfigError, match="aware"):
        naive.utc_now()


@pytest.mark.parametrize("method", ["write_text", "append_text"])
def test_lone_surrogates_are_a_workspace_error_and_nothing_is_written(
    ws: Workspace, method: str
) -> None:
    with pytest.raises(WorkspaceError, match="surrogate"):
        getattr(ws, method)("memory/2026-11-30.md", "- ok \udc80 broken\n")
    assert not ws.path("memory/2026-11-30.md").exists()


def test_rewrite_keeps_a_private_files_permissions(ws: Workspace) -> None:
    target = ws.memory_md
    target.write_text("# Memory\n", encoding="utf-8")
    target.chmod(0o600)
    ws.write_text("MEMORY.md", "# Memory\n- new\n")
    assert target.stat().st_mode & 0o777 == 0o600


def test_rewrite_through_a_symlink_updates_the_linked_file(ws: Workspace) -> None:
    real = ws.root / "memory" / "real.md"
    real.write_text("old\n", encoding="utf-8")
    (ws.root / "MEMORY.md").symlink_to(real)
    ws.write_text("MEMORY.md", "new\n")
    assert (ws.root / "MEMORY.md").is_symlink()
    assert real.read_text(encoding="utf-8") == "new\n"


def test_a_failed_append_leaves_the_file_as_it_was(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = ws.path("memory/2026-11-30.md")
    target.write_bytes(b"- kept\n")
    real_write = os.write

    def disk_full(fd: int, data: object) -> int:
        if len(data) > 10:  # type: ignore[arg-type]
            real_write(fd, bytes(data[:10]))  # type: ignore[index]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(WorkspaceError, match="No space left"):
        ws.append_text("memory/2026-11-30.md", "- a long bullet that will not fit\n")
    monkeypatch.undo()
    assert target.read_bytes() == b"- kept\n"


def test_create_text_never_replaces_an_existing_file(ws: Workspace) -> None:
    assert ws.create_text("MEMORY.md", "# Memory\n") is True
    ws.write_text("MEMORY.md", "# Memory\n- user fact\n")
    assert ws.create_text("MEMORY.md", "# Memory\n") is False
    assert ws.read_text("MEMORY.md") == "# Memory\n- user fact\n"
    assert not [p for p in ws.root.iterdir() if ".tmp-" in p.name]


def test_memory_files_skip_links_that_leave_the_workspace(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    ws.write_text("memory/2026-01-02.md", "- a\n")
    (ws.root / "memory" / "2026-01-03.md").symlink_to(outside)
    (ws.root / "memory" / "2026-01-04.md").symlink_to(ws.root / "memory" / "2026-01-02.md")
    # What search lists, memory_get can read: the escaping link is left out.
    assert ws.memory_files() == ["memory/2026-01-02.md", "memory/2026-01-04.md"]
    for rel in ws.memory_files():
        ws.relpath(rel)


def test_append_bullets_refuses_a_bare_string(ws: Workspace) -> None:
    # A str is an iterable of characters: it must not become one bullet per letter.
    with pytest.raises(MemdirError, match="list of bullet strings"):
        append_bullets(ws, "remember this", header="Memory Add")  # type: ignore[arg-type]
    assert not ws.path(ws.ledger_rel()).exists()


def test_append_bullets_keeps_the_header_on_one_line(ws: Workspace) -> None:
    rel, first, last = append_bullets(ws, ["alpha"], header="Memory\nAdd")
    lines = ws.read_text(rel).splitlines()
    assert lines[first - 2].startswith("## Memory Add — ")
    assert lines[first - 1] == lines[last - 1] == "- alpha"


def test_ledger_helpers_refuse_non_text(ws: Workspace) -> None:
    with pytest.raises(MemdirError, match="bullet must be a string"):
        normalize_bullet(None)  # type: ignore[arg-type]
    with pytest.raises(MemdirError, match="bullet must be a string"):
        append_bullets(ws, ["ok", 3], header="Memory Add")  # type: ignore[list-item]
    with pytest.raises(MemdirError, match="non-blank header"):
        append_bullets(ws, ["ok"], header="  ")
    assert not ws.path(ws.ledger_rel()).exists()


def test_append_waiting_on_a_replaced_file_lands_in_the_new_file(ws: Workspace) -> None:
    import fcntl
    import threading
    import time

    from memdir.workspace import locked_append

    target = ws.path("memory/2026-11-30.md")
    target.write_text("- old\n", encoding="utf-8")
    holder = os.open(target, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is mid-append
    result: list[tuple[int, int]] = []
    appender = threading.Thread(target=lambda: result.append(locked_append(target, b"- new\n")))
    appender.start()
    time.sleep(0.3)  # let the appender open the old file and wait for its lock
    ws.write_text("memory/2026-11-30.md", "- old\n- rewritten\n")  # atomic replace meanwhile
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    appender.join(timeout=30)
    assert result
    assert target.read_text(encoding="utf-8") == "- old\n- rewritten\n- new\n"
