"""memdir inside the OpenAI Agents SDK, offline: python examples/openai_agents_memory.py [DIR].

Thirty-six turns of a clerk agent with a tool call each: MemdirSession keeps the conversation in
DIR/sessions/shop.log.jsonl and compacts it, facts go to DIR/memory/, and a second conversation
finds them with memory_search. The SDK's ScriptedModel stands in for a hosted model; swap in
any model the SDK drives (and model="openai:gpt-4o-mini" for memdir's summaries).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from memdir import Workspace
from memdir.adapters.openai_agents import (
    MemdirSession,
    memdir_function_tools,
    memdir_input_filter,
)
from memdir.compaction import CompactionConfig

set_tracing_disabled(True)


@function_tool
def stock(item: str) -> str:
    """How many of an item are in stock."""
    return f"{len(item) * 7} units of {item} in stock"


def clerk() -> Any:
    """A model that checks the stock of the item each request names, then answers."""

    def respond(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(f"Checked: {last['output']}.", item_id=f"msg_{_hex()}")]
        item = last["content"].split()[1].rstrip(".")
        return [function_call("stock", {"item": item}, call_id=f"call_{_hex()}")]

    return respond


def _hex() -> str:
    return uuid.uuid4().hex[:24]  # ids as hosted models send them: unique per call


async def main(root: str) -> None:
    ws = Workspace(root)
    session = MemdirSession(
        "shop", ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10)
    )
    respond = clerk()
    model = ScriptedModel([ModelStep(responder=respond) for _ in range(72)])
    agent = Agent(name="clerk", model=model, tools=[stock, *memdir_function_tools(ws)])
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    for turn in range(36):
        await Runner.run(
            agent,
            f"Check item-{turn}. Remember: the supplier of item-{turn} is Vendor{turn}.",
            session=session,
            run_config=config,
        )
    await session.aclose()
    window = await session.get_items()
    print(f"{len(window)} items in the window; the first is the summary:")
    print(window[0]["content"][:400], "...\n")

    def recall(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(last["output"])]
        return [
            function_call("memory_search", {"query": "supplier item-3"}, call_id=f"call_{_hex()}")
        ]

    later = ScriptedModel([ModelStep(responder=recall) for _ in range(2)])
    agent2 = Agent(name="clerk", model=later, tools=memdir_function_tools(ws))
    reply = await Runner.run(agent2, "Who supplies item-3?", session=MemdirSession("later", ws))
    print("A new conversation asks memory:\n" + reply.final_output)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()))
