"""An AgentScope 2.x agent with memdir's memory, offline: two sessions, the second remembers.

A scripted AgentScope chat model stands in for an LLM (swap in ``OpenAIChatModel`` or any other
and nothing else changes). Run: ``python examples/agentscope_memory.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from typing import Any

from agentscope.agent import Agent
from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.tool import Toolkit
from pydantic import BaseModel

from memdir import Workspace
from memdir.adapters.agentscope import MemdirMiddleware, MemdirOffloader
from memdir.compaction import CompactionConfig


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [])


class _Credential(CredentialBase):
    pass


class ScriptedModel(ChatModelBase):
    """Answers from the request: searches memory when asked a question, else acknowledges."""

    class Parameters(BaseModel):
        pass

    def __init__(self) -> None:
        super().__init__(
            credential=_Credential(), model="scripted", parameters=self.Parameters(), stream=False
        )
        self.formatter = OpenAIChatFormatter()

    async def _call_api(
        self,
        model_name: str,
        messages: Any,
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        wire = [(m["role"], _text(m)) for m in await self.formatter.format(messages)]
        role, text = wire[-1]
        if role == "tool":
            found = re.search(r"staging database is ([\w-]+)", text)
            reply = f"The staging database is {found.group(1)}." if found else "I don't know."
            return ChatResponse(content=[TextBlock(text=reply)], is_last=True)
        said = [t for r, t in wire if r == "user" and not t.startswith("<")]
        if "?" in said[-1]:  # hints (recalled memory, reminders) start with <
            call = ToolCallBlock(
                id="search-1", name="memory_search", input=json.dumps({"query": "staging database"})
            )
            return ChatResponse(content=[call], is_last=True)
        return ChatResponse(content=[TextBlock(text="Noted.")], is_last=True)


async def session(ws: Workspace, text: str) -> str:
    memory = MemdirMiddleware(ws, compaction=CompactionConfig(trigger_messages=30))
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=ScriptedModel(),
        toolkit=Toolkit(tools=await memory.list_tools()),
        middlewares=[memory],
        offloader=MemdirOffloader(ws),
    )
    reply = await agent.reply(UserMsg(name="user", content=text))
    return reply.get_text_content() or ""


async def main() -> None:
    ws = Workspace(tempfile.mkdtemp(prefix="memdir-agentscope-"))
    print("session 1:", await session(ws, "Remember that the staging database is db-7."))
    print("ledger:", *(p.read_text().strip() for p in sorted(ws.memory_dir.glob("*.md"))))
    print("session 2:", await session(ws, "Which database is staging?"))


asyncio.run(main())
