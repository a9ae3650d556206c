"""The memory tools: what the model sees, caps, confinement, and every bad-argument path."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir import tools
from memdir.errors import IndexError_
from memdir.index import MemoryIndex
from memdir.tools import (
    ALL_TOOL_FUNCTIONS,
    GET_CHAR_CAP,
    GET_MAX_LINES,
    MAX_RESULTS_CAP,
    SEARCH_CHAR_CAP,
    TOOL_DESCRIPTIONS,
    TOOL_SCHEMAS,
    call_tool,
    memory_add,
    memory_get,
    memory_search,
)
from memdir.tools._core import close_shared_indexes, shared_index
from memdir.workspace import Workspace

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"
HIT = re.compile(r"^(?P<path>MEMORY\.md|memory/\S+)#L(?P<start>\d+)-L(?P<end>\d+)( \[[^\]]+\])?: ")


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


@pytest.fixture
def sample(ws: Workspace) -> Workspace:
    shutil.copytree(SAMPLE, ws.root, dirs_exist_ok=True)
    return ws


def hit_lines(output: str) -> list[re.Match[str]]:
    return [m for line in output.split("\n")[1:] if (m := HIT.match(line))]


# -- memory_search ------------------------------------------------------------------------


def test_search_cites_lines_that_really_hold_the_text(sample: Workspace) -> None:
    out = memory_search("数据库迁移", workspace=sample)
    header, *rest = out.split("\n")
    assert re.fullmatch(r'\d+ results? for "数据库迁移" \(best first; .*\):', header)
    hits = hit_lines(out)
    assert hits and len(hits) == len(rest)
    for match, line in zip(hits, rest, strict=True):
        file_lines = (sample.root / match["path"]).read_text(encoding="utf-8").split("\n")
        cited = file_lines[int(match["start"]) - 1 : int(match["end"])]
        assert line[match.end() :] == " ".join(" ".join(cited).split())
    assert any(m["path"] == "MEMORY.md" for m in hits)
    assert any(m["path"] == "memory/2026-10-14.md" for m in hits)


def test_search_in_english_finds_the_decision_with_its_heading(sample: Workspace) -> None:
    out = memory_search("database migration decision", 3, workspace=sample)
    assert "memory/2026-10-14.md#L3-L3 [Memory Flush — 2026-10-14T03:05:27Z]: - Decision" in out


def test_search_marks_archived_hits(sample: Workspace) -> None:
    out = memory_search("mysqldump nightly backups", workspace=sample)
    assert "memory/archive/2026-08-03.md#L" in out
    assert "[archived · Memory Flush" in out


def test_no_results_suggests_rephrasing(sample: Workspace) -> None:
    out = memory_search("kangaroo xylophone", workspace=sample)
    assert out.startswith('No memories matched "kangaroo xylophone".')
    assert "different keywords" in out


def test_max_results_limits_and_clamps(sample: Workspace) -> None:
    assert len(hit_lines(memory_search("PostgreSQL", 2, workspace=sample))) == 2
    assert len(hit_lines(memory_search("PostgreSQL", "3", workspace=sample))) == 3  # type: ignore[arg-type]
    many = memory_search("PostgreSQL", 10_000, workspace=sample)
    assert not many.startswith("Error") and len(hit_lines(many)) <= MAX_RESULTS_CAP


@pytest.mark.parametrize(
    ("query", "max_results", "message"),
    [
        ("   ", 10, "Error: query is blank: give a few keywords"),
        ("", 10, "Error: query is blank"),
        (42, 10, "Error: query must be a string (got int)"),
        (None, 10, "Error: query must be a string (got null)"),
        ("a\x00b", 10, "Error: query contains a NUL byte"),
        ("x" * 1001, 10, "Error: query is too long (1001 characters"),
        ("\ud800", 10, "Error: query is not valid Unicode"),
        ("mysql", 0, "Error: max_results must be at least 1 (got 0)"),
        ("mysql", -5, "Error: max_results must be at least 1 (got -5)"),
        ("mysql", "ten", "Error: max_results must be an integer (got 'ten')"),
        ("mysql", 2.5, "Error: max_results must be an integer (got 2.5)"),
        ("mysql", True, "Error: max_results must be an integer, not a boolean"),
        ("mysql", None, "Error: max_results must be an integer (got null)"),
        ("mysql", [3], "Error: max_results must be an integer (got list)"),
    ],
)
def test_search_bad_arguments(
    sample: Workspace, query: object, max_results: object, message: str
) -> None:
    assert memory_search(query, max_results, workspace=sample).startswith(message)  # type: ignore[arg-type]


def test_search_output_is_capped(ws: Workspace) -> None:
    filler = "lorem ipsum dolor " * 60
    ws.write_text("memory/2026-11-01.md", "".join(f"- quokka {n} {filler}\n" for n in range(60)))
    out = memory_search("quokka", 50, workspace=ws)
    assert len(out) <= SEARCH_CHAR_CAP
    hits = hit_lines(out)
    assert 1 <= len(hits) < 50
    assert all(line.endswith("…") for line in out.split("\n")[1 : len(hits) + 1])
    assert re.search(r"\.\.\. \d+ more results not shown \(output limit\)", out.split("\n")[-1])


def test_search_sees_files_edited_behind_its_back(sample: Workspace) -> None:
    assert memory_search("kumquat", workspace=sample).startswith("No memories")
    with (sample.root / "memory/2026-11-24.md").open("a", encoding="utf-8") as handle:
        handle.write("- Jing's favourite fruit is the kumquat.\n")
    assert "memory/2026-11-24.md#L8-L8" in memory_search("kumquat", workspace=sample)


def test_search_uses_the_configured_workspace_by_default(
    sample: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIR_WORKSPACE", str(sample.root))
    assert "MEMORY.md#L" in memory_search("Moganshan offsite")


def test_an_unexpected_failure_becomes_an_error_text(
    sample: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: MemoryIndex, query: str, limit: int = 10) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(MemoryIndex, "search", broken)
    assert memory_search("mysql", workspace=sample) == (
        "Error: memory_search failed unexpectedly (RuntimeError); try again"
    )


def test_concurrent_searches_share_one_index(sample: Workspace) -> None:
    results: list[str] = []

    def run() -> None:
        for _ in range(5):
            results.append(memory_search("PostgreSQL 回滚", workspace=sample))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 20
    assert all(r.startswith(("1 result", *(f"{n} results" for n in range(2, 11)))) for r in results)
    assert shared_index(sample) is shared_index(Workspace(sample.root))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=60), max_results=st.integers(-3, 80) | st.text(max_size=4))
def test_search_never_raises(sample: Workspace, query: str, max_results: int) -> None:
    out = memory_search(query, max_results, workspace=sample)
    assert isinstance(out, str) and out


# -- memory_get ---------------------------------------------------------------------------


def test_get_numbers_lines_like_the_file(sample: Workspace) -> None:
    out = memory_get("memory/2026-10-14.md", 2, 3, workspace=sample)
    file_lines = (sample.root / "memory/2026-10-14.md").read_text(encoding="utf-8").split("\n")
    assert out.split("\n") == [
        "memory/2026-10-14.md (lines 2-4 of 11):",
        f"2|{file_lines[1]}",
        f"3|{file_lines[2]}",
        f"4|{file_lines[3]}",
        '... 7 more lines; call memory_get(path="memory/2026-10-14.md", start_line=5)',
    ]


def test_get_whole_short_file_has_no_continuation(sample: Workspace) -> None:
    out = memory_get("MEMORY.md", workspace=sample)
    assert out.startswith("MEMORY.md (lines 1-31 of 31):\n1|# Memory\n")
    assert "more lines" not in out


@pytest.mark.parametrize(
    "path",
    [
        "memory/2026-10-14.md#L3-L5",
        "memory/2026-10-14.md:3-5",
        "`memory/2026-10-14.md#L3-L5`",
        "./memory/2026-10-14.md#L3-5",
    ],
)
def test_get_accepts_citations(sample: Workspace, path: str) -> None:
    out = memory_get(path, workspace=sample)
    assert out.split("\n")[0] == "memory/2026-10-14.md (lines 3-5 of 11):"
    assert [line.split("|")[0] for line in out.split("\n")[1:4]] == ["3", "4", "5"]


def test_get_single_line_citation_and_explicit_arguments(sample: Workspace) -> None:
    assert (
        memory_get("MEMORY.md#L18", workspace=sample).split("\n")[1].startswith("18|- 数据库迁移")
    )
    assert (
        memory_get("MEMORY.md:18", workspace=sample).split("\n")[0].endswith("(lines 18-18 of 31):")
    )
    explicit = memory_get("MEMORY.md#L18-L20", 5, 2, workspace=sample)
    assert explicit.split("\n")[0] == "MEMORY.md (lines 5-6 of 31):"


def test_get_before_the_first_consolidation(ws: Workspace) -> None:
    assert memory_get("MEMORY.md", workspace=ws) == (
        "Error: MEMORY.md does not exist yet; memory_search finds facts in the daily notes"
    )


def test_get_finds_a_ledger_that_moved_to_the_archive(sample: Workspace) -> None:
    out = memory_get("memory/2026-08-03.md", 1, 2, workspace=sample)
    assert out.startswith(
        "memory/archive/2026-08-03.md (lines 1-2 of 10; moved from memory/2026-08-03.md):"
    )


def test_get_caps_lines_and_characters(ws: Workspace) -> None:
    ws.write_text("memory/big.md", "".join(f"line {n}\n" for n in range(1, 501)))
    out = memory_get("memory/big.md", 1, 1000, workspace=ws)
    assert out.split("\n")[0] == f"memory/big.md (lines 1-{GET_MAX_LINES} of 500):"
    assert out.split("\n")[-1] == (
        f'... {500 - GET_MAX_LINES} more lines; call memory_get(path="memory/big.md", '
        f"start_line={GET_MAX_LINES + 1})"
    )
    ws.write_text("memory/wide.md", "".join(f"{n} " + "w" * 3000 + "\n" for n in range(1, 40)))
    wide = memory_get("memory/wide.md", workspace=ws)
    assert len(wide) <= GET_CHAR_CAP + 200
    assert "… [line clipped; 3002 characters]" in wide
    last_shown = int(wide.split("\n")[-2].split("|")[0])
    assert last_shown < 39
    assert wide.split("\n")[-1].endswith(f"start_line={last_shown + 1})")


@pytest.mark.parametrize(
    ("path", "start", "count", "message"),
    [
        ("sessions/s1.log.jsonl", 1, 50, "Error: sessions/s1.log.jsonl is not a memory file"),
        ("AGENTS.md", 1, 50, "Error: AGENTS.md is not a memory file"),
        ("memory/../sessions/s1.log.jsonl", 1, 50, "Error: sessions/s1.log.jsonl is not a memory"),
        ("../outside.md", 1, 50, "Error: path '../outside.md' leaves the workspace"),
        ("/etc/passwd", 1, 50, "Error: absolute path '/etc/passwd' is outside the workspace"),
        ("memory/link.md", 1, 50, "leads outside the workspace through a symlink"),
        ("memory/2031-01-01.md", 1, 50, "Error: file not found: memory/2031-01-01.md"),
        ("memory/2031-01-01.md:4", 1, 50, "Error: file not found: memory/2031-01-01.md"),
        ("memory/empty.md", 1, 50, "Error: memory/empty.md is empty"),
        ("memory/archive", 1, 50, "Error: memory/archive is a directory"),
        ("MEMORY.md", 99, 50, "Error: start_line 99 is past the end of MEMORY.md (31 lines)"),
        ("MEMORY.md#L9-L3", 1, 50, "Error: the line range in 'MEMORY.md#L9-L3' ends before"),
        ("MEMORY.md#L0-L3", 1, 50, "Error: line numbers start at 1"),
        ("MEMORY.md", 0, 50, "Error: start_line must be at least 1 (got 0)"),
        ("MEMORY.md", -2, 50, "Error: start_line must be at least 1 (got -2)"),
        ("MEMORY.md", 1, 0, "Error: num_lines must be at least 1 (got 0)"),
        ("MEMORY.md", 1, "many", "Error: num_lines must be an integer (got 'many')"),
        ("MEMORY.md", None, 50, "Error: start_line must be an integer (got null)"),
        ("", 1, 50, "Error: path is blank: give a path from memory_search"),
        ("MEMORY.md\x00", 1, 50, "Error: path contains a NUL byte"),
        (["MEMORY.md"], 1, 50, "Error: path must be a string (got list)"),
    ],
)
def test_get_bad_arguments(
    sample: Workspace, path: object, start: object, count: object, message: str
) -> None:
    (sample.root / "sessions/s1.log.jsonl").write_text("{}\n", encoding="utf-8")
    (sample.root / "memory/empty.md").write_text("", encoding="utf-8")
    os.symlink("/etc/passwd", sample.root / "memory/link.md")
    out = memory_get(path, start, count, workspace=sample)  # type: ignore[arg-type]
    assert message in out and out.startswith("Error: ")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.text(max_size=40), start=st.integers(-2, 40), count=st.integers(-2, 300))
def test_get_never_raises(sample: Workspace, path: str, start: int, count: int) -> None:
    out = memory_get(path, start, count, workspace=sample)
    assert isinstance(out, str) and out


# -- memory_add ---------------------------------------------------------------------------


def test_add_appends_a_block_and_indexes_it_at_once(ws: Workspace) -> None:
    out = memory_add("Jing's favourite editor theme is gruvbox", workspace=ws)
    assert out == "Saved 1 bullet to memory/2026-11-30.md#L3-L3."
    text = (ws.root / "memory/2026-11-30.md").read_text(encoding="utf-8")
    assert (
        text
        == "\n## Memory Add — 2026-11-30T09:00:00Z\n- Jing's favourite editor theme is gruvbox\n"
    )
    # No refresh: the add itself re-indexed the ledger.
    hits = shared_index(ws).search("gruvbox")
    assert [(h.path, h.line_number) for h in hits] == [("memory/2026-11-30.md", 3)]


def test_add_masks_secrets_before_writing(ws: Workspace) -> None:
    out = memory_add("password=hunter2secret api_key: abcd1234efgh5678", workspace=ws)
    assert out.startswith("Saved 1 bullet to memory/2026-11-30.md#L3-L3.")
    assert "2 secrets were masked" in out
    text = (ws.root / "memory/2026-11-30.md").read_text(encoding="utf-8")
    assert "hunter2secret" not in text and "abcd1234efgh5678" not in text
    assert "[REDACTED:" in text


def test_add_several_lines_become_several_bullets(ws: Workspace) -> None:
    memory_add("first fact", workspace=ws)
    out = memory_add("- 第二条：王磊负责备份\n\n  third fact  \n", workspace=ws)
    assert out == "Saved 2 bullets to memory/2026-11-30.md#L6-L7."
    lines = (ws.root / "memory/2026-11-30.md").read_text(encoding="utf-8").split("\n")
    assert lines[5:7] == ["- 第二条：王磊负责备份", "- third fact"]
    assert "memory/2026-11-30.md#L6-L6" in memory_search("王磊 备份", workspace=ws)


def test_add_keeps_the_fact_when_indexing_fails(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: MemoryIndex, rel: str, offset: int) -> int:
        raise IndexError_("disk full")

    monkeypatch.setattr(MemoryIndex, "index_appended", broken)
    out = memory_add("survives a broken index", workspace=ws)
    assert out.startswith("Saved 1 bullet to memory/2026-11-30.md#L3-L3. (Search will find it")
    assert "disk full" in out
    assert "survives a broken index" in (ws.root / "memory/2026-11-30.md").read_text(
        encoding="utf-8"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Error: text is blank: give the fact to remember"),
        (" \n\t", "Error: text is blank"),
        (None, "Error: text must be a string (got null)"),
        (3.5, "Error: text must be a string (got float)"),
        ("a\x00b", "Error: text contains a NUL byte"),
        ("x" * 8001, "Error: text is too long (8001 characters; the limit is 8000)"),
    ],
)
def test_add_bad_arguments(ws: Workspace, text: object, message: str) -> None:
    assert memory_add(text, workspace=ws).startswith(message)  # type: ignore[arg-type]
    assert not (ws.root / "memory/2026-11-30.md").exists()


# -- schemas and dispatch -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_TOOL_FUNCTIONS))
def test_schemas_match_the_functions(name: str) -> None:
    schema = TOOL_SCHEMAS[name]
    params = {
        p.name: p
        for p in inspect.signature(ALL_TOOL_FUNCTIONS[name]).parameters.values()
        if p.kind is p.POSITIONAL_OR_KEYWORD
    }
    assert list(schema["properties"]) == list(params)
    assert schema["required"] == [n for n, p in params.items() if p.default is p.empty]
    for arg, param in params.items():
        prop = schema["properties"][arg]
        assert prop["description"]
        if param.default is not param.empty and param.default is not None:
            assert prop["default"] == param.default
    assert schema["additionalProperties"] is False
    description = TOOL_DESCRIPTIONS[name]
    assert description and "Args:" not in description and "workspace" not in description


def test_call_tool_dispatches_and_checks_arguments(sample: Workspace) -> None:
    assert call_tool("memory_search", {"query": "Moganshan"}, workspace=sample).startswith(
        "2 results"
    )
    assert "\n1|# Memory\n" in call_tool("memory_get", {"path": "MEMORY.md#L1"}, workspace=sample)
    assert call_tool("memory_forget", {}, workspace=sample).startswith(
        "Error: unknown tool 'memory_forget'; the memory tools are memory_search, memory_get"
    )
    assert call_tool("memory_search", {"q": "x"}, workspace=sample) == (
        "Error: memory_search got unexpected argument(s) q; it takes query, max_results"
    )
    assert call_tool("memory_get", None, workspace=sample) == (
        "Error: memory_get needs argument(s) path; it takes path, start_line, num_lines"
    )
    assert call_tool("memory_add", ["x"], workspace=sample) == (
        "Error: memory_add takes a JSON object of arguments"
    )


def test_public_names() -> None:
    assert tools.__all__ == sorted(tools.__all__)
    for name in tools.__all__:
        assert getattr(tools, name).__doc__ or name.isupper()


def test_the_workspace_may_be_given_as_a_path(sample: Workspace) -> None:
    out = memory_search("数据库迁移", workspace=str(sample.root))
    assert hit_lines(out)
    assert memory_get("MEMORY.md", workspace=sample.root).startswith("MEMORY.md (lines 1-")


def test_a_workspace_of_the_wrong_type_is_an_error_text(sample: Workspace) -> None:
    for tool, args in ((memory_search, ("x",)), (memory_get, ("MEMORY.md",))):
        out = tool(*args, workspace=123)  # type: ignore[operator]
        assert out.startswith("Error: workspace path must be a str or a path"), out


def test_call_tool_never_raises_on_odd_argument_names(sample: Workspace) -> None:
    out = call_tool("memory_search", {1: "x", "query": "y"}, workspace=sample)
    assert out.startswith("Error: memory_search got unexpected argument(s) 1;")


def test_a_forked_child_opens_its_own_index(sample: Workspace) -> None:
    # A SQLite connection must not be used on both sides of a fork; the child reopens.
    parent = shared_index(sample)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            child = shared_index(sample)
            ok = child is not parent and hit_lines(memory_search("数据库迁移", workspace=sample))
            os.write(write, b"ok" if ok else b"shared")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert shared_index(sample) is parent
