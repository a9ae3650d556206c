"""A LangChain v1 agent with memdir's memory, offline: a long session, then a second that remembers.

LangChain's own fake chat model stands in for an LLM (pass ``init_chat_model("openai:gpt-4o-mini")``
or any chat model instead and nothing else changes). Summaries and memory extraction use memdir's
offline extractive model here; pass ``model=`` to ``MemdirMiddleware`` to use an LLM for them.
Run: ``python examples/langchain_middleware.py``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from memdir import Workspace
from memdir.adapters.langchain import MemdirMiddleware
from memdir.compaction import CompactionConfig
from memdir.sessions import SessionLog


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, with tools bound (it ignores them and follows its script)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self


@tool
def check_service(name: str) -> str:
    """Report the health of a service."""
    return f"{name}: healthy, p99 41 ms, last deploy 2 h ago"


def script(turns: int) -> Iterator[AIMessage]:
    for i in range(turns):
        call = {"name": "check_service", "args": {"name": f"svc-{i}"}, "id": f"call-{i}"}
        yield AIMessage("", tool_calls=[call])
        yield AIMessage(f"svc-{i} is healthy.")
    yield AIMessage(
        "",
        tool_calls=[{"name": "memory_search", "args": {"query": "billing on-call"}, "id": "m1"}],
    )
    yield AIMessage("Dana is on call for billing.")


def main() -> None:
    ws = Workspace(tempfile.mkdtemp(prefix="memdir-langchain-"))
    model = ScriptedChat(messages=script(12))
    middleware = MemdirMiddleware(
        ws, compaction=CompactionConfig(trigger_messages=20, keep_messages=8)
    )
    agent = create_agent(
        model, tools=[check_service], middleware=[middleware], checkpointer=InMemorySaver()
    )

    config = {"configurable": {"thread_id": "ops-1"}}
    for i in range(12):
        text = f"Check svc-{i}."
        if i == 1:
            text += " Remember that Dana is on call for billing this week."
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
    middleware.drain()

    print(f"workspace: {ws.root}")
    print(f"messages in the state: {len(state['messages'])} (the first is the summary)")
    print(state["messages"][0].text[:400], "...\n")
    print(f"messages in sessions/ops-1.log.jsonl: {len(SessionLog(ws, 'ops-1').messages())}")
    print("ledger:", ws.read_text(ws.ledger_rel()).strip().splitlines()[-1])

    answer = agent.invoke(
        {"messages": [HumanMessage("Who is on call for billing?")]},
        {"configurable": {"thread_id": "ops-2"}},
    )
    print("\nsecond session, memory_search found:", answer["messages"][-2].text.splitlines()[-1])
    print("answer:", answer["messages"][-1].text)
    middleware.close()


if __name__ == "__main__":
    main()
