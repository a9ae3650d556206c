"""The Claude Code hooks on both stores: a directory and a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import STORES_AND_SERVERS, FixedClock, sibling, store_workspace
from memdir import Workspace
from memdir.adapters.claude_code import handle_hook
from memdir.sessions import SessionLog
from test_adapter_claude_code import SESSION, TRANSCRIPTS, pre_compact, run_hook, session_start


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes((TRANSCRIPTS / "coupon-api.claude-code.jsonl").read_bytes())
    return path


async def test_pre_compact_ingests_once_and_session_start_brings_memory_back(
    any_ws: Workspace, transcript: Path
):
    first = await handle_hook(pre_compact(transcript), workspace=any_ws)
    assert "20 new message(s) logged" in first.note
    again = await handle_hook(pre_compact(transcript), workspace=any_ws)
    assert "nothing new" in again.note
    assert len(SessionLog(any_ws, SESSION).messages()) == 20
    assert any_ws.ledgers() and any_ws.read_text("MEMORY.md").strip()

    any_ws.write_text("MEMORY.md", "# Memory\n- The coupon API lives in lumen-shop.\n")
    outcome = await handle_hook(session_start("resume"), workspace=any_ws)
    assert outcome.output is not None
    context = outcome.output["hookSpecificOutput"]["additionalContext"]
    assert "The coupon API lives in lumen-shop." in context


async def test_a_namespace_gets_only_its_own_session(any_ws: Workspace, transcript: Path):
    alice_ns, bob_ns = sibling(any_ws, "alice"), sibling(any_ws, "bob")
    alice = any_ws.namespaced(alice_ns)
    memory_md = any_ws.read_text("MEMORY.md")  # none, or a server namespace's empty "# Memory"
    await handle_hook(pre_compact(transcript), workspace=alice)
    assert len(SessionLog(alice, SESSION).messages()) == 20
    assert SessionLog(any_ws, SESSION).messages() == []
    assert SessionLog(any_ws.namespaced(bob_ns), SESSION).messages() == []
    assert any_ws.ledgers() == [] and any_ws.read_text("MEMORY.md") == memory_md


def test_the_hook_command_runs_on_a_postgresql_workspace(pg_url: str, transcript: Path):
    result = run_hook(pg_url, pre_compact(transcript))  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    assert len(SessionLog(Workspace(pg_url), SESSION).messages()) == 20
