"""The Claude memory tool on both stores: a directory and a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx2
import pytest

import test_adapter_anthropic as anthropic_tests
from conftest import STORES_AND_SERVERS, FixedClock, sibling, store_workspace
from memdir import Workspace
from memdir.adapters.anthropic import AsyncMemdirMemoryTool, MemdirMemoryTool
from memdir.tools._core import close_shared_indexes
from test_adapter_anthropic import PROMPT, REQUEST, SCRIPT, TODAY, _results, _ScriptedApi, refused


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


@pytest.fixture
def ws(any_ws: Workspace) -> Workspace:
    return any_ws


@pytest.fixture
def tool(ws: Workspace) -> MemdirMemoryTool:
    yield MemdirMemoryTool(ws)
    close_shared_indexes()


# Every write is indexed at once, on either store.
test_every_write_is_searchable_at_once = anthropic_tests.test_every_write_is_searchable_at_once


def test_create_view_edit_rename_and_delete(tool: MemdirMemoryTool, any_ws: Workspace):
    assert tool.create("/memories/notes.md", "Priya owns billing.\n") == (
        "File created successfully at: /memories/notes.md"
    )
    assert refused(tool.create, "/memories/notes.md", "again") == (
        "File /memories/notes.md already exists"
    )
    assert tool.view("/memories/notes.md") == (
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\tPriya owns billing.\n     2\t"
    )
    assert "has been edited" in tool.str_replace("/memories/notes.md", "Priya", "Amara")
    tool.insert("/memories/notes.md", 1, "Deploys on Tuesdays.")
    assert any_ws.read_text("memory/notes.md") == "Amara owns billing.\nDeploys on Tuesdays.\n"

    tool.create("/memories/other.md", "kept\n")
    assert refused(tool.rename, "/memories/notes.md", "/memories/other.md") == (
        "The destination /memories/other.md already exists"
    )
    assert tool.rename("/memories/notes.md", "/memories/team.md") == (
        "Successfully renamed /memories/notes.md to /memories/team.md"
    )
    assert any_ws.stat("memory/notes.md") is None
    assert any_ws.read_text("memory/team.md") == "Amara owns billing.\nDeploys on Tuesdays.\n"
    assert any_ws.read_text("memory/other.md") == "kept\n"

    assert tool.delete("/memories/team.md") == "Successfully deleted /memories/team.md"
    assert any_ws.stat("memory/team.md") is None
    kept = [rel for rel, _ in any_ws.walk("memory/.history/deleted")]
    assert len(kept) == 1 and kept[0].split("/")[-1].startswith("team.")
    assert any_ws.read_text(kept[0]) == "Amara owns billing.\nDeploys on Tuesdays.\n"
    assert refused(tool.delete, "/memories/team.md") == "The path /memories/team.md does not exist"
    assert refused(tool.view, "/memories/team.md") == (
        "The path /memories/team.md does not exist. Please provide a valid path."
    )


def test_view_lists_the_memory_with_sizes_and_hides_memdir_state(
    tool: MemdirMemoryTool, any_ws: Workspace
):
    any_ws.write_text("MEMORY.md", "# Memory\n- a\n")
    any_ws.write_text("memory/notes.md", "x" * 1536)
    any_ws.write_text("memory/2026-11-29.md", "\n## Flush\n- b\n")
    any_ws.write_text("memory/archive/2025-01-02.md", "- old\n")
    any_ws.write_text("memory/.flush_state/s.json", "{}")
    any_ws.write_text("sessions/s.log.jsonl", "{}\n")
    lines = tool.view("/memories").split("\n")[1:]
    assert lines[1:] == [
        "14B\t/memories/2026-11-29.md",
        "13B\t/memories/MEMORY.md",
        "6B\t/memories/archive/",
        "6B\t/memories/archive/2025-01-02.md",
        "1.5K\t/memories/notes.md",
    ]
    assert lines[0] == "1.5K\t/memories"  # 14 + 13 + 6 + 1536 bytes in all
    assert tool.view("/memories/archive").split("\n")[1:] == [
        "6B\t/memories/archive",
        "6B\t/memories/archive/2025-01-02.md",
    ]
    assert "memdir's own state" in refused(tool.view, "/memories/.flush_state/s.json")


@pytest.mark.parametrize(
    "path", ["/memories/../sessions/s.log.jsonl", "/etc/passwd", "/memories/a/../../MEMORY.md"]
)
def test_paths_outside_memories_are_refused(tool: MemdirMemoryTool, any_ws: Workspace, path: str):
    any_ws.write_text("sessions/s.log.jsonl", "{}\n")
    before = sorted(rel for rel, _ in any_ws.walk(""))
    for call, args in (
        (tool.view, (path,)),
        (tool.create, (path, "x")),
        (tool.str_replace, (path, "{", "x")),
        (tool.insert, (path, 0, "x")),
        (tool.delete, (path,)),
        (tool.rename, (path, "/memories/ok.md")),
        (tool.rename, ("/memories/ok.md", path)),
    ):
        assert "/memories" in refused(call, *args)
    assert sorted(rel for rel, _ in any_ws.walk("")) == before
    assert any_ws.read_text("sessions/s.log.jsonl") == "{}\n"


def test_ledgers_stay_append_only_and_memory_md_keeps_its_versions(
    tool: MemdirMemoryTool, any_ws: Workspace
):
    any_ws.write_text("memory/2026-11-29.md", "- old fact\n")
    assert "append-only history" in refused(
        tool.str_replace, "/memories/2026-11-29.md", "old", "new"
    )
    assert any_ws.read_text("memory/2026-11-29.md") == "- old fact\n"
    tool.create(f"/memories/{TODAY}.md", "The office moved to Lyon.\n")
    added = [rel for _, rel in any_ws.ledgers() if "moved to Lyon" in any_ws.read_text(rel)]
    # today's ledger: of this workspace's clock, or on a server of the server's own day
    assert len(added) == 1 and any_ws.read_text("memory/2026-11-29.md") == "- old fact\n"
    if any_ws.remote is None:
        assert added == [f"memory/{TODAY}.md"]

    any_ws.write_text("MEMORY.md", "# Memory\n- The deploy day is Tuesday.\n")
    tool.str_replace("/memories/MEMORY.md", "Tuesday", "Thursday")
    assert any_ws.read_text("MEMORY.md") == "# Memory\n- The deploy day is Thursday.\n"
    history = [any_ws.read_text(rel) for rel, _ in any_ws.walk("memory/.history")]
    assert "# Memory\n- The deploy day is Tuesday.\n" in history
    assert "cannot be deleted" in refused(tool.delete, "/memories/MEMORY.md")


def test_two_namespaces_have_their_own_memories(any_ws: Workspace):
    alice_ns, bob_ns = sibling(any_ws, "alice"), sibling(any_ws, "bob")
    alice = MemdirMemoryTool(any_ws, namespace=alice_ns)
    bob = MemdirMemoryTool(any_ws.namespaced(bob_ns))
    alice.create("/memories/locker.md", "Alice's locker code is 4521.\n")
    assert "locker.md" not in bob.view("/memories")
    assert refused(bob.view, "/memories/locker.md").startswith("The path /memories/locker.md")
    bob.create("/memories/locker.md", "Bob has no locker.\n")
    assert any_ws.namespaced(alice_ns).read_text("memory/locker.md") == (
        "Alice's locker code is 4521.\n"
    )
    assert any_ws.namespaced(bob_ns).read_text("memory/locker.md") == "Bob has no locker.\n"
    assert any_ws.stat("memory/locker.md") is None
    close_shared_indexes()


def _check_run(api: _ScriptedApi, ws: Workspace) -> None:
    results = _results(api)
    assert results[0]["content"].startswith("Here're the files and directories up to 2 levels deep")
    assert results[1]["content"] == "File created successfully at: /memories/prefs.md"
    assert results[2]["is_error"] is True
    assert ws.read_text("memory/prefs.md") == "The user prefers tea.\n"


def test_the_sdk_tool_runner_runs_the_tool(any_ws: Workspace):
    api = _ScriptedApi(SCRIPT)
    client = anthropic.Anthropic(
        api_key="test", http_client=httpx2.Client(transport=httpx2.MockTransport(api))
    )
    runner = client.beta.messages.tool_runner(
        **REQUEST, tools=[MemdirMemoryTool(any_ws)], messages=PROMPT
    )
    assert runner.until_done().content[0].text == "Noted: you prefer tea."
    _check_run(api, any_ws)
    close_shared_indexes()


async def test_the_sdk_async_tool_runner_runs_the_async_tool(any_ws: Workspace):
    api = _ScriptedApi(SCRIPT)
    client = anthropic.AsyncAnthropic(
        api_key="test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api))
    )
    runner = client.beta.messages.tool_runner(
        **REQUEST, tools=[AsyncMemdirMemoryTool(any_ws)], messages=PROMPT
    )
    final = await runner.until_done()
    assert final.content[0].text == "Noted: you prefer tea."
    _check_run(api, any_ws)
    close_shared_indexes()
