"""memdir forget through its interfaces: the command (preview, --yes, a prompt), the
``memory_forget`` function, the MCP tool (served only when allowed), namespaces delete."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from _canaries import KEPT, LATIN
from memdir.mcp import create_server
from memdir.tools import call_tool, memory_add, memory_forget
from memdir.workspace import Workspace

mcp = pytest.importorskip("mcp")


def _memdir(
    ws: Workspace, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memdir", "-w", str(ws.base), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_command_previews_asks_for_yes_and_then_erases(ws: Workspace) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=ws)
    memory_add(KEPT, workspace=ws)
    refused = _memdir(ws, "forget", LATIN.lower(), stdin="")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert f"{ws.ledger_rel()}: 1 line(s)" in refused.stdout
    assert LATIN in ws.read_text(ws.ledger_rel())  # nothing removed without a yes
    done = _memdir(ws, "forget", LATIN.lower(), "--yes")
    assert done.returncode == 0 and "Erased 1" in done.stdout
    assert LATIN not in ws.read_text(ws.ledger_rel()) and KEPT in ws.read_text(ws.ledger_rel())
    absent = _memdir(ws, "forget", LATIN, "--yes")
    assert absent.returncode == 1 and "nothing to forget" in absent.stdout


def test_search_forgets_the_best_hit(ws: Workspace) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=ws)
    memory_add(KEPT, workspace=ws)
    done = _memdir(ws, "forget", "--search", "vault word", "--limit", "1", "-y")
    assert done.returncode == 0, done.stderr
    assert LATIN not in ws.read_text(ws.ledger_rel()) and KEPT in ws.read_text(ws.ledger_rel())


def test_namespaces_delete_is_confirmed(ws: Workspace) -> None:
    memory_add(KEPT, workspace=ws.namespaced("alice"))
    assert _memdir(ws, "namespaces", "delete", "alice", stdin="").returncode == 2
    assert ws.namespaces() == ["alice"]
    done = _memdir(ws, "namespaces", "delete", "alice", "--yes")
    assert done.returncode == 0 and ws.namespaces() == []
    assert not (ws.base / "ns" / "alice").exists()
    again = _memdir(ws, "namespaces", "delete", "alice", "--yes")
    assert again.returncode == 1 and "no namespace" in again.stderr


def test_the_function_previews_unless_confirmed(ws: Workspace) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=ws)
    preview = memory_forget(LATIN, workspace=ws)
    assert "confirm=true" in preview and LATIN in ws.read_text(ws.ledger_rel())
    refused = memory_forget(LATIN, "yes", workspace=ws)  # type: ignore[arg-type]
    assert refused.startswith("Error:") and LATIN in ws.read_text(ws.ledger_rel())
    assert call_tool("memory_forget", {"text": LATIN, "confirm": True}, workspace=ws).startswith(
        "Error: unknown tool"
    )  # a model cannot reach it by naming it
    assert LATIN in ws.read_text(ws.ledger_rel())
    assert "Erased" in memory_forget(LATIN, True, workspace=ws)
    assert LATIN not in ws.read_text(ws.ledger_rel())
    assert "nothing to forget" in memory_forget(LATIN, True, workspace=ws)
    assert memory_forget("ab", workspace=ws).startswith("Error:")


async def test_the_mcp_tool_is_served_only_when_allowed(ws: Workspace) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=ws)
    client_class = mcp.Client
    with anyio.fail_after(60):
        async with client_class(create_server(ws)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
        assert "memory_forget" not in names
        async with client_class(create_server(ws, allow_forget=True)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["memory_forget"].annotations.destructive_hint is True
            await client.call_tool("memory_forget", {"text": LATIN, "confirm": True})
    assert LATIN not in ws.read_text(ws.ledger_rel())
