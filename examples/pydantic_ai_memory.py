"""memdir inside Pydantic AI, offline: python examples/pydantic_ai_memory.py [DIR].

Thirty-six runs of an agent with MemdirCompaction: its history is compacted the memdir way
(flushed to DIR/memory/ and logged to DIR/sessions/shop.log.jsonl first), and a new agent run
finds the facts with memory_search. FunctionModel stands in for a hosted model.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memdir import Workspace
from memdir.adapters.pydantic_ai import MemdirCompaction
from memdir.compaction import CompactionConfig

calls = iter(range(1_000))


def clerk(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"Checked: {returns[0].content}.")])
    n = next(calls)
    return ModelResponse(parts=[ToolCallPart("stock", {"item": f"item-{n}"}, tool_call_id=f"c{n}")])


def recall(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(str(returns[0].content))])
    query = {"query": "supplier item-3"}
    return ModelResponse(parts=[ToolCallPart("memory_search", query, tool_call_id="s1")])


async def main(root: str) -> None:
    ws = Workspace(root)
    memdir = MemdirCompaction(
        ws, session_id="shop", compaction=CompactionConfig(trigger_messages=30, keep_messages=10)
    )
    agent: Agent[None, str] = Agent(FunctionModel(clerk), capabilities=[memdir])

    @agent.tool_plain
    def stock(item: str) -> str:
        """How many of an item are in stock."""
        return f"{len(item) * 7} units of {item} in stock"

    history: list[ModelMessage] = []
    for turn in range(36):
        result = await agent.run(
            f"Check item-{turn}. Remember: the supplier of item-{turn} is Vendor{turn}.",
            message_history=history,
        )
        history = result.all_messages()
    await memdir.aclose()
    print(f"{len(history)} messages in the history; it starts with the summary:")
    print(str(history[0].parts[0].content)[:400], "...\n")  # type: ignore[union-attr]

    later = Agent(FunctionModel(recall), capabilities=[MemdirCompaction(ws, session_id="later")])
    reply = await later.run("Who supplies item-3?")
    print("A new conversation asks memory:\n" + reply.output)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()))
