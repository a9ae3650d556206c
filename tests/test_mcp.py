"""The MCP server: the same tools and schemas, in memory and as a ``memdir mcp`` subprocess."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import memdir
from memdir.mcp import create_server
from memdir.tools import TOOL_DESCRIPTIONS, TOOL_SCHEMAS, memory_get, memory_search
from memdir.tools._core import close_shared_indexes
from memdir.workspace import Workspace

mcp = pytest.importorskip("mcp")
Client = getattr(mcp, "Client", None)
if Client is None:  # pragma: no cover - v1 SDKs have no high-level Client
    pytest.skip("these tests use the mcp v2 Client", allow_module_level=True)
from mcp.client.stdio import StdioServerParameters  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"
TIMEOUT = 60
SESSION_TOOLS = ("session_search", "session_list", "session_history")
WHY_TOOLS = ("memory_why",)  # provenance: where a bullet came from


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


@pytest.fixture
def sample(ws: Workspace) -> Workspace:
    shutil.copytree(SAMPLE, ws.root, dirs_exist_ok=True)
    return ws


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


async def test_in_memory_client_sees_the_tools_and_their_schemas(sample: Workspace) -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(create_server(sample)) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == {"memory_search", "memory_get", "memory_add", *SESSION_TOOLS, *WHY_TOOLS}
    for name, tool in listed.items():
        assert tool.description == TOOL_DESCRIPTIONS[name]
        ours = TOOL_SCHEMAS[name]
        theirs = tool.input_schema
        assert theirs["type"] == "object"
        assert sorted(theirs.get("required", [])) == sorted(ours["required"])
        assert list(theirs["properties"]) == list(ours["properties"])
        for arg, spec in ours["properties"].items():
            for key in ("type", "description", "default", "minimum", "maximum"):
                assert theirs["properties"][arg].get(key) == spec.get(key), (name, arg, key)
    assert listed["memory_search"].annotations.read_only_hint is True
    assert listed["memory_add"].annotations.read_only_hint is False


async def test_in_memory_calls_return_what_the_functions_return(sample: Workspace) -> None:
    # Before the add below: a new file changes the corpus statistics and so the scores.
    expected_search = memory_search("数据库迁移", 3, workspace=sample)
    expected_get = memory_get("MEMORY.md#L18-L19", workspace=sample)
    with anyio.fail_after(TIMEOUT):
        async with Client(create_server(sample)) as client:
            found = await client.call_tool(
                "memory_search", {"query": "数据库迁移", "max_results": 3}
            )
            read = await client.call_tool("memory_get", {"path": "MEMORY.md#L18-L19"})
            added = await client.call_tool("memory_add", {"text": "Tom's daughter is called Mila"})
            again = await client.call_tool("memory_search", {"query": "Mila"})
            refused = await client.call_tool("memory_get", {"path": "sessions/x.log.jsonl"})
            invalid = await client.call_tool("memory_search", {"query": "x", "max_results": "many"})
    assert not found.is_error
    assert text_of(found) == expected_search
    assert text_of(read) == expected_get
    assert text_of(added) == "Saved 1 bullet to memory/2026-11-30.md#L3-L3."
    assert "memory/2026-11-30.md#L3-L3" in text_of(again)
    assert refused.is_error
    assert "sessions/x.log.jsonl is not a memory file" in text_of(refused)
    assert invalid.is_error


async def test_bad_arguments_get_the_plain_tools_one_line_errors(sample: Workspace) -> None:
    calls = [
        ("memory_get", {"path": "MEMORY.md", "start_line": 0}, "start_line must be at least 1"),
        ("memory_search", {"query": "x", "max_results": 0}, "max_results must be at least 1"),
        ("memory_search", {"query": "x", "max_results": "many"}, "max_results must be an int"),
        ("memory_search", {"query": 123}, "query must be a string"),
    ]
    with anyio.fail_after(TIMEOUT):
        async with Client(create_server(sample)) as client:
            results = [await client.call_tool(name, args) for name, args, _ in calls]
            clamped = await client.call_tool("memory_search", {"query": "x", "max_results": 500})
            version = client.server_info.version
    for (_, _, message), result in zip(calls, results, strict=True):
        assert result.is_error
        assert message in text_of(result) and "\n" not in text_of(result), text_of(result)
    assert not clamped.is_error
    assert text_of(clamped) == memory_search("x", 50, workspace=sample)
    assert version == memdir.__version__


async def test_missing_arguments_get_one_line_errors(sample: Workspace) -> None:
    calls = [
        ("memory_get", {"start_line": 2}, "path is required"),
        ("memory_search", {"max_results": 3}, "query is required"),
        ("memory_add", {}, "text is required"),
    ]
    with anyio.fail_after(TIMEOUT):
        async with Client(create_server(sample)) as client:
            results = [await client.call_tool(name, args) for name, args, _ in calls]
    for (_, _, message), result in zip(calls, results, strict=True):
        assert result.is_error
        assert message in text_of(result) and "\n" not in text_of(result), text_of(result)
    assert not (sample.root / "memory" / "2026-11-30.md").exists()


async def test_read_only_server_has_no_add(sample: Workspace) -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(create_server(sample, read_only=True)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
    assert names == {"memory_search", "memory_get", *SESSION_TOOLS, *WHY_TOOLS}


async def test_each_call_uses_the_workspace_its_resolver_gives(ws: Workspace) -> None:
    # a server for many tenants binds every call to its caller's namespace
    alice, bob = ws.namespaced("alice"), ws.namespaced("bob")
    alice.init()
    bob.init()
    asked: list[tuple[str | None, bool]] = []
    current: list[Workspace] = [alice]

    def resolve(write: bool) -> Workspace:
        if current[0] is bob and write:
            raise memdir.ConfigError("this key may only read")
        asked.append((current[0].namespace, write))
        return current[0]

    with anyio.fail_after(TIMEOUT):
        async with Client(create_server(resolve=resolve)) as client:
            await client.call_tool("memory_add", {"text": "alice keeps the otter notes"})
            current[0] = bob
            refused = await client.call_tool("memory_add", {"text": "bob writes"})
            found = await client.call_tool("memory_search", {"query": "otter notes"})
            current[0] = alice
            mine = await client.call_tool("memory_search", {"query": "otter notes"})
    assert refused.is_error and "this key may only read" in text_of(refused)
    assert text_of(found).startswith("No memories matched")
    assert "alice keeps the otter notes" in text_of(mine)
    assert asked == [("alice", True), ("bob", False), ("alice", False)]
    assert "bob writes" not in bob.read_text(bob.ledger_rel())


async def test_memdir_mcp_over_stdio(sample: Workspace) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memdir", "-w", str(sample.root), "mcp"],
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    with anyio.fail_after(TIMEOUT):
        async with Client(params, read_timeout_seconds=TIMEOUT) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            found = await client.call_tool("memory_search", {"query": "Moganshan offsite"})
    assert names == {"memory_search", "memory_get", "memory_add", *SESSION_TOOLS, *WHY_TOOLS}
    assert not found.is_error
    assert text_of(found).startswith('2 results for "Moganshan offsite"')
    assert "memory/2026-11-24.md#L2-L2" in text_of(found)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"transport": "sse"}, "unknown MCP transport"),
        ({"transport": "http", "port": 0}, "port must be"),
        ({"transport": "http", "port": "8000"}, "port must be"),
        ({"workspace": 123}, "workspace path must be"),
    ],
)
def test_bad_server_arguments_are_one_line_errors(kw: dict[str, Any], message: str) -> None:
    from memdir.errors import MemdirError
    from memdir.mcp import serve

    with pytest.raises(MemdirError, match=message):
        serve(**kw)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_http_without_keys_refuses_to_listen_beyond_loopback(tmp_path: Path, host: str) -> None:
    """``memdir mcp --transport http`` has no authentication: only ``memdir serve`` (keys per
    tenant) may listen where other hosts reach it."""
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "memdir", "-w", str(tmp_path / "ws"), "init"],
        capture_output=True,
        check=True,
    )
    done = subprocess.run(
        [sys.executable, "-m", "memdir", "-w", str(tmp_path / "ws"), "mcp", "--transport",
         "http", "--host", host, "--port", "8765"],
        capture_output=True,
        text=True,
        timeout=120,  # without the refusal it would serve until killed
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"not {host}: to serve MCP to other hosts, run memdir serve" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
