"""Every framework's conversation compacts when its model reuses tool-call ids.

Models that number their calls per answer send ``call_0`` every turn. Each adapter's converter
turns such a conversation into memdir messages that compact like any other (see
``_reused_ids.compact_reused``), and the compacted window converts back with every output
right after its own call.
"""

from __future__ import annotations

import json
from typing import Any

from agentscope.message import Msg as AsMsg
from agentscope.message import TextBlock as AsText
from agentscope.message import ToolCallBlock, ToolResultBlock
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from _reused_ids import TURNS, compact_reused
from memdir.adapters.agentscope import from_memdir, to_memdir
from memdir.adapters.langchain import from_langchain, to_langchain
from memdir.adapters.openai_agents import items_to_msgs, msgs_to_items
from memdir.adapters.pydantic_ai import messages_to_msgs, msgs_to_messages
from memdir.workspace import Workspace


async def test_openai_agents_items(ws: Workspace) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "look up every key"}]
    for k in range(TURNS):
        call = {"key": k}
        items.append(
            {
                "type": "function_call",
                "call_id": "call_0",
                "name": "lookup",
                "arguments": json.dumps(call),
            }
        )
        items.append({"type": "function_call_output", "call_id": "call_0", "output": f"v{k}"})
    items.append({"role": "assistant", "content": "all keys looked up"})
    window = msgs_to_items(await compact_reused(items_to_msgs(items), ws))
    assert window[-5:] == items[-5:]


async def test_langchain_messages(ws: Workspace) -> None:
    messages: list[Any] = [HumanMessage("look up every key")]
    for k in range(TURNS):
        messages.append(
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": k}, "id": "call_0"}])
        )
        messages.append(ToolMessage(f"v{k}", tool_call_id="call_0", name="lookup"))
    messages.append(AIMessage("all keys looked up"))
    window = to_langchain(await compact_reused(from_langchain(messages), ws))
    tail = window[-5:]
    assert [type(m) for m in tail] == [AIMessage, ToolMessage, AIMessage, ToolMessage, AIMessage]
    assert [m.content for m in tail] == [m.content for m in messages[-5:]]
    assert [c["args"] for c in tail[2].tool_calls] == [{"key": TURNS - 1}]


async def test_pydantic_ai_messages(ws: Workspace) -> None:
    messages: list[Any] = [ModelRequest(parts=[UserPromptPart("look up every key")])]
    for k in range(TURNS):
        messages.append(ModelResponse(parts=[ToolCallPart("lookup", {"key": k}, "call_0")]))
        messages.append(ModelRequest(parts=[ToolReturnPart("lookup", f"v{k}", "call_0")]))
    messages.append(ModelResponse(parts=[TextPart("all keys looked up")]))
    window = msgs_to_messages(await compact_reused(messages_to_msgs(messages), ws))
    dump = ModelMessagesTypeAdapter.dump_python
    assert dump(window[-5:], mode="json") == dump(messages[-5:], mode="json")


async def test_agentscope_messages(ws: Workspace) -> None:
    # AgentScope keeps a reply's calls and their results in the reply itself
    conversation = [AsMsg(name="user", role="user", content=[AsText(text="look up every key")])]
    for k in range(TURNS):
        conversation.append(
            AsMsg(
                name="Friday",
                role="assistant",
                content=[
                    ToolCallBlock(id="call_0", name="lookup", input=json.dumps({"key": k})),
                    ToolResultBlock(id="call_0", name="lookup", output=f"v{k}", state="success"),
                ],
            )
        )
    conversation.append(
        AsMsg(name="Friday", role="assistant", content=[AsText(text="all keys looked up")])
    )
    window = from_memdir(await compact_reused(to_memdir(conversation), ws))
    assert window[-3:] == conversation[-3:]
