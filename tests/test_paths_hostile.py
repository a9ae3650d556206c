"""Hostile paths: swapped symlinks, links out of a tool's area, FIFOs, loops, odd names.

Every reader opens a workspace file once, from the workspace root, without letting the kernel
follow a link; these tests attack that from a second process and with files a user or another
program could leave in ``memory/``.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing as mp
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memdir.agent import WorkspaceContextHook, edit_file, list_files, read_file, write_file
from memdir.agent._toolkit import tool_from_function
from memdir.cli import cli
from memdir.errors import MemdirError
from memdir.index import MemoryIndex
from memdir.messages import ToolUseBlock
from memdir.tools import close_shared_indexes, memory_add, memory_get, memory_search
from memdir.workspace import Workspace

OUTSIDE_WORD = "quokkaleak"
INSIDE_WORD = "wombatline"
HANG_GUARD_SECONDS = 60  # generous: a call that returns at all returns in milliseconds


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding text that must never come back."""
    out = tmp_path / "outside"
    (out / "dir").mkdir(parents=True)
    (out / "secret.md").write_text(f"- {OUTSIDE_WORD} outside secret\n", encoding="utf-8")
    (out / "dir" / "note.md").write_text(f"- {OUTSIDE_WORD} outside note\n", encoding="utf-8")
    return out


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws", tz="UTC")


@pytest.fixture(autouse=True)
def _fresh_indexes() -> Any:
    yield
    close_shared_indexes()


def _in_thread(fn: Callable[[], object], *, release: Path | None = None) -> object:
    """Run ``fn`` with a hang guard; a FIFO it is stuck on is opened for writing to free it."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_SECONDS)
    if worker.is_alive():
        if release is not None:
            fd = os.open(release, os.O_WRONLY)  # unblocks a reader stuck in open()
            os.close(fd)
        worker.join(HANG_GUARD_SECONDS)
        pytest.fail(f"{fn} hung on a FIFO")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


# -- a second process keeps swapping files and directories for links out ------------------


def _swapper(root: str, outside: str, ready: Any, stop: Any, swaps: Any) -> None:
    memory = Path(root) / "memory"
    notes = Path(root) / "notes"
    ready.set()
    count = 0
    while not stop.is_set():
        for base, name in ((memory, "race.md"), (notes, "race.md")):
            link = base / ".link-tmp"
            os.symlink(f"{outside}/secret.md", link)
            os.replace(link, base / name)  # the file becomes a link out
            real = base / ".real-tmp"
            real.write_text(f"- {INSIDE_WORD} inside\n", encoding="utf-8")
            os.replace(real, base / name)  # and back
        for base in (memory, notes):
            os.rename(base / "racedir", base / ".racedir-real")
            # The directory becomes a link out, then comes back.
            _clearing(base, lambda base=base: os.symlink(f"{outside}/dir", base / "racedir"))
            os.unlink(base / "racedir")
            _clearing(base, lambda base=base: os.rename(base / ".racedir-real", base / "racedir"))
        count += 1
    swaps.value = count


def _clearing(base: Path, step: Callable[[], None]) -> None:
    while True:
        try:
            step()
            return
        except OSError:  # a writer created racedir/ while it was missing: that copy goes
            shutil.rmtree(base / "racedir", ignore_errors=True)


def _start_swapper(ws: Workspace, outside: Path) -> tuple[Any, Any, Any]:
    for base in ("memory", "notes"):
        (ws.root / base / "racedir").mkdir(parents=True, exist_ok=True)
        (ws.root / base / "race.md").write_text(f"- {INSIDE_WORD} inside\n", encoding="utf-8")
        (ws.root / base / "racedir" / "note.md").write_text(
            f"- {INSIDE_WORD} inside note\n", encoding="utf-8"
        )
    ctx = mp.get_context("spawn")
    ready, stop, swaps = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    proc = ctx.Process(target=_swapper, args=(str(ws.root), str(outside), ready, stop, swaps))
    proc.start()
    assert ready.wait(120), "the swapping process did not start"
    return proc, stop, swaps


def _stop_swapper(proc: Any, stop: Any, swaps: Any) -> int:
    stop.set()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    return int(swaps.value)


def test_swapping_files_and_directories_for_links_out_never_leaks(
    ws: Workspace, outside: Path
) -> None:
    readers: list[Callable[[], str]] = [
        lambda: read_file("memory/race.md", workspace=ws),
        lambda: read_file("notes/race.md", workspace=ws),
        lambda: read_file("memory/racedir/note.md", workspace=ws),
        lambda: read_file("notes/racedir/note.md", workspace=ws),
        lambda: memory_get("memory/race.md", workspace=ws),
        lambda: memory_get("memory/racedir/note.md", workspace=ws),
    ]
    proc, stop, swaps = _start_swapper(ws, outside)
    leaked = inside = crashed = 0
    try:
        for _ in range(1_500):
            for read in readers:
                try:
                    text = read()
                except MemdirError:
                    continue  # refused or missing at that instant: fine
                except Exception:  # a bare OSError or RuntimeError: not fine
                    crashed += 1
                    continue
                leaked += OUTSIDE_WORD in text
                inside += INSIDE_WORD in text
    finally:
        done = _stop_swapper(proc, stop, swaps)
    assert done > 0, "the files were never swapped"
    assert {"leaked": leaked, "crashed": crashed} == {"leaked": 0, "crashed": 0}
    assert inside > 0, "no read ever succeeded, so the test proved nothing"


def test_writes_never_land_outside_while_links_are_swapped_in(ws: Workspace, outside: Path) -> None:
    before = {p: p.read_bytes() for p in outside.rglob("*.md")}
    proc, stop, swaps = _start_swapper(ws, outside)
    crashed = 0
    try:
        for i in range(1_500):
            writes: list[Callable[[], object]] = [
                functools.partial(write_file, "notes/race.md", f"- {i}\n", workspace=ws),
                functools.partial(write_file, "notes/racedir/note.md", f"- {i}\n", workspace=ws),
                functools.partial(ws.append_text, "memory/race.md", f"- {i}\n"),
                functools.partial(ws.append_text, "memory/racedir/note.md", f"- {i}\n"),
            ]
            for write in writes:
                try:
                    write()
                except MemdirError:
                    continue
                except Exception:  # a bare OSError: not fine
                    crashed += 1
    finally:
        done = _stop_swapper(proc, stop, swaps)
    assert done > 0
    assert {p: p.read_bytes() for p in outside.rglob("*.md")} == before
    assert sorted(p.name for p in outside.rglob("*")) == ["dir", "note.md", "secret.md"]
    assert crashed == 0


def test_the_index_never_holds_outside_text_while_links_are_swapped_in(
    ws: Workspace, outside: Path
) -> None:
    proc, stop, swaps = _start_swapper(ws, outside)
    found_outside = found_inside = 0
    try:
        with MemoryIndex(ws) as index:
            for _ in range(400):
                index.index_all_from_workspace()
                found_outside += len(index.search(OUTSIDE_WORD))
                found_inside += len(index.search(INSIDE_WORD))
    finally:
        done = _stop_swapper(proc, stop, swaps)
    assert done > 0
    assert found_outside == 0
    assert found_inside > 0
    assert memory_search(OUTSIDE_WORD, workspace=ws).startswith("No memories matched")


# -- a file replaced by a link loses its rows ---------------------------------------------


@pytest.mark.parametrize("target", ["outside", "session log"])
def test_a_file_replaced_by_a_link_out_loses_its_rows(
    ws: Workspace, outside: Path, target: str
) -> None:
    (ws.root / "sessions" / "s1.log.jsonl").write_text(
        f'{{"text": "{OUTSIDE_WORD} in a session"}}\n', encoding="utf-8"
    )
    note = ws.root / "memory" / "x.md"
    note.write_text(f"- {INSIDE_WORD} the old line\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli, ["-w", str(ws.root), "index"]).exit_code == 0
    hit = runner.invoke(cli, ["-w", str(ws.root), "search", INSIDE_WORD])
    assert "memory/x.md" in hit.stdout
    note.unlink()
    link = outside / "secret.md" if target == "outside" else Path("../sessions/s1.log.jsonl")
    note.symlink_to(link)
    result = runner.invoke(cli, ["-w", str(ws.root), "index"])
    assert result.exit_code == 0, result.output
    assert "1 removed" in result.stderr
    for word in (INSIDE_WORD, OUTSIDE_WORD):
        search = runner.invoke(cli, ["-w", str(ws.root), "search", word])
        assert search.exit_code == 0
        assert "memory/x.md" not in search.stdout


# -- links that stay in the workspace but leave a tool's area -----------------------------


def test_memory_tools_do_not_follow_a_link_out_of_the_memory_files(ws: Workspace) -> None:
    (ws.root / "sessions" / "s1.log.jsonl").write_text('{"secret": "session text"}\n', "utf-8")
    (ws.root / "memory" / "x.md").symlink_to("../sessions/s1.log.jsonl")
    (ws.root / "MEMORY.md").symlink_to("sessions/s1.log.jsonl")
    for path in ("memory/x.md", "MEMORY.md"):
        out = memory_get(path, workspace=ws)
        assert out.startswith("Error: ") and "session text" not in out
        assert "outside the memory files" in out
        result = CliRunner().invoke(cli, ["-w", str(ws.root), "get", path])
        assert result.exit_code == 1 and "session text" not in result.output
    assert memory_search("session text", workspace=ws).startswith("No memories matched")
    # read_file may read sessions/ by name, so following the link shows nothing new.
    assert "session text" in read_file("memory/x.md", workspace=ws)
    # A link that stays among the memory files is followed.
    ws.write_text("memory/2026-01-02.md", f"- {INSIDE_WORD} real\n")
    (ws.root / "memory" / "today.md").symlink_to("2026-01-02.md")
    (ws.root / "memory" / "abs.md").symlink_to(ws.root / "memory" / "2026-01-02.md")
    assert INSIDE_WORD in memory_get("memory/today.md", workspace=ws)
    assert INSIDE_WORD in memory_get("memory/abs.md", workspace=ws)
    assert {"memory/today.md", "memory/abs.md"} <= set(ws.memory_files())


def test_context_injection_leaves_out_links_out_of_their_area(
    ws: Workspace, outside: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (ws.root / "sessions" / "s1.log.jsonl").write_text('{"secret": "session text"}\n', "utf-8")
    (ws.root / "AGENTS.md").symlink_to("sessions/s1.log.jsonl")
    (ws.root / "MEMORY.md").symlink_to(outside / "secret.md")
    with caplog.at_level(logging.WARNING, logger="memdir"):
        text = WorkspaceContextHook(ws).render()
    assert "session text" not in text and OUTSIDE_WORD not in text
    assert "Today is" in text  # the turn goes on without them
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "AGENTS.md" in logged and "MEMORY.md" in logged


def test_write_file_never_writes_through_a_link_out_of_its_area(
    ws: Workspace, outside: Path
) -> None:
    ws.write_text("memory/2026-01-02.md", "- kept\n")
    (ws.root / "notes").mkdir()
    (ws.root / "notes" / "out.md").symlink_to(outside / "secret.md")
    (ws.root / "notes" / "ledger.md").symlink_to("../memory/2026-01-02.md")
    (ws.root / "notes" / "ext").symlink_to(outside / "dir")
    for path in ("notes/out.md", "notes/ledger.md", "notes/ext/new.md", "notes/ext/note.md"):
        with pytest.raises(MemdirError):
            write_file(path, "overwritten\n", workspace=ws)
        with pytest.raises(MemdirError):
            edit_file(path, "outside", "overwritten", workspace=ws)
    assert (outside / "secret.md").read_text(encoding="utf-8").startswith(f"- {OUTSIDE_WORD}")
    assert not (outside / "dir" / "new.md").exists()
    assert ws.read_text("memory/2026-01-02.md") == "- kept\n"
    # A link to a file the tools may write is written through, and stays a link.
    (ws.root / "notes" / "plan.md").write_text("old\n", encoding="utf-8")
    (ws.root / "notes" / "current.md").symlink_to("plan.md")
    write_file("notes/current.md", "new\n", workspace=ws)
    assert (ws.root / "notes" / "current.md").is_symlink()
    assert (ws.root / "notes" / "plan.md").read_text(encoding="utf-8") == "new\n"


def test_memory_add_never_appends_through_a_link_out_of_the_memory_files(
    ws: Workspace, outside: Path
) -> None:
    log = ws.root / "sessions" / "s1.log.jsonl"
    log.write_text("{}\n", encoding="utf-8")
    ledger = ws.root / ws.ledger_rel()
    for target in (Path("../sessions/s1.log.jsonl"), outside / "secret.md"):
        ledger.symlink_to(target)
        out = memory_add("the deploy window is Tuesday", workspace=ws)
        assert out.startswith("Error: ") and "symlink" in out
        ledger.unlink()
    assert log.read_text(encoding="utf-8") == "{}\n"
    assert (outside / "secret.md").read_text(encoding="utf-8").startswith(f"- {OUTSIDE_WORD}")
    # A ledger linked to another memory file is appended through.
    (ws.root / "memory" / "real.md").write_text("", encoding="utf-8")
    ledger.symlink_to("real.md")
    assert memory_add("the deploy window is Tuesday", workspace=ws).startswith("Saved")
    assert "deploy window" in (ws.root / "memory" / "real.md").read_text(encoding="utf-8")


def test_list_files_does_not_descend_into_a_link_out(ws: Workspace, outside: Path) -> None:
    (ws.root / "notes").mkdir()
    (ws.root / "notes" / "ext").symlink_to(outside / "dir")
    (ws.root / "notes" / "loop").symlink_to("loop")
    (ws.root / "notes" / "plan.md").write_text("plan\n", encoding="utf-8")
    listing = list_files("notes", recursive=True, workspace=ws)
    assert "notes/plan.md (5 bytes)" in listing
    assert "note.md" not in listing
    assert "notes/ext" in listing and "notes/loop" in listing  # shown, not followed
    with pytest.raises(MemdirError, match="outside the workspace"):
        list_files("notes/ext", workspace=ws)


# -- FIFOs and loops ----------------------------------------------------------------------


def test_a_fifo_never_blocks_a_reader(ws: Workspace) -> None:
    ws.write_text("memory/2026-01-02.md", f"- {INSIDE_WORD} real\n")
    fifo = ws.root / "memory" / "fifo.md"
    os.mkfifo(fifo)
    out = _in_thread(lambda: memory_get("memory/fifo.md", workspace=ws), release=fifo)
    assert isinstance(out, str) and out.startswith("Error: ") and "FIFO" in out
    with pytest.raises(MemdirError, match="FIFO"):
        _in_thread(lambda: read_file("memory/fifo.md", workspace=ws), release=fifo)
    with pytest.raises(MemdirError, match="FIFO"):
        _in_thread(lambda: ws.read_text("memory/fifo.md"), release=fifo)
    found = _in_thread(lambda: memory_search(INSIDE_WORD, workspace=ws), release=fifo)
    assert "memory/2026-01-02.md" in str(found)
    os.unlink(fifo)
    os.mkfifo(ws.root / "MEMORY.md")
    text = _in_thread(lambda: WorkspaceContextHook(ws).render(), release=ws.root / "MEMORY.md")
    assert "Today is" in str(text)


def test_a_fifo_never_blocks_the_cli(ws: Workspace) -> None:
    ws.write_text("memory/2026-01-02.md", f"- {INSIDE_WORD} real\n")
    fifo = ws.root / "memory" / "fifo.md"
    os.mkfifo(fifo)
    runner = CliRunner()
    for args in (["get", "memory/fifo.md"], ["index"], ["search", INSIDE_WORD]):
        result = _in_thread(
            lambda args=args: runner.invoke(cli, ["-w", str(ws.root), *args]), release=fifo
        )
        assert result is not None
        if args[0] == "get":
            assert result.exit_code == 1 and "not a regular file" in result.stderr  # type: ignore[attr-defined]
        else:
            assert result.exit_code == 0, result.output  # type: ignore[attr-defined]


def test_a_symlink_loop_is_skipped_with_one_warning(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    ws.write_text("memory/2026-01-02.md", f"- {INSIDE_WORD} real\n")
    (ws.root / "memory" / "a.md").symlink_to("b.md")
    (ws.root / "memory" / "b.md").symlink_to("a.md")
    (ws.root / "memory" / "2026-01-03.md").symlink_to("2026-01-03.md")
    with caplog.at_level(logging.WARNING, logger="memdir"):
        with MemoryIndex(ws) as index:
            index.index_all_from_workspace()
            index.refresh()
            assert [h.path for h in index.search(INSIDE_WORD)] == ["memory/2026-01-02.md"]
        assert "memory/2026-01-02.md" in memory_search(INSIDE_WORD, workspace=ws)
        assert [rel for _, rel in ws.ledgers()] == ["memory/2026-01-02.md"]
    about_a = [r.getMessage() for r in caplog.records if "memory/a.md" in r.getMessage()]
    assert len(about_a) == 1 and "loop" in about_a[0]
    result = CliRunner().invoke(cli, ["-w", str(ws.root), "index", "--full"])
    assert result.exit_code == 0, result.output
    out = memory_get("memory/a.md", workspace=ws)
    assert out.startswith("Error: memory/a.md is a symlink loop")
    assert "Too many levels" not in out


# -- the same answer whatever exists outside ----------------------------------------------

LONG_NAME = "memory/" + "x" * 300 + ".md"  # one component longer than NAME_MAX
DEEP_PATH = "memory/" + "d/" * 2100 + "x.md"  # longer than PATH_MAX
HOSTILE_PATHS = [
    "/etc/passwd:x",
    "/no/such/file:x",
    "/etc/passwd",
    "/no/such/file",
    "../../etc/passwd",
    "memory/../../etc/passwd",
    "memory/missing.md",
    "memory/missing.md:x",
    "memory/a\x00b.md",
    "memory/loop.md",
    "memory/loop.md:3",
    "memory/out.md",
    "memory/gone.md",
    "memory/fifo.md",
    "sessions/s1.log.jsonl",
    LONG_NAME,
    DEEP_PATH,
    "memory/file.md/x.md",
]


@pytest.fixture
def hostile(ws: Workspace, outside: Path) -> Workspace:
    """The same odd entries in memory/ and in notes/ (where the file tools may write)."""
    (ws.root / "sessions" / "s1.log.jsonl").write_text("{}\n", encoding="utf-8")
    for base in ("memory", "notes"):
        ws.write_text(f"{base}/file.md", "- a file\n")
        (ws.root / base / "loop.md").symlink_to("loop.md")
        (ws.root / base / "out.md").symlink_to(outside / "secret.md")
        (ws.root / base / "gone.md").symlink_to(outside / "nothing-here.md")
        os.mkfifo(ws.root / base / "fifo.md")
    return ws


def test_cli_get_gives_one_line_errors_for_hostile_paths(hostile: Workspace) -> None:
    for path in HOSTILE_PATHS:
        result = _in_thread(
            lambda path=path: CliRunner().invoke(cli, ["-w", str(hostile.root), "get", path]),
            release=hostile.root / "memory" / "fifo.md",
        )
        assert result.exit_code == 1, path  # type: ignore[attr-defined]
        assert result.stdout == ""  # type: ignore[attr-defined]
        err = result.stderr  # type: ignore[attr-defined]
        assert err.startswith("Error: ") and err.count("\n") == 1, (path, err)
        assert "Too many levels" not in err and OUTSIDE_WORD not in err


def test_memory_get_gives_error_text_for_hostile_paths(hostile: Workspace) -> None:
    for path in HOSTILE_PATHS:
        out = _in_thread(
            lambda path=path: memory_get(path, workspace=hostile),
            release=hostile.root / "memory" / "fifo.md",
        )
        assert isinstance(out, str) and out.startswith("Error: ") and "\n" not in out, path
        assert OUTSIDE_WORD not in out and "failed" not in out


def test_errors_do_not_depend_on_what_exists_outside(hostile: Workspace) -> None:
    def answer(path: str) -> str:
        result = CliRunner().invoke(cli, ["-w", str(hostile.root), "get", path])
        tool = memory_get(path, workspace=hostile)
        return f"{result.exit_code} {result.stderr}|{tool}".replace(path, "PATH")

    for exists, missing in [
        ("/etc/passwd:x", "/no/such/file:x"),
        ("/etc/passwd", "/no/such/file"),
        ("../../etc/passwd", "../../no/such/file"),
        ("memory/out.md", "memory/gone.md"),  # links out: to a file, and to nothing
    ]:
        assert answer(exists) == answer(missing)


# -- file tools called directly raise memdir errors ---------------------------------------


def test_file_tools_raise_memdir_errors_with_one_line(hostile: Workspace) -> None:
    odd = ("memory/loop.md", "memory/fifo.md", "memory/file.md/x.md", "memory/out.md")
    for path in [*odd, LONG_NAME, DEEP_PATH, ".index/memory_index.db", "/etc/passwd", "a\x00b"]:
        writable = path.replace("memory/", "notes/")
        calls: list[Callable[[], object]] = [
            functools.partial(read_file, path, workspace=hostile),
            functools.partial(write_file, writable, "x", workspace=hostile),
            functools.partial(edit_file, writable, "a", "b", workspace=hostile),
            functools.partial(list_files, path, workspace=hostile),
        ]
        for call in calls:
            with pytest.raises(MemdirError) as caught:
                _in_thread(call, release=hostile.root / "memory" / "fifo.md")
            assert "\n" not in str(caught.value) and str(caught.value)


def test_file_tools_refuse_the_index_and_links_into_it(hostile: Workspace) -> None:
    (hostile.root / "notes" / "db.md").symlink_to("../.index/memory_index.db")
    for path in (".index/memory_index.db", "notes/db.md"):
        with pytest.raises(MemdirError, match=r"\.index"):
            read_file(path, workspace=hostile)


def test_file_tools_never_reach_the_server_keys(hostile: Workspace) -> None:
    keys = hostile.root / ".memdir-server" / "keys.json"
    keys.parent.mkdir()
    keys.write_text('{"version": 1, "keys": []}\n', encoding="utf-8")
    (hostile.root / "notes" / "keys.md").symlink_to("../.memdir-server/keys.json")
    (hostile.root / "notes" / "server").symlink_to("../.memdir-server")
    for path in (".memdir-server/keys.json", "notes/keys.md", "notes/server/keys.json"):
        with pytest.raises(MemdirError, match=r"\.memdir-server"):
            read_file(path, workspace=hostile)
    for path in (".memdir-server/keys.json", ".memdir-server/forged.json", "notes/keys.md"):
        with pytest.raises(MemdirError, match=r"\.memdir-server"):
            write_file(path, '{"version": 1, "keys": ["forged"]}\n', workspace=hostile)
        with pytest.raises(MemdirError, match=r"\.memdir-server"):
            edit_file(path, "[]", '["forged"]', workspace=hostile)
    with pytest.raises(MemdirError):
        list_files(".memdir-server", workspace=hostile)
    assert keys.read_text(encoding="utf-8") == '{"version": 1, "keys": []}\n'
    assert not (hostile.root / ".memdir-server" / "forged.json").exists()


def test_file_tools_as_tools_answer_error_text(hostile: Workspace) -> None:
    import asyncio

    tool = tool_from_function(read_file)
    for path in ("memory/loop.md", LONG_NAME, "memory/fifo.md"):
        out = _in_thread(
            lambda path=path: asyncio.run(_call(tool, {"path": path}, hostile)),
            release=hostile.root / "memory" / "fifo.md",
        )
        text = str(out)
        assert text.startswith("Error: ") and "failed:" not in text and "OSError" not in text


async def _call(tool: Any, args: dict[str, object], ws: Workspace) -> str:
    result = await tool.run(ToolUseBlock(id="c1", name=tool.name, input=args), workspace=ws)
    assert result.is_error
    return str(result.text)


def test_non_string_paths_are_tool_input_errors(ws: Workspace) -> None:
    for call in (
        lambda: read_file(5, workspace=ws),  # type: ignore[arg-type]
        lambda: list_files(["notes"], workspace=ws),  # type: ignore[arg-type]
        lambda: write_file(None, "x", workspace=ws),  # type: ignore[arg-type]
    ):
        with pytest.raises(MemdirError, match="path must be"):
            call()
