"""memdir.adapters.openai_agents on both stores: a directory and a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from conftest import STORES_AND_SERVERS, FixedClock, sibling, store_workspace
from memdir.adapters.openai_agents import (
    MARKER_KEY,
    MemdirSession,
    memdir_function_tools,
    memdir_input_filter,
)
from memdir.compaction import CompactionConfig
from memdir.sessions import SessionLog
from memdir.workspace import Workspace
from test_adapter_openai_agents import logged_items, lookup


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


set_tracing_disabled(True)


def ledger_text(ws: Workspace) -> str:
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


async def test_add_get_pop_clear_and_a_reopen(any_ws: Workspace) -> None:
    session = MemdirSession("pc", any_ws, compaction=None, memory_flush=False)
    items = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "second"},
        {"role": "user", "content": "third"},
    ]
    await session.add_items(items)
    before = any_ws.read_bytes(session.log.rel_path)
    assert await session.pop_item() == items[2]
    after = any_ws.read_bytes(session.log.rel_path)
    assert after.startswith(before)  # nothing deleted or rewritten
    assert await session.get_items() == items[:2]
    assert await MemdirSession("pc", any_ws).get_items() == items[:2]

    await session.clear_session()
    assert await session.get_items() == []
    assert await MemdirSession("pc", any_ws).get_items() == []
    ops = [
        r.msg.metadata[MARKER_KEY]["op"]
        for r in session.log.read().records
        if MARKER_KEY in r.msg.metadata
    ]
    assert ops == ["pop", "clear"]
    assert logged_items(any_ws, "pc") == items
    assert any_ws.describe() in repr(session)


async def test_another_writer_is_seen_by_a_session_already_open(any_ws: Workspace) -> None:
    first = MemdirSession("shared", any_ws, compaction=None, memory_flush=False)
    second = MemdirSession("shared", any_ws, compaction=None, memory_flush=False)
    await first.add_items([{"role": "user", "content": "from the first"}])
    assert await second.get_items() == [{"role": "user", "content": "from the first"}]
    await second.add_items([{"role": "assistant", "content": "from the second"}])
    assert [i["content"] for i in await first.get_items()] == ["from the first", "from the second"]


async def test_a_run_that_compacts_flushes_and_evicts(any_ws: Workspace) -> None:
    big = "row,value\n" + "".join(f"{n},{n * 7}\n" for n in range(20_000))

    @function_tool
    def export() -> str:
        """Export the table."""
        return big

    turns = iter(range(1_000))

    def respond(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(f"Done: {last['output'][:40]}.")]
        turn = next(turns)
        if turn == 0:
            return [function_call("export", {}, call_id="exp")]
        return [function_call("lookup", {"key": f"shelf-{turn}"}, call_id=f"call-{turn}")]

    any_ws.write_text("MEMORY.md", "# Preferences\n- The user prefers metric units.\n")
    session = MemdirSession(
        "chat", any_ws, compaction=CompactionConfig(trigger_messages=12, keep_messages=4)
    )
    model = ScriptedModel([ModelStep(responder=respond, response_id=None) for _ in range(24)])
    agent = Agent(name="clerk", model=model, tools=[lookup, export, *memdir_function_tools(any_ws)])
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    for turn in range(12):
        await Runner.run(
            agent,
            f"Turn {turn}: check it. Remember: the codename of release {turn} is Orchid{turn}.",
            session=session,
            run_config=config,
        )
    await session.aclose()
    model.assert_complete()

    assert "prefers metric units" in (model.calls[0].system_instructions or "")
    assert session.last_compaction is not None
    window = await session.get_items()
    assert "<summary>" in window[0]["content"]
    assert await MemdirSession("chat", any_ws).get_items() == window
    assert len(logged_items(any_ws, "chat")) == 12 * 4
    evicted = [rel for rel, _ in any_ws.walk("large_tool_results")]
    assert len(evicted) == 1 and any_ws.read_text(evicted[0]) == big
    assert "Orchid0" in ledger_text(any_ws)

    # a second conversation finds what the first one said, with memdir's tools
    def search_then_answer(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(last["output"])]
        return [function_call("memory_search", {"query": "codename release 3"}, call_id="s1")]

    model2 = ScriptedModel([ModelStep(responder=search_then_answer) for _ in range(2)])
    agent2 = Agent(name="clerk", model=model2, tools=memdir_function_tools(any_ws))
    second = MemdirSession("chat-2", any_ws)
    reply = await Runner.run(agent2, "What was the codename of release 3?", session=second)
    await second.aclose()
    assert "Orchid3" in reply.final_output and "memory/" in reply.final_output


async def test_sessions_in_two_namespaces_are_apart(any_ws: Workspace) -> None:
    alice_ns, bob_ns = sibling(any_ws, "alice"), sibling(any_ws, "bob")
    alice = MemdirSession("chat", any_ws, namespace=alice_ns, compaction=None, memory_flush=False)
    bob = MemdirSession("chat", any_ws.namespaced(bob_ns), compaction=None, memory_flush=False)
    await alice.add_items([{"role": "user", "content": "alice's secret"}])
    await bob.add_items([{"role": "user", "content": "bob's note"}])
    assert await alice.get_items() == [{"role": "user", "content": "alice's secret"}]
    assert await MemdirSession("chat", any_ws.namespaced(bob_ns)).get_items() == [
        {"role": "user", "content": "bob's note"}
    ]
    assert SessionLog(any_ws, "chat").read().records == []
