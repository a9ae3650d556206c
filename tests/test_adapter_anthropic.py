"""The Claude memory tool (memory_20250818) on a memdir workspace: every command, the reference
implementation's exact answers and errors, confinement, append-only ledgers, masking, indexing,
and runs through the real ``anthropic`` SDK's tool runner (its HTTP client mocked, offline)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.tools import ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from memdir import Workspace
from memdir.adapters.anthropic import AsyncMemdirMemoryTool, MemdirMemoryTool, MemoryToolError
from memdir.tools import memory_search
from memdir.tools._core import close_shared_indexes, shared_index

TODAY = "2026-11-30"
SECRET = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(
        tmp_path / "ws", tz="UTC", clock=lambda: datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    )
    yield workspace
    close_shared_indexes()


@pytest.fixture
def tool(ws: Workspace) -> MemdirMemoryTool:
    return MemdirMemoryTool(ws)


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(MemoryToolError) as info:
        call(*args)
    return str(info.value)


def indexed(ws: Workspace, query: str) -> list[str]:
    """Paths the index finds right now (no refresh: only what the write itself indexed)."""
    return [hit.path for hit in shared_index(ws).search(query)]


# -- view ---------------------------------------------------------------------------------------


def test_view_of_an_empty_memory_lists_the_directory_like_the_reference(tool: MemdirMemoryTool):
    text = tool.view("/memories")
    lines = text.split("\n")
    assert lines[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:"
    )
    assert lines[1].endswith("\t/memories")
    assert lines[2].endswith("\t/memories/archive/")


def test_view_lists_memory_md_notes_and_ledgers_with_sizes_and_hides_memdir_state(
    tool: MemdirMemoryTool, ws: Workspace
):
    ws.write_text("MEMORY.md", "# Memory\n- a\n")
    ws.write_text("memory/notes.md", "x" * 1536)
    ws.write_text("memory/2026-11-29.md", "\n## Flush\n- b\n")
    ws.write_text("memory/.flush_state/s.json", "{}")
    lines = tool.view("/memories").split("\n")[2:]
    assert lines == [
        "14B\t/memories/2026-11-29.md",
        "13B\t/memories/MEMORY.md",
        f"{lines[2].split(chr(9))[0]}\t/memories/archive/",
        "1.5K\t/memories/notes.md",
    ]


def test_view_file_numbers_lines_and_honours_view_range(tool: MemdirMemoryTool):
    tool.create("/memories/todo.md", "one\ntwo\nthree\nfour\n")
    assert tool.view("/memories/todo.md") == (
        "Here's the content of /memories/todo.md with line numbers:\n"
        "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\t"
    )
    assert tool.view("/memories/todo.md", [2, 3]).split("\n")[1:] == [
        "     2\ttwo",
        "     3\tthree",
    ]
    assert tool.view("/memories/todo.md", [3, -1]).split("\n")[1:] == [
        "     3\tthree",
        "     4\tfour",
        "     5\t",
    ]


def test_view_of_a_missing_path_says_so_exactly(tool: MemdirMemoryTool):
    assert refused(tool.view, "/memories/nothing.md") == (
        "The path /memories/nothing.md does not exist. Please provide a valid path."
    )


# -- create / str_replace / insert ----------------------------------------------------------------


def test_create_writes_a_note_and_never_replaces_one(tool: MemdirMemoryTool, ws: Workspace):
    assert tool.create("/memories/notes.md", "Priya owns billing.\n") == (
        "File created successfully at: /memories/notes.md"
    )
    assert (ws.root / "memory/notes.md").read_text() == "Priya owns billing.\n"
    assert refused(tool.create, "/memories/notes.md", "other") == (
        "File /memories/notes.md already exists"
    )
    assert (ws.root / "memory/notes.md").read_text() == "Priya owns billing.\n"


def test_str_replace_answers_with_the_reference_snippet(tool: MemdirMemoryTool, ws: Workspace):
    tool.create("/memories/n.md", "a\nb\nc\nd\ne\nf\ng\n")
    assert tool.str_replace("/memories/n.md", "d", "D") == (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     2\tb\n     3\tc\n     4\tD\n     5\te\n     6\tf"
    )
    assert (ws.root / "memory/n.md").read_text() == "a\nb\nc\nD\ne\nf\ng\n"


def test_str_replace_errors_are_the_reference_texts(tool: MemdirMemoryTool, ws: Workspace):
    tool.create("/memories/n.md", "x = 1\ny = 2\nx = 1\n")
    assert refused(tool.str_replace, "/memories/n.md", "z = 3", "q") == (
        "No replacement was performed, old_str `z = 3` did not appear verbatim in /memories/n.md."
    )
    assert refused(tool.str_replace, "/memories/n.md", "x = 1", "q") == (
        "No replacement was performed. Multiple occurrences of old_str `x = 1` in lines: 1, 3. "
        "Please ensure it is unique"
    )
    assert refused(tool.str_replace, "/memories/gone.md", "a", "b") == (
        "The path /memories/gone.md does not exist. Please provide a valid path."
    )
    assert (ws.root / "memory/n.md").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_insert_adds_a_line_and_checks_its_range(tool: MemdirMemoryTool, ws: Workspace):
    tool.create("/memories/n.md", "first\nsecond\n")
    assert tool.insert("/memories/n.md", 1, "between") == "The file /memories/n.md has been edited."
    assert (ws.root / "memory/n.md").read_text() == "first\nbetween\nsecond\n"
    assert refused(tool.insert, "/memories/n.md", 9, "x") == (
        "Invalid `insert_line` parameter: 9. It should be within the range [0, 3]."
    )


# -- delete / rename ----------------------------------------------------------------------------


def test_delete_answers_like_the_reference_and_keeps_the_file(
    tool: MemdirMemoryTool, ws: Workspace
):
    tool.create("/memories/old.md", "Deprecated plan: use MySQL.\n")
    assert tool.delete("/memories/old.md") == "Successfully deleted /memories/old.md"
    assert not (ws.root / "memory/old.md").exists()
    kept = list((ws.root / "memory/.history/deleted").glob("old.*.md"))
    assert [p.read_text() for p in kept] == ["Deprecated plan: use MySQL.\n"]
    assert refused(tool.delete, "/memories/old.md") == "The path /memories/old.md does not exist"
    assert refused(tool.delete, "/memories") == "Cannot delete the /memories directory itself"
    assert "old.md" not in tool.view("/memories")


def test_rename_moves_a_note_and_never_replaces_the_destination(
    tool: MemdirMemoryTool, ws: Workspace
):
    tool.create("/memories/a.md", "alpha\n")
    tool.create("/memories/b.md", "beta\n")
    assert refused(tool.rename, "/memories/a.md", "/memories/b.md") == (
        "The destination /memories/b.md already exists"
    )
    assert tool.rename("/memories/a.md", "/memories/c.md") == (
        "Successfully renamed /memories/a.md to /memories/c.md"
    )
    assert (ws.root / "memory/c.md").read_text() == "alpha\n"
    assert (ws.root / "memory/b.md").read_text() == "beta\n"
    assert not (ws.root / "memory/a.md").exists()
    assert refused(tool.rename, "/memories", "/memories/x") == (
        "Cannot rename the /memories directory itself"
    )


# -- confinement --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/memories/../x.md", "Path /memories/../x.md would escape /memories directory"),
        (
            "/memories/a/../../etc/passwd",
            "Path /memories/a/../../etc/passwd would escape /memories directory",
        ),
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("memories/notes.md", "Path must start with /memories, got: memories/notes.md"),
        ("/memoriesx/notes.md", "Path must start with /memories, got: /memoriesx/notes.md"),
        ("/memories/a\x00.md", "Path /memories/a\\x00.md contains a NUL byte"),
    ],
)
def test_paths_outside_memories_are_refused_for_every_command(
    tool: MemdirMemoryTool, ws: Workspace, path: str, message: str
):
    before = sorted(p.relative_to(ws.root) for p in ws.root.rglob("*"))
    assert refused(tool.view, path) == message
    assert refused(tool.create, path, "x") == message
    assert refused(tool.str_replace, path, "a", "b") == message
    assert refused(tool.insert, path, 0, "x") == message
    assert refused(tool.delete, path) == message
    assert refused(tool.rename, path, "/memories/ok.md") == message
    assert sorted(p.relative_to(ws.root) for p in ws.root.rglob("*")) == before


def test_symlinks_out_of_the_memory_are_refused_and_not_listed(
    tool: MemdirMemoryTool, ws: Workspace, tmp_path: Path
):
    outside = tmp_path / "outside.md"
    outside.write_text("private\n")
    (ws.root / "sessions/s.log.jsonl").write_text("{}\n")
    os.symlink(outside, ws.root / "memory/leak.md")
    os.symlink(ws.root / "sessions", ws.root / "memory/logs")
    for path in ("/memories/leak.md", "/memories/logs"):
        assert refused(tool.view, path) == "Path would escape /memories directory via symlink"
    assert refused(tool.str_replace, "/memories/leak.md", "private", "x") == (
        "Path would escape /memories directory via symlink"
    )
    assert refused(tool.insert, "/memories/leak.md", 0, "x") == (
        "Path would escape /memories directory via symlink"
    )
    assert outside.read_text() == "private\n"
    listing = tool.view("/memories")
    assert "leak.md" not in listing and "logs" not in listing


def test_memdir_state_files_cannot_be_opened(tool: MemdirMemoryTool, ws: Workspace):
    ws.write_text("memory/.flush_state/s.json", "{}")
    message = refused(tool.view, "/memories/.flush_state/s.json")
    assert "memdir's own state" in message
    assert "memdir's own state" in refused(tool.create, "/memories/.hidden.md", "x")


def test_subdirectories_and_non_markdown_files_are_refused_with_the_reason(
    tool: MemdirMemoryTool, ws: Workspace
):
    assert "directly in /memories" in refused(tool.create, "/memories/projects/a.md", "x")
    assert "name it /memories/todo.md" in refused(tool.create, "/memories/todo.txt", "x")
    assert not (ws.root / "memory/projects").exists()


# -- the ledgers stay append-only ---------------------------------------------------------------


def test_a_past_ledger_refuses_every_edit_with_the_reason(tool: MemdirMemoryTool, ws: Workspace):
    ledger = "\n## Memory Flush — 2026-11-29T10:00:00Z\n- We chose Postgres.\n"
    ws.write_text("memory/2026-11-29.md", ledger)
    past = "/memories/2026-11-29.md"
    for message in (
        refused(tool.str_replace, past, "Postgres", "MySQL"),
        refused(tool.insert, past, 3, "- more"),
        refused(tool.delete, past),
        refused(tool.rename, past, "/memories/x.md"),
    ):
        assert message.startswith(
            f"{past} is the daily ledger of 2026-11-29: ledgers are append-only"
        )
        assert f"/memories/{TODAY}.md" in message
    assert refused(tool.create, "/memories/2026-11-28.md", "- invented").startswith(
        "/memories/2026-11-28.md is the daily ledger of 2026-11-28"
    )
    assert (ws.root / "memory/2026-11-29.md").read_text() == ledger
    assert not (ws.root / "memory/2026-11-28.md").exists()
    assert "cannot be renamed into it" in refused(tool.rename, "/memories/n.md", past)


def test_todays_ledger_takes_facts_only_at_its_end(tool: MemdirMemoryTool, ws: Workspace):
    today = f"/memories/{TODAY}.md"
    assert tool.create(today, "We decided to ship on Friday.") == (
        f"File created successfully at: {today}"
    )
    text = (ws.root / f"memory/{TODAY}.md").read_text()
    assert text.endswith("- We decided to ship on Friday.\n") and "## Memory Add" in text
    end = len(text.split("\n")) - 1
    assert refused(tool.insert, today, 0, "- first!").startswith(
        f"{today} is today's daily ledger, which is append-only: insert at line {end}"
    )
    assert "append-only" in refused(tool.str_replace, today, "Friday", "Monday")
    assert tool.insert(today, end, "Priya reviews the release.") == (
        f"The file {today} has been edited."
    )
    after = (ws.root / f"memory/{TODAY}.md").read_text()
    assert after.startswith(text) and after.endswith("- Priya reviews the release.\n")
    assert f"memory/{TODAY}.md" in indexed(ws, "Priya release")


def test_archived_ledgers_and_memory_md_deletion_are_refused(tool: MemdirMemoryTool, ws: Workspace):
    ws.write_text("memory/archive/2025-01-02.md", "\n## Flush\n- old fact\n")
    ws.write_text("MEMORY.md", "# Memory\n- keep\n")
    assert tool.view("/memories/archive/2025-01-02.md").endswith("     3\t- old fact\n     4\t")
    assert "read-only" in refused(tool.str_replace, "/memories/archive/2025-01-02.md", "old", "x")
    assert "cannot be deleted" in refused(tool.delete, "/memories/MEMORY.md")
    assert (ws.root / "MEMORY.md").read_text() == "# Memory\n- keep\n"


# -- MEMORY.md, masking, indexing ---------------------------------------------------------------


def test_memory_md_edits_are_atomic_rewrites_that_keep_the_previous_version(
    tool: MemdirMemoryTool, ws: Workspace
):
    ws.write_text("MEMORY.md", "# Memory\n- The deploy day is Tuesday.\n")
    inode = (ws.root / "MEMORY.md").stat().st_ino
    tool.str_replace("/memories/MEMORY.md", "Tuesday", "Thursday")
    assert (ws.root / "MEMORY.md").read_text() == "# Memory\n- The deploy day is Thursday.\n"
    assert (ws.root / "MEMORY.md").stat().st_ino != inode  # replaced, never written in place
    versions = list((ws.root / "memory/.history").glob("MEMORY.*.md"))
    assert [v.read_text() for v in versions] == ["# Memory\n- The deploy day is Tuesday.\n"]
    assert indexed(ws, "Thursday") == ["MEMORY.md"]
    assert indexed(ws, "Tuesday") == []


def test_every_write_masks_secrets_and_says_so(tool: MemdirMemoryTool, ws: Workspace):
    note = "1 secret was masked as [REDACTED:<kind>]."
    assert tool.create("/memories/keys.md", f"api key {SECRET}\n").endswith(note)
    assert tool.str_replace("/memories/keys.md", "api key", f"api key {SECRET} and").endswith(note)
    assert tool.insert("/memories/keys.md", 0, f"OPENAI_API_KEY={SECRET}").endswith(note)
    assert tool.create(f"/memories/{TODAY}.md", f"The CI token is {SECRET}").endswith(note)
    for path in (ws.root / "memory").rglob("*.md"):
        assert SECRET not in path.read_text(), path
    assert "[REDACTED:" in (ws.root / "memory/keys.md").read_text()
    assert SECRET not in tool.view("/memories/keys.md")


def test_every_write_is_searchable_at_once(tool: MemdirMemoryTool, ws: Workspace):
    tool.create("/memories/people.md", "Priya owns the billing service.\n")
    assert indexed(ws, "billing") == ["memory/people.md"]
    tool.str_replace("/memories/people.md", "billing", "coupon")
    assert indexed(ws, "coupon") == ["memory/people.md"] and indexed(ws, "billing") == []
    tool.insert("/memories/people.md", 1, "Wen runs the 数据库迁移.")
    assert indexed(ws, "数据库迁移") == ["memory/people.md"]
    tool.rename("/memories/people.md", "/memories/team.md")
    assert indexed(ws, "coupon") == ["memory/team.md"]
    tool.delete("/memories/team.md")
    assert indexed(ws, "coupon") == []
    assert "No memories matched" in memory_search("coupon", workspace=ws)


# -- dict and SDK interfaces --------------------------------------------------------------------


def test_the_tool_param_is_the_api_memory_tool(ws: Workspace):
    assert MemdirMemoryTool(ws).to_dict() == {"type": "memory_20250818", "name": "memory"}
    cached = MemdirMemoryTool(ws, cache_control={"type": "ephemeral"})
    assert cached.to_dict()["cache_control"] == {"type": "ephemeral"}


def test_execute_takes_the_sdk_command_models(tool: MemdirMemoryTool):
    tool.execute(
        BetaMemoryTool20250818CreateCommand(
            command="create", path="/memories/a.md", file_text="hi\n"
        )
    )
    tool.execute(
        BetaMemoryTool20250818StrReplaceCommand(
            command="str_replace", path="/memories/a.md", old_str="hi", new_str="hello"
        )
    )
    view = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md"))
    assert view.split("\n")[1] == "     1\thello"


def test_refusals_are_sdk_tool_errors(tool: MemdirMemoryTool):
    with pytest.raises(ToolError) as info:
        tool.execute({"command": "view", "path": "/nope"})
    assert info.value.content == "Path must start with /memories, got: /nope"
    assert isinstance(info.value, MemoryToolError)
    assert "Unknown command" in refused(
        tool.execute, {"command": "format_disk", "path": "/memories"}
    )
    assert "`create` needs `file_text`" in refused(
        tool.execute, {"command": "create", "path": "/memories/a.md"}
    )


def test_tool_result_answers_a_tool_use_block(tool: MemdirMemoryTool):
    ok = tool.tool_result(
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "memory",
            "input": {"command": "create", "path": "/memories/x.md", "file_text": "x"},
        }
    )
    assert ok == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "File created successfully at: /memories/x.md",
    }
    bad = tool.tool_result(
        {"id": "toolu_2", "input": {"command": "view", "path": "/memories/y.md"}}
    )
    assert bad["is_error"] is True
    assert bad["content"] == "The path /memories/y.md does not exist. Please provide a valid path."


def _message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


class _ScriptedApi:
    """An offline Messages API: replies in turn, and records each request body."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        return httpx2.Response(200, json=self.replies[len(self.requests) - 1])


def _tool_use(i: int, command: dict[str, Any]) -> dict[str, Any]:
    return _message(
        [{"type": "tool_use", "id": f"toolu_{i}", "name": "memory", "input": command}], "tool_use"
    )


SCRIPT = [
    _tool_use(1, {"command": "view", "path": "/memories"}),
    _tool_use(
        2,
        {"command": "create", "path": "/memories/prefs.md", "file_text": "The user prefers tea.\n"},
    ),
    _tool_use(
        3,
        {"command": "str_replace", "path": f"/memories/{TODAY}.md", "old_str": "a", "new_str": "b"},
    ),
    _message([{"type": "text", "text": "Noted: you prefer tea."}], "end_turn"),
]


def _results(api: _ScriptedApi) -> list[dict[str, Any]]:
    out = []
    for body in api.requests[1:]:
        last = body["messages"][-1]
        out.extend(block for block in last["content"] if block["type"] == "tool_result")
    return out


def _check_run(api: _ScriptedApi, ws: Workspace) -> None:
    assert api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = _results(api)
    assert results[0]["content"].startswith("Here're the files and directories up to 2 levels deep")
    assert results[1]["content"] == "File created successfully at: /memories/prefs.md"
    assert results[1].get("is_error") in (None, False)
    assert results[2]["is_error"] is True
    assert results[2]["content"].startswith(
        f"/memories/{TODAY}.md is today's daily ledger, which is append-only"
    )
    assert (ws.root / "memory/prefs.md").read_text() == "The user prefers tea.\n"


REQUEST = {"model": "claude-test", "max_tokens": 100}
PROMPT = [{"role": "user", "content": "I prefer tea."}]


def test_the_sdk_tool_runner_runs_the_tool(ws: Workspace):
    api = _ScriptedApi(SCRIPT)
    http = httpx2.Client(transport=httpx2.MockTransport(api))
    client = anthropic.Anthropic(api_key="test", http_client=http)
    tools = [MemdirMemoryTool(ws)]
    final = client.beta.messages.tool_runner(**REQUEST, tools=tools, messages=PROMPT).until_done()
    assert final.content[0].text == "Noted: you prefer tea."
    _check_run(api, ws)


async def test_the_sdk_async_tool_runner_runs_the_async_tool(ws: Workspace):
    api = _ScriptedApi(SCRIPT)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api))
    client = anthropic.AsyncAnthropic(api_key="test", http_client=http)
    tools = [AsyncMemdirMemoryTool(ws)]
    runner = client.beta.messages.tool_runner(**REQUEST, tools=tools, messages=PROMPT)
    final = await runner.until_done()
    assert final.content[0].text == "Noted: you prefer tea."
    _check_run(api, ws)
