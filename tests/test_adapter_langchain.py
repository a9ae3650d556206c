"""MemdirMiddleware in real LangChain v1 agents, driven by LangChain's own fake chat model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from memdir.adapters.langchain import LangChainChatModel, MemdirMiddleware
from memdir.compaction import CompactionConfig
from memdir.memory import MemoryConsolidator
from memdir.messages import SUMMARY_NAME
from memdir.models import ExtractiveModel
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

FACT = "Remember that Carol owns the data pipeline."
SECTIONS = ("## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS")
BIG = 100_000


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, able to take tools, recording what it was sent."""

    requests: list[list[BaseMessage]] = []  # noqa: RUF012 (pydantic field default, copied)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class FailingChat(GenericFakeChatModel):
    """A summary model that always fails."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("summary service unavailable")


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the team wiki."""
    if topic == "huge":
        return "line of output\n" * (BIG // 15)
    return f"wiki page about {topic}: owner, status, links"


def tool_turns(n: int, *, huge_at: int | None = None) -> Iterator[AIMessage]:
    for i in range(n):
        topic = "huge" if i == huge_at else f"topic{i}"
        yield AIMessage(
            "", tool_calls=[{"name": "lookup", "args": {"topic": topic}, "id": f"c{i}"}]
        )
        yield AIMessage(f"Answer {i}: {topic} is documented.")


def assert_paired(messages: list[BaseMessage]) -> None:
    """Every tool call has its result after it, every result its call before it."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            open_calls |= {c["id"] for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"orphan result {message.tool_call_id}"
            answered.add(message.tool_call_id)
    assert open_calls <= answered | {c["id"] for c in getattr(messages[-1], "tool_calls", [])}, (
        "a call lost its result"
    )


@pytest.fixture
def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": "t1"}}


def test_forty_turns_compact_offload_flush_and_remember(
    ws: Workspace, clock: Any, config: dict[str, Any]
) -> None:
    model = ScriptedChat(messages=tool_turns(40, huge_at=5), requests=[])
    middleware = MemdirMiddleware(
        ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10)
    )
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt="You are terse.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    seen: dict[str, BaseMessage] = {}
    for turn in range(40):
        clock.instant += timedelta(minutes=1)
        text = f"Turn {turn}: what does the wiki say about topic{turn}?"
        if turn == 2:
            text += " " + FACT
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        assert_paired(state["messages"])
        seen.update({m.id: m for m in state["messages"] if m.name != SUMMARY_NAME})
    assert middleware.close()
    assert len(seen) == 160  # 40 x (question, call, result, answer)

    # Compaction fired, and the state is the summary plus a tail.
    assert middleware.last_compaction is not None
    first = state["messages"][0]
    assert first.name == SUMMARY_NAME and len(state["messages"]) < 40
    assert all(section in first.text for section in SECTIONS)
    assert "sessions/t1.log.jsonl" in first.text

    # The session log holds every message of the run, word for word.
    logged = {m.id: m for m in SessionLog(ws, "t1").messages()}
    assert set(seen) <= set(logged)
    for message_id, message in seen.items():
        if isinstance(message, HumanMessage):
            assert logged[message_id].text == message.text
        if isinstance(message, ToolMessage):
            assert logged[message_id].tool_results[0].text == message.text

    # The huge result never reached the state: a preview and the file's path did.
    huge = next(m for m in seen.values() if isinstance(m, ToolMessage) and m.tool_call_id == "c5")
    assert len(huge.text) < 10_000 and "large_tool_results/t1/" in huge.text
    assert len(ws.read_text(huge.text.split("`")[1])) >= BIG - 100

    # The fact was flushed to the ledger (before the compaction that summarised it).
    ledger = ws.read_text("memory/2026-11-30.md")
    assert "Carol owns the data pipeline" in ledger

    # The system prompt kept the agent's own and gained the workspace context.
    system = model.requests[-1][0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("You are terse.") and "## Context" in system.text

    # A second run, in a new thread, remembers the first: MEMORY.md is in its prompt and
    # memory_search finds the ledger line.
    asyncio.run(MemoryConsolidator(ws, ExtractiveModel()).consolidate())
    again = ScriptedChat(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "memory_search",
                            "args": {"query": "data pipeline owner"},
                            "id": "m1",
                        }
                    ],
                ),
                AIMessage("Carol owns it."),
            ]
        ),
        requests=[],
    )
    second = create_agent(again, tools=[lookup], middleware=[MemdirMiddleware(ws)])
    answer = second.invoke(
        {"messages": [HumanMessage("Who owns the data pipeline?")]},
        {"configurable": {"thread_id": "t2"}},
    )
    assert "Carol owns the data pipeline" in again.requests[0][0].text
    found = next(m for m in answer["messages"] if isinstance(m, ToolMessage))
    assert "Carol owns the data pipeline" in found.text


def test_a_failed_summary_leaves_the_state_as_it_was(ws: Workspace, config: dict[str, Any]) -> None:
    middleware = MemdirMiddleware(
        ws,
        model=FailingChat(messages=iter([])),
        compaction=CompactionConfig(trigger_messages=6, keep_messages=2),
        memory_flush=False,
    )
    model = ScriptedChat(messages=tool_turns(5), requests=[])
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    for turn in range(5):
        state = agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    middleware.close()
    # Nothing was replaced by an error text, nothing was removed, and the run went on.
    assert len(state["messages"]) == 20
    assert [m.text for m in state["messages"] if isinstance(m, HumanMessage)] == [
        f"question {i}" for i in range(5)
    ]
    assert not any("rror" in m.text for m in state["messages"] if isinstance(m, HumanMessage))
    assert middleware.last_compaction is None
    assert len(SessionLog(ws, "t1").messages()) == 20


def test_a_langchain_model_writes_the_summary(ws: Workspace, config: dict[str, Any]) -> None:
    summary = "\n\n".join(f"{s}\n- point" for s in SECTIONS)
    summarizer = ScriptedChat(messages=iter([AIMessage(summary)] * 5), requests=[])
    middleware = MemdirMiddleware(
        ws,
        model=summarizer,
        compaction=CompactionConfig(trigger_messages=8, keep_messages=4),
        memory_flush=False,
    )
    agent = create_agent(
        ScriptedChat(messages=tool_turns(3), requests=[]),
        tools=[lookup],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    for turn in range(3):
        state = agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    middleware.close()
    assert state["messages"][0].name == SUMMARY_NAME
    assert "## SESSION INTENT\n- point" in state["messages"][0].text
    # memdir's request reached the LangChain model as plain messages.
    assert summarizer.requests and isinstance(summarizer.requests[0][-1], HumanMessage)
    assert "memdir" not in summarizer.requests[0][-1].additional_kwargs
    assert_paired(state["messages"])


def test_the_async_agent_compacts_and_flushes_too(ws: Workspace) -> None:
    middleware = MemdirMiddleware(
        ws, compaction=CompactionConfig(trigger_messages=10, keep_messages=4)
    )
    model = ScriptedChat(messages=tool_turns(6), requests=[])
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "async-1"}}

    async def run() -> list[BaseMessage]:
        for turn in range(6):
            text = f"question {turn}" + (f" {FACT}" if turn == 0 else "")
            state = await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        return list(state["messages"])

    messages = asyncio.run(run())
    assert middleware.close()
    assert messages[0].name == SUMMARY_NAME and all(s in messages[0].text for s in SECTIONS)
    assert_paired(messages)
    assert len(SessionLog(ws, "async-1").messages()) >= 24
    assert "Carol owns the data pipeline" in ws.read_text("memory/2026-11-30.md")


def test_memory_is_injected_and_a_thread_id_that_is_no_session_id_is_hashed(
    ws: Workspace,
) -> None:
    ws.write_text("MEMORY.md", "# Preferences\n- The user writes in British English.\n")
    model = ScriptedChat(messages=iter([AIMessage("Noted.")]), requests=[])
    middleware = MemdirMiddleware(ws, memory_flush=False)
    agent = create_agent(model, middleware=[middleware])
    agent.invoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "user/42 chat"}}
    )
    middleware.close()
    system = model.requests[0][0]
    assert isinstance(system, SystemMessage)
    assert "<memory_context" in system.text and "British English" in system.text
    logs = sorted(p.name for p in ws.sessions_dir.iterdir())
    assert len(logs) == 1 and logs[0].startswith("lc-") and logs[0].endswith(".log.jsonl")


def test_langchain_chat_model_reports_failures_as_model_errors() -> None:
    from memdir.errors import ModelError
    from memdir.messages import Msg

    wrapped = LangChainChatModel(FailingChat(messages=iter([])))
    with pytest.raises(ModelError, match="summary service unavailable"):
        asyncio.run(wrapped.generate([Msg.user("hi")]))
