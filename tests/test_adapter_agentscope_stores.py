"""memdir.adapters.agentscope on both stores: a directory and a PostgreSQL database."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent, ContextConfig
from agentscope.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    TextBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from agentscope.model import ChatResponse
from agentscope.tool import Toolkit

from conftest import STORES_AND_SERVERS, FixedClock, sibling, store_workspace
from memdir import Workspace
from memdir.adapters.agentscope import (
    MemdirMiddleware,
    MemdirOffloader,
    from_memdir,
    memdir_session_id,
)
from memdir.compaction import CompactionConfig
from memdir.sessions import SessionLog
from test_adapter_agentscope import (
    SECRET,
    ScriptedModel,
    _answer,
    _call,
    _text,
    allowed,
    first_run_reply,
    lookup,
)


@pytest.fixture(params=STORES_AND_SERVERS)
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace on each store, and in a namespace on a server over each."""
    return store_workspace(request, tmp_path, clock)


PNG = base64.b64encode(b"\x89PNG fake image").decode()


def shown(ws: Workspace, rel: str) -> str:
    return str(ws.root / rel) if ws.is_local else rel


async def test_the_offloader_logs_context_once_and_stores_data_and_results(any_ws: Workspace):
    offloader = MemdirOffloader(any_ws)
    msgs = [
        UserMsg(
            name="user",
            content=[
                TextBlock(text=f"my key is {SECRET}"),
                DataBlock(source=Base64Source(data=PNG, media_type="image/png")),
            ],
        ),
        AssistantMsg(name="Friday", content="Got it."),
    ]
    path = await offloader.offload_context("s-1", msgs)
    assert path == shown(any_ws, "sessions/s-1.log.jsonl")
    await offloader.offload_context("s-1", msgs)  # again: nothing is written twice
    log = SessionLog(any_ws, "s-1").messages()
    assert [m.role for m in log] == ["user", "assistant"]
    raw = any_ws.read_text("sessions/s-1.log.jsonl")
    assert SECRET not in raw and PNG not in raw
    image = from_memdir(log)[0].content[1]
    assert isinstance(image, DataBlock) and isinstance(image.source, URLSource)
    stored = str(image.source.url).removeprefix("workspace:///")
    assert stored.startswith("large_tool_results/data/")
    assert any_ws.read_bytes(stored) == b"\x89PNG fake image"

    result = ToolResultBlock(id="c/1", name="t", output=f"rows {SECRET} " + "x" * 10)
    same = await offloader.offload_tool_result("s-1", result)
    again = await offloader.offload_tool_result("s-1", result)
    assert same == again
    rel = any_ws.relpath(same)
    assert rel.startswith("large_tool_results/s-1/c_1-") and rel.endswith(".txt")
    text = any_ws.read_text(rel)
    assert text.endswith("x" * 10) and SECRET not in text
    assert len(list(any_ws.walk("large_tool_results/s-1"))) == 1


async def test_a_run_that_truncates_compacts_and_flushes(any_ws: Workspace):
    any_ws.write_text("MEMORY.md", "# Memory\n\n## Decisions\n- Deploys happen on Tuesdays.\n")
    memory = MemdirMiddleware(
        any_ws, compaction=CompactionConfig(trigger_messages=8, keep_messages=2), recall=False
    )
    model = ScriptedModel(first_run_reply)
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        toolkit=Toolkit(tools=[allowed(lookup), *await memory.list_tools()]),
        middlewares=[memory],
        offloader=MemdirOffloader(any_ws),
        context_config=ContextConfig(tool_result_limit=50),
    )
    for n in range(1, 7):
        await agent.reply(
            UserMsg(name="user", content=f"Remember that service-{n} runs on port {8000 + n}.")
        )
    assert "Deploys happen on Tuesdays." in str(model.wires[0][0])
    assert "## SUMMARY" in agent.state.summary
    sid = memdir_session_id(agent.state.session_id)
    texts = [
        b.text
        for m in from_memdir(SessionLog(any_ws, sid).messages())
        for b in m.content
        if isinstance(b, TextBlock)
    ]
    for n in range(1, 7):
        assert f"Remember that service-{n} runs on port {8000 + n}." in texts
    offloaded = [rel for rel, _ in any_ws.walk(f"large_tool_results/{sid}")]
    assert len(offloaded) == 6
    assert all("probe ok" in any_ws.read_text(rel) for rel in offloaded)
    ledger = "".join(any_ws.read_text(rel) for _, rel in any_ws.ledgers())
    for n in range(1, 7):
        assert ledger.count(f"service-{n} runs on port {8000 + n}.") == 1

    # A second agent recalls it at the start of its reply, and memory_search finds it.
    def second_run_reply(wire: list[dict[str, Any]]) -> ChatResponse:
        if wire[-1]["role"] == "tool":
            return _answer(_text(wire[-1]))
        return _call("search-1", "memory_search", {"query": "service-3 port"})

    recall = MemdirMiddleware(any_ws)
    model2 = ScriptedModel(second_run_reply)
    agent2 = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model2,
        toolkit=Toolkit(tools=await recall.list_tools()),
        middlewares=[recall],
    )
    answer = await agent2.reply(UserMsg(name="user", content="Which port does service-3 use?"))
    assert "service-3 runs on port 8003" in (answer.get_text_content() or "")
    recalled = [m for m in model2.wires[0] if "<memory_recall>" in _text(m)]
    assert recalled and "service-3 runs on port 8003" in _text(recalled[0])


async def test_offloads_in_two_namespaces_are_apart(any_ws: Workspace):
    alice_ns, bob_ns = sibling(any_ws, "alice"), sibling(any_ws, "bob")
    alice = MemdirOffloader(any_ws, namespace=alice_ns)
    bob = MemdirOffloader(any_ws.namespaced(bob_ns))
    await alice.offload_context("s", [UserMsg(name="user", content="alice's secret")])
    await bob.offload_context("s", [UserMsg(name="user", content="bob's note")])
    await alice.offload_tool_result("s", ToolResultBlock(id="c", name="t", output="alice rows"))
    assert [m.text for m in SessionLog(any_ws.namespaced(bob_ns), "s").messages()] == ["bob's note"]
    assert [m.text for m in alice.session_log("s").messages()] == ["alice's secret"]
    assert list(any_ws.namespaced(bob_ns).walk("large_tool_results")) == []
    assert SessionLog(any_ws, "s").messages() == []
