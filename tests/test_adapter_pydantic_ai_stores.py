"""memdir.adapters.pydantic_ai on both stores: a directory and a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from conftest import STORES_AND_SERVERS, FixedClock, sibling, store_workspace
from memdir.adapters.pydantic_ai import MESSAGE_KEY, MemdirCompaction
from memdir.compaction import CompactionConfig
from memdir.sessions import SessionLog
from memdir.workspace import Workspace
from test_adapter_pydantic_ai import lookup_then_answer, make_agent, pairing_ok


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


def ledger_text(ws: Workspace) -> str:
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


async def test_a_run_that_injects_compacts_evicts_and_flushes(any_ws: Workspace) -> None:
    any_ws.write_text("MEMORY.md", "# Preferences\n- The user prefers metric units.\n")
    any_ws.write_text("AGENTS.md", "Answer in French.\n")
    memdir = MemdirCompaction(
        any_ws,
        session_id="chat",
        compaction=CompactionConfig(trigger_messages=12, keep_messages=4),
    )
    seen: list[list[ModelMessage]] = []
    instructions: list[str] = []
    respond = lookup_then_answer(seen)

    def recording(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        instructions.append(info.instructions or "")
        return respond(messages, info)

    agent = make_agent(memdir, recording)
    history: list[ModelMessage] = []
    for turn in range(10):
        result = await agent.run(
            f"Turn {turn}. Remember: the codename of release {turn} is Orchid{turn}.",
            message_history=history,
        )
        history = result.all_messages()
    await memdir.aclose()

    assert "prefers metric units" in instructions[0] and "Answer in French." in instructions[0]
    assert memdir.last_compaction is not None
    assert "<summary>" in str(history[0].parts[0].content)  # type: ignore[union-attr]
    assert all(pairing_ok(messages) for messages in seen)
    logged = [r.msg for r in SessionLog(any_ws, "chat").read().records]
    assert sum(1 for m in logged if MESSAGE_KEY in m.metadata) >= 10 * 4 - 1
    ledger = ledger_text(any_ws)
    assert "Orchid0" in ledger and "Orchid9" in ledger

    # a new conversation finds what the first one said, through memdir's memory tools
    def search(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(str(returns[0].content))])
        query = {"query": "codename release 3"}
        return ModelResponse(parts=[ToolCallPart("memory_search", query, tool_call_id="s")])

    fresh = MemdirCompaction(any_ws, session_id="chat-2")
    reply = await Agent(FunctionModel(search), capabilities=[fresh]).run("Codename of release 3?")
    await fresh.aclose()
    assert "Orchid3" in reply.output and "memory/" in reply.output


async def test_a_big_return_is_evicted_to_the_store(any_ws: Workspace) -> None:
    big = "row,value\n" + "".join(f"{n},{n * 7}\n" for n in range(20_000))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("exported")])
        return ModelResponse(parts=[ToolCallPart("export", {}, tool_call_id="exp")])

    memdir = MemdirCompaction(any_ws, session_id="big", memory_flush=False)
    agent: Agent[None, str] = Agent(FunctionModel(respond), capabilities=[memdir])

    @agent.tool_plain
    def export() -> str:
        """Export the table."""
        return big

    result = await agent.run("Export it")
    kept = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert "large_tool_results/" in str(kept[0].content)
    files = [rel for rel, _ in any_ws.walk("large_tool_results")]
    assert len(files) == 1 and any_ws.read_text(files[0]) == big


async def test_two_namespaces_keep_their_memory_apart(any_ws: Workspace) -> None:
    alice_ns, bob_ns = sibling(any_ws, "alice"), sibling(any_ws, "bob")
    alice, bob = any_ws.namespaced(alice_ns), any_ws.namespaced(bob_ns)
    alice.write_text("MEMORY.md", "# Memory\n- Alice's locker code is 4521.\n")
    seen: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.instructions or "")
        return ModelResponse(parts=[TextPart("Noted: the office moved to Lyon.")])

    for ws in (alice, bob):
        memdir = MemdirCompaction(any_ws, namespace=ws.namespace, session_id="s")
        await Agent(FunctionModel(answer), capabilities=[memdir]).run(
            "Remember: the office moved to Lyon."
        )
        await memdir.aclose()
    assert "4521" in seen[0] and "4521" not in seen[1]
    for ws in (alice, bob):  # the prompt and the answer, in the namespace's own log
        logged = [r.msg for r in SessionLog(ws, "s").read().records]
        assert [m.role for m in logged] == ["user", "assistant"]
        assert logged[1].text == "Noted: the office moved to Lyon."
    assert SessionLog(any_ws, "s").read().records == []
    assert "Lyon" in ledger_text(bob) and ledger_text(any_ws) == ""
