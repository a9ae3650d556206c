"""The index, search, get, add and mcp commands through click, plus one real process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from memdir.cli import cli
from memdir.index import MemoryIndex
from memdir.tools._core import close_shared_indexes

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(SAMPLE, target)
    return target


def run(root: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["-w", str(root), *args], input=stdin)


def test_index_prints_stats_then_skips_unchanged_files(root: Path) -> None:
    first = run(root, "index")
    assert first.exit_code == 0, first.output
    assert first.stdout == ""  # counts are diagnostics
    assert first.stderr.startswith("10 files indexed, 0 unchanged, 0 removed;")
    again = run(root, "index", "--json")
    stats = json.loads(again.stdout)
    assert stats["files_indexed"] == 0 and stats["files_unchanged"] == 10
    assert stats["workspace"] == str(root)
    (root / "memory/2026-10-20.md").unlink()
    full = json.loads(run(root, "index", "--full", "--json").stdout)
    assert full["files_indexed"] == 9


def test_search_prints_citations_on_stdout_and_the_count_on_stderr(root: Path) -> None:
    result = run(root, "search", "数据库迁移", "-n", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert all(
        line.split("#L")[0] in {"MEMORY.md", "memory/2026-10-14.md", "memory/2026-11-08.md"}
        for line in lines
    )
    assert "数据库迁移" in result.stdout
    assert result.stderr.startswith('2 results for "数据库迁移"')


def test_search_json(root: Path) -> None:
    result = run(root, "search", "Moganshan offsite", "--json")
    hits = json.loads(result.stdout)
    assert {h["path"] for h in hits} == {"MEMORY.md", "memory/2026-11-24.md"}
    top = hits[0]
    assert set(top) == {
        "citation",
        "path",
        "line_number",
        "line_end",
        "content",
        "score",
        "heading",
        "archived",
        "sources",  # where the hit's bullets came from (provenance)
        "superseded_by",  # a newer line that changes a value this one states
        "supersedes",  # the older lines this one changes
    }
    assert top["citation"] == f"{top['path']}#L{top['line_number']}-L{top['line_end']}"
    file_lines = (root / top["path"]).read_text(encoding="utf-8").split("\n")
    assert file_lines[top["line_number"] - 1] == top["content"]


def test_search_without_hits_is_not_an_error(root: Path) -> None:
    result = run(root, "search", "kangaroo")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "No memories matched" in result.stderr
    assert json.loads(run(root, "search", "kangaroo", "--json").stdout) == []


def test_search_bad_input_exit_codes(root: Path) -> None:
    blank = run(root, "search", "   ")
    assert blank.exit_code == 1
    assert blank.stderr.strip() == "Error: query is blank: give a few keywords"
    assert run(root, "search", "x", "-n", "0").exit_code == 2
    assert run(root, "search").exit_code == 2


def test_get_prints_the_file_text_and_the_range_on_stderr(root: Path) -> None:
    result = run(root, "get", "MEMORY.md:1-3")
    assert result.exit_code == 0, result.output
    assert result.stdout == "# Memory\n\n## About Jing\n"
    assert result.stderr.strip() == "MEMORY.md#L1-L3 (31 lines in the file)"
    whole = run(root, "get", "memory/2026-10-16.md")
    assert whole.stdout == (root / "memory/2026-10-16.md").read_text(encoding="utf-8")
    cited = run(root, "get", "memory/2026-10-14.md#L2-L2")
    assert cited.stdout.startswith("- 数据库迁移讨论")


def test_get_json(root: Path) -> None:
    data = json.loads(run(root, "get", "memory/2026-08-03.md:2-3", "--json").stdout)
    assert data == {
        "path": "memory/archive/2026-08-03.md",
        "requested": "memory/2026-08-03.md",
        "start_line": 2,
        "end_line": 3,
        "total_lines": 10,
        "lines": (root / "memory/archive/2026-08-03.md")
        .read_text(encoding="utf-8")
        .split("\n")[1:3],
    }


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("sessions/a.log.jsonl", "Error: sessions/a.log.jsonl is not a memory file"),
        ("../../etc/passwd", "leaves the workspace"),
        ("memory/2030-01-01.md", "Error: file not found: memory/2030-01-01.md"),
        ("MEMORY.md:500-510", "Error: start_line 500 is past the end of MEMORY.md"),
    ],
)
def test_get_errors(root: Path, path: str, message: str) -> None:
    result = run(root, "get", path)
    assert result.exit_code == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_add_reindexes_the_ledger_it_wrote(root: Path) -> None:
    run(root, "index")
    result = run(root, "add", "-", stdin="Priya moves to Berlin in March\n莫干山团建改到周日\n")
    assert result.exit_code == 0, result.output
    citation = result.stdout.strip()
    rel = citation.split("#")[0]
    assert rel.startswith("memory/") and citation.endswith(("-L3", "-L4"))
    with MemoryIndex(root) as index:  # no refresh: the add must have indexed it already
        hits = index.search("Berlin")
        assert hits[0].path == rel and "Berlin" in hits[0].content
        assert [h.path for h in hits if "Berlin" in h.content] == [rel]
        assert rel in [h.path for h in index.search("团建")]
    assert run(root, "add", "  ").exit_code == 1


def test_add_refuses_a_huge_entry_whole_and_writes_nothing(root: Path) -> None:
    from memdir.tools import memory_add
    from memdir.tools._core import MAX_ENTRY_CHARS

    ledgers = sorted((root / "memory").glob("*.md"))
    before = {path: path.read_bytes() for path in ledgers}
    huge = "a fact that goes on and on\n" * 200_000  # 5.4 MB piped to `memdir add -`
    result = run(root, "add", "-", stdin=huge)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"Error: text is too long for one memory entry ({len(huge):,} characters; the limit is "
        f"{MAX_ENTRY_CHARS:,}): save the facts worth remembering, not whole documents"
    )
    assert run(root, "add", "x" * (MAX_ENTRY_CHARS + 1)).exit_code == 1
    assert memory_add(huge, workspace=root).startswith("Error: text is too long")
    assert sorted((root / "memory").glob("*.md")) == ledgers
    assert {path: path.read_bytes() for path in ledgers} == before
    # A long list within the limit is still one add.
    facts = "".join(f"fact number {i}\n" for i in range(1_000))
    assert len(facts) < MAX_ENTRY_CHARS
    listed = run(root, "add", "-", stdin=facts)
    assert listed.exit_code == 0, listed.output
    first, last = listed.stdout.strip().split("#L")[1].split("-L")
    assert int(last) - int(first) + 1 == 1_000


def test_get_with_a_bad_range_says_so(root: Path) -> None:
    result = run(root, "get", "MEMORY.md:abc")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: invalid line range 'abc' in 'MEMORY.md:abc': use PATH:START-END or PATH:LINE"
    )
    escaped = run(root, "get", "notes\x1b[2J.md")
    assert escaped.exit_code == 1 and "'notes\\x1b[2J.md' is not a memory file" in escaped.stderr


def test_add_masks_secrets_and_says_so(root: Path) -> None:
    result = run(root, "add", "the deploy password=hunter2secret")
    assert result.exit_code == 0, result.output
    rel = result.stdout.strip().split("#")[0]
    assert "hunter2secret" not in (root / rel).read_text(encoding="utf-8")
    assert "1 secret was masked" in result.stderr


def test_mcp_without_the_package_says_how_to_install_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # makes `import mcp...` fail
    result = run(root, "mcp")
    assert result.exit_code == 1
    # Nothing before the error: no "server on stdio" banner for a server that never ran.
    assert result.stderr == (
        "Error: the MCP server needs the 'mcp' package: pip install 'memdir[mcp]'\n"
    )


def test_help_lists_the_commands_and_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    for command in ("index", "search", "get", "add", "demo", "mcp"):
        assert f"  {command} " in result.stdout
    assert "Exit codes: 0 success" in result.stdout


def memdir_process(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memdir", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, "MEMDIR_WORKSPACE": str(root)},
        timeout=120,
        check=False,
    )


def test_installed_command_runs_in_a_real_process(root: Path) -> None:
    done = memdir_process(root, "search", "Wang Lei 备份", "--json")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert hits and all(h["citation"].startswith(("MEMORY.md#L", "memory/")) for h in hits)
    bad = memdir_process(root, "get", "sessions/x")
    assert bad.returncode == 1
    assert bad.stderr.startswith("Error: sessions/x is not a memory file")


_LOADED = """
import runpy, sys
sys.argv = ["memdir", *sys.argv[1:]]
try:
    runpy.run_module("memdir", run_name="__main__")
except SystemExit:
    pass
heavy = ("memdir.agent", "memdir.models.extractive", "memdir.compaction", "memdir.ingest")
print(sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--version"], ["search", "备份"], ["get", "MEMORY.md"]])
def test_quick_commands_do_not_load_the_agent_or_the_models(root: Path, args: list[str]) -> None:
    # `memdir --version` took about 3 s when the command imported everything up front
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "MEMDIR_WORKSPACE": str(root)},
        timeout=120,
        check=False,
    )
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_init_never_overwrites_a_memory_file_that_appears_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n- written by another process\n", encoding="utf-8")
    # Another process creating MEMORY.md between a check and the write must not lose it.
    monkeypatch.setattr(Path, "exists", lambda self: False)
    result = run(root, "init")
    monkeypatch.undo()
    assert result.exit_code == 0, result.output
    assert "written by another process" in (root / "MEMORY.md").read_text(encoding="utf-8")


def test_init_creates_memory_md_once(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert run(root, "init").exit_code == 0
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == "# Memory\n"
    assert run(root, "init").stdout.strip() == str(root)


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand of ``group``, as the words that name it."""
    ctx = click.Context(group)
    paths = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths += _command_paths(command, (*prefix, name))
    return paths


@pytest.mark.parametrize("words", _command_paths(cli), ids=" ".join)
def test_every_command_documents_its_exit_codes(words: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*words, "--help"])
    assert result.exit_code == 0
    assert "Exit codes: 0 success" in result.stdout


def test_add_refuses_undecodable_text_with_one_line(root: Path) -> None:
    result = run(root, "add", "broken \udce9 byte")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: text is not valid Unicode text (is the input UTF-8?)"
    ]


def test_an_os_error_is_one_line_and_exit_1_and_minus_v_shows_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memdir.tools._core

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(memdir.tools._core, "add_memory", disk_full)
    result = run(root, "add", "a fact")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: [Errno 28] No space left on device (OSError)"
    ]
    verbose = CliRunner().invoke(cli, ["-w", str(root), "-v", "add", "a fact"])
    assert verbose.exit_code == 1
    assert isinstance(verbose.exception, OSError)


def test_progress_bar_shows_ingest_and_index_progress_only_when_enabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from rich.console import Console

    from memdir.cli import _common
    from memdir.cli._ingest_cmd import _ingest_progress
    from memdir.ingest import IngestProgress

    with _common.progress_bar("indexing", enabled=False) as update:
        assert update is None and _ingest_progress(update) is None
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    monkeypatch.setattr(_common, "err_console", terminal)
    with _common.progress_bar("ingesting", enabled=True) as update:
        assert update is not None
        on_event = _ingest_progress(update)
        assert on_event is not None
        event = IngestProgress(
            source="/tmp/chats/billing.json",
            session_id="billing",
            done=3,
            total=5,
            file_number=1,
            files=2,
        )
        on_event(event)
    shown = screen.getvalue()
    assert "[1/2] billing.json" in shown and "3/5" in shown
