"""Cost of memdir's AgentScope 2.x middleware per model call, and what it keeps over a long run.

Run: ``python benchmarks/adapters_agentscope.py [--repeat 40]``. Offline: a scripted AgentScope
chat model answers instantly (after AgentScope's own OpenAI formatter has rendered the request),
so what is timed is AgentScope's agent loop plus the middleware.

1. **Overhead per model call at 100 messages.** 100 messages (50 user turns, 50 replies with a
   tool call and its result) are in the agent's context; one ``agent.reply`` is one model call.
   Timed: the bare ``Agent`` (AgentScope's own context and compression check), the agent with
   ``MemdirMiddleware`` doing what runs before every model call (system prompt with MEMORY.md,
   the compaction check; triggers out of reach), and with the per-reply work too (recall search
   before, session-log append and fact flush after).
2. **Forty turns with a tool call each** under ``CompactionConfig(trigger_messages=30,
   keep_messages=10)``: AgentScope messages and blocks kept in the context, offloaded (in the
   session log, out of the context) and lost (neither) -- must be 0.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from pydantic import BaseModel

from memdir.adapters.agentscope import MemdirMiddleware, MemdirOffloader, from_memdir
from memdir.compaction import CompactionConfig
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

NO_COMPACTION = CompactionConfig(trigger_messages=500, keep_messages=20, trigger_tokens=0)
MEMORY_MD = "# Memory\n\n" + "\n".join(
    f"## Project {i}\n- Decision {i}: the service runs on port {8000 + i}.\n" for i in range(40)
)


class _Credential(CredentialBase):
    pass


class Scripted(ChatModelBase):
    """An AgentScope model that answers ``reply(wire)`` at once."""

    class Parameters(BaseModel):
        pass

    def __init__(self, reply: Callable[[list[dict[str, Any]]], ChatResponse]) -> None:
        super().__init__(
            credential=_Credential(), model="scripted", parameters=self.Parameters(), stream=False
        )
        self.formatter = OpenAIChatFormatter()
        self.reply = reply

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        return self.reply(await self.formatter.format(messages))


def lookup(service: str) -> str:
    """Look up a service.

    Args:
        service: the service name.
    """
    return f"{service} is healthy; " + "probe ok " * 40


def _tools() -> list[FunctionTool]:
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    return [FunctionTool(lookup, permission=allow)]


def history(n: int) -> list[Msg]:
    out: list[Msg] = []
    for i in range(n // 2):
        out.append(UserMsg(name="user", content=f"How is service-{i} doing today? " * 3))
        out.append(
            Msg(
                name="Friday",
                role="assistant",
                content=[
                    TextBlock(text=f"Checking service-{i}."),
                    ToolCallBlock(
                        id=f"h-{i}", name="lookup", input=json.dumps({"service": f"s-{i}"})
                    ),
                    ToolResultBlock(
                        id=f"h-{i}", name="lookup", output=lookup(f"s-{i}"), state="success"
                    ),
                    TextBlock(text=f"service-{i} is healthy."),
                ],
            )
        )
    return out


def answer(_: list[dict[str, Any]]) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text="All good.")], is_last=True)


async def time_reply(make: Callable[[], Agent], base: list[Msg], repeat: int) -> list[float]:
    """Milliseconds of one ``agent.reply`` (one model call) over the 100 messages."""
    agent = make()
    agent.state.session_id = "bench"
    times = []
    for i in range(repeat + 2):
        # The same 100 message objects each time, as a live context keeps them.
        agent.state.context = list(base)
        agent.state.summary = ""
        start = time.perf_counter()
        await agent.reply(UserMsg(name="user", content="Remember that the standup moved to 10:00."))
        if i >= 2:  # the first replies write the 100 messages to the session log once
            times.append((time.perf_counter() - start) * 1000)
    return times


async def time_before_call(make: Callable[[], Agent], base: list[Msg], repeat: int) -> list[float]:
    """Milliseconds of what the agent does before each model call: the compression check
    (``compress_context``, which memdir's middleware takes over) and building the request."""
    agent = make()
    agent.state.session_id = "bench"
    agent.state.context = list(base)
    times = []
    for i in range(repeat + 2):
        start = time.perf_counter()
        await agent.compress_context()
        await agent._prepare_model_input()
        if i >= 2:
            times.append((time.perf_counter() - start) * 1000)
    return times


def _row(label: str, times: list[float]) -> str:
    p90 = statistics.quantiles(times, n=10)[-1]
    return f"| {label} | {statistics.median(times):.2f} ms | {p90:.2f} ms |"


async def overhead(repeat: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="memdir-bench-as-"))
    ws = Workspace(root / "ws")
    ws.write_text("MEMORY.md", MEMORY_MD)
    base = copy.deepcopy(history(100))

    def bare() -> Agent:
        return Agent(
            name="Friday",
            system_prompt="You are Friday.",
            model=Scripted(answer),
            toolkit=Toolkit(tools=_tools()),
        )

    def with_memdir(**kw: Any) -> Callable[[], Agent]:
        def make() -> Agent:
            mw = MemdirMiddleware(ws, compaction=NO_COMPACTION, **kw)
            return Agent(
                name="Friday",
                system_prompt="You are Friday.",
                model=Scripted(answer),
                toolkit=Toolkit(tools=_tools()),
                middlewares=[mw],
                offloader=MemdirOffloader(ws),
            )

        return make

    plain_call = await time_before_call(bare, base, repeat)
    memdir_call = await time_before_call(with_memdir(), base, repeat)
    plain_reply = await time_reply(bare, base, repeat)
    memdir_reply = await time_reply(with_memdir(), base, repeat)
    log_only = await time_reply(with_memdir(recall=False, memory_flush=False), base, repeat)
    no_flush = await time_reply(with_memdir(memory_flush=False), base, repeat)
    print("| 100 messages in the context | median | p90 |")
    print("|---|---:|---:|")
    print(_row("before each model call: AgentScope alone", plain_call))
    print(_row("before each model call: with MemdirMiddleware", memdir_call))
    delta = statistics.median(memdir_call) - statistics.median(plain_call)
    print(f"| **memdir beyond AgentScope, per model call** | **{delta:+.2f} ms** | |")
    print(_row("one reply (one model call): AgentScope alone", plain_reply))
    print(_row("one reply: + session-log append only", log_only))
    print(_row("one reply: + log append and recall", no_flush))
    print(_row("one reply: + log append, recall and flush (the defaults)", memdir_reply))
    delta = statistics.median(memdir_reply) - statistics.median(plain_reply)
    print(f"| memdir beyond AgentScope, per reply | {delta:+.2f} ms | |")


async def forty_turns() -> None:
    ws = Workspace(Path(tempfile.mkdtemp(prefix="memdir-bench-as40-")) / "ws")
    seen_msgs: set[str] = set()
    seen_blocks: set[tuple[str, str, str]] = set()
    holder: dict[str, Agent] = {}

    def snapshot() -> None:
        for m in holder["agent"].state.context:
            seen_msgs.add(m.id)
            seen_blocks.update((m.id, b.type, getattr(b, "id", "")) for b in m.content)

    def reply(wire: list[dict[str, Any]]) -> ChatResponse:
        snapshot()
        if wire[-1]["role"] == "tool":
            return ChatResponse(content=[TextBlock(text="Checked.")], is_last=True)
        n = sum(1 for m in wire if m["role"] == "user")
        call = ToolCallBlock(id=f"c-{len(seen_msgs)}-{n}", name="lookup", input='{"service": "x"}')
        return ChatResponse(content=[TextBlock(text="Looking."), call], is_last=True)

    mw = MemdirMiddleware(ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10))
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=Scripted(reply),
        toolkit=Toolkit(tools=_tools()),
        middlewares=[mw],
        offloader=MemdirOffloader(ws),
    )
    holder["agent"] = agent
    for n in range(1, 41):
        await agent.reply(
            UserMsg(name="user", content=f"Remember that service-{n} is on {8000 + n}.")
        )
        snapshot()
    log = from_memdir(SessionLog(ws, agent.state.session_id).messages())
    logged_blocks = {(m.id, b.type, getattr(b, "id", "")) for m in log for b in m.content}
    kept_blocks = {
        (m.id, b.type, getattr(b, "id", "")) for m in agent.state.context for b in m.content
    }
    kept_msgs = {m.id for m in agent.state.context}
    offloaded = {b for b in seen_blocks if b in logged_blocks and b not in kept_blocks}
    lost = {b for b in seen_blocks if b not in logged_blocks and b not in kept_blocks}
    print(
        f"\n40 turns: {len(seen_msgs)} AgentScope messages, {len(seen_blocks)} blocks; "
        f"kept in the context {len(kept_msgs)} messages / {len(kept_blocks)} blocks "
        f"(+ the summary); offloaded {len(offloaded)} blocks; lost {len(lost)}; "
        f"summary {'has' if '## NEXT STEPS' in agent.state.summary else 'lacks'} its four sections"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(overhead(args.repeat))
    asyncio.run(forty_turns())


if __name__ == "__main__":
    main()
