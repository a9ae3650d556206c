"""``memdir mcp -w http://127.0.0.1:PORT`` over stdio, driven by the real ``mcp`` client, on a real
``memdir serve`` over both stores: the six tools answer from the server's memory (the same text
the client library's tools give) and memory_add writes there."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import pytest

from _server import Served, fresh_namespace
from memdir.client import MemdirClient
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.tools._core import add_memory
from memdir.workspace import Workspace

mcp = pytest.importorskip("mcp")
Client = getattr(mcp, "Client", None)
if Client is None:  # pragma: no cover - v1 SDKs have no high-level Client
    pytest.skip("these tests use the mcp v2 Client", allow_module_level=True)
from mcp.client.stdio import StdioServerParameters  # noqa: E402

TIMEOUT = 90


@pytest.fixture(params=["files", "postgres"])
def served(request: pytest.FixtureRequest, remote_servers: Any) -> Served:
    found: Served = remote_servers.get(request.param)
    return found


def text_of(result: Any) -> str:
    assert not result.is_error and len(result.content) == 1
    return str(result.content[0].text)


async def test_memdir_mcp_serves_a_server_workspace_over_stdio(served: Served) -> None:
    ns, key = fresh_namespace(), served.keys.secrets["acme_write"]
    setup = Workspace(served.server.url, namespace=ns, api_key=key)
    add_memory(setup, "Wang Lei prefers PostgreSQL 16 for billing")
    SessionLog(setup, "chat-1").append(
        [Msg.user("Where are the deploy keys?"), Msg.assistant("In the team vault.")]
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memdir", "-w", served.server.url, "-n", ns, "mcp"],
        env={
            "PYTHONPATH": os.pathsep.join(sys.path),
            "MEMDIR_API_KEY": key,
            "MEMDIR_EMBEDDER": "off",
        },
    )
    with anyio.fail_after(TIMEOUT):
        async with Client(params, read_timeout_seconds=TIMEOUT) as client:
            added = text_of(
                await client.call_tool("memory_add", {"text": "Deploys freeze on 12-20."})
            )
            found = text_of(
                await client.call_tool("memory_search", {"query": "PostgreSQL billing"})
            )
            cited = found.split("\n")[1].split(" ", 1)[0]
            got = text_of(await client.call_tool("memory_get", {"path": cited}))
            listed = text_of(await client.call_tool("session_list", {}))
            hits = text_of(await client.call_tool("session_search", {"query": "vault"}))
            history = text_of(await client.call_tool("session_history", {"session_id": "chat-1"}))
    assert "Saved" in added or "memory/" in added
    with MemdirClient(served.server.url, key) as http:
        alice = http.namespace(ns)
        assert found == alice.memory_search("PostgreSQL billing")
        assert got == alice.memory_get(cited)
        assert listed == alice.session_list()
        assert hits == alice.session_search("vault")
        assert history == alice.session_history("chat-1")
    assert "Wang Lei prefers PostgreSQL 16" in got
    assert listed.startswith("1 session") and "chat-1" in listed
    assert "sessions/chat-1.log.jsonl#L2" in hits and "In the team vault." in history
    stored = Workspace(served.workspace, namespace=ns, create=False)
    assert "Deploys freeze on 12-20." in "".join(stored.read_text(r) for _, r in stored.ledgers())
