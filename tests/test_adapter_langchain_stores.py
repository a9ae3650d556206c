"""memdir.adapters.langchain on both stores: a directory and a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from conftest import STORES_AND_SERVERS, FixedClock, sibling, store_workspace
from memdir.adapters.langchain import MemdirMiddleware
from memdir.compaction import CompactionConfig
from memdir.messages import SUMMARY_NAME
from memdir.sessions import SessionLog
from memdir.workspace import Workspace
from test_adapter_langchain import (
    BIG,
    FACT,
    SECTIONS,
    ScriptedChat,
    assert_paired,
    lookup,
    tool_turns,
)


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


def ledger_text(ws: Workspace) -> str:
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


def test_a_run_that_injects_compacts_offloads_and_flushes(any_ws: Workspace) -> None:
    any_ws.write_text("MEMORY.md", "# Preferences\n- The user writes in British English.\n")
    model = ScriptedChat(messages=tool_turns(8, huge_at=1), requests=[])
    middleware = MemdirMiddleware(
        any_ws, compaction=CompactionConfig(trigger_messages=12, keep_messages=4)
    )
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t1"}}
    seen = {}
    for turn in range(8):
        text = f"Turn {turn}: topic{turn}?" + (f" {FACT}" if turn == 0 else "")
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        assert_paired(state["messages"])
        seen.update({m.id: m for m in state["messages"] if m.name != SUMMARY_NAME})
    assert middleware.close()

    system = model.requests[0][0]
    assert isinstance(system, SystemMessage) and "British English" in system.text
    first = state["messages"][0]
    assert first.name == SUMMARY_NAME and all(s in first.text for s in SECTIONS)
    assert set(seen) <= {m.id for m in SessionLog(any_ws, "t1").messages()}
    huge = next(m for m in seen.values() if isinstance(m, ToolMessage) and m.tool_call_id == "c1")
    assert "large_tool_results/t1/" in huge.text
    assert len(any_ws.read_text(huge.text.split("`")[1])) >= BIG - 100
    assert "Carol owns the data pipeline" in ledger_text(any_ws)

    # a second thread finds it with memory_search
    call = {"name": "memory_search", "args": {"query": "data pipeline owner"}, "id": "m1"}
    again = ScriptedChat(
        messages=iter([AIMessage("", tool_calls=[call]), AIMessage("Carol owns it.")]),
        requests=[],
    )
    second = create_agent(again, tools=[lookup], middleware=[MemdirMiddleware(any_ws)])
    answer = second.invoke(
        {"messages": [HumanMessage("Who owns the data pipeline?")]},
        {"configurable": {"thread_id": "t2"}},
    )
    found = next(m for m in answer["messages"] if isinstance(m, ToolMessage))
    assert "Carol owns the data pipeline" in found.text


def test_two_namespaces_keep_their_memory_apart(any_ws: Workspace) -> None:
    alice_ns, bob_ns = sibling(any_ws, "alice"), sibling(any_ws, "bob")
    alice, bob = any_ws.namespaced(alice_ns), any_ws.namespaced(bob_ns)
    alice.write_text("MEMORY.md", "# Memory\n- Alice's locker code is 4521.\n")
    prompts = []
    for ws in (alice, bob):
        model = ScriptedChat(messages=iter([AIMessage("Noted.")]), requests=[])
        middleware = MemdirMiddleware(any_ws, namespace=ws.namespace)
        create_agent(model, middleware=[middleware]).invoke(
            {"messages": [HumanMessage(FACT)]}, {"configurable": {"thread_id": "t"}}
        )
        assert middleware.close()
        prompts.append(model.requests[0][0].text)
    assert "4521" in prompts[0] and "4521" not in prompts[1]
    assert [m.text for m in SessionLog(bob, "t").messages()] == [FACT, "Noted."]
    assert SessionLog(any_ws, "t").messages() == []
    assert "Carol" in ledger_text(bob) and ledger_text(any_ws) == ""
