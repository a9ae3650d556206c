"""Cost of memdir's OpenAI Agents SDK and Pydantic AI adapters per model call, and what they keep.

Run: ``python benchmarks/adapters_openai_agents.py [--repeat 30]``. Offline: the SDK's
``ScriptedModel`` and Pydantic AI's ``FunctionModel`` answer instantly, so what is timed is the
framework plus the session/capability.

1. **Overhead per model call at 100 messages.** A conversation of 100 items is in the session;
   one ``Runner.run`` turn is one model call (read the session, filter, call, save). The same
   turn is timed with the SDK's ``SQLiteSession`` (a file, like memdir's log), with
   ``MemdirSession`` + ``memdir_input_filter``, and with no session; for Pydantic AI, a run with
   a 100-message ``message_history`` with and without ``MemdirCompaction``. Compaction
   triggers are out of reach (memdir's defaults: 50 messages would compact, so 500 is set) and
   the background flush is off, so the numbers are the per-call bookkeeping.
2. **Forty turns with tool calls** (each: user, call, output, answer) under
   ``CompactionConfig(trigger_messages=30, keep_messages=10)``: messages kept in the window,
   offloaded (in the session log and out of the window), and lost (neither) -- must be 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memdir.adapters.openai_agents import (
    ITEM_KEY,
    MemdirSession,
    memdir_input_filter,
    msg_to_items,
)
from memdir.adapters.pydantic_ai import MemdirCompaction
from memdir.compaction import CompactionConfig
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

set_tracing_disabled(True)
NO_COMPACTION = CompactionConfig(trigger_messages=500, keep_messages=20, trigger_tokens=0)


@function_tool
def lookup(key: str) -> str:
    """Look up a key."""
    return f"{key} has 42 units"


def history(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n // 2):
        out.append({"role": "user", "content": f"Question {i} about the shelf inventory? " * 3})
        out.append({"role": "assistant", "content": f"Answer {i}: shelf {i} holds 42 units. " * 3})
    return out


async def time_sdk_turns(make_session: Any, repeat: int, with_filter: bool) -> list[float]:
    times = []
    for _ in range(repeat):
        session = make_session()
        if session is not None:
            await session.add_items(history(100))
        model = ScriptedModel([[assistant_message("ok")]])
        agent = Agent(name="a", model=model)
        config = (
            RunConfig(call_model_input_filter=memdir_input_filter(session=session))
            if with_filter
            else RunConfig()
        )
        start = time.perf_counter()
        await Runner.run(agent, "one more question", session=session, run_config=config)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def time_pydantic_turns(with_memdir: bool, repeat: int, root: Path) -> list[float]:
    past: list[ModelMessage] = []
    for i in range(50):
        past.append(ModelRequest(parts=[UserPromptPart(f"Question {i} about the shelf? " * 3)]))
        past.append(ModelResponse(parts=[TextPart(f"Answer {i}: 42 units. " * 3)]))

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    times = []
    for n in range(repeat):
        caps = (
            [
                MemdirCompaction(
                    Workspace(root / f"pa{n}"),
                    compaction=NO_COMPACTION,
                    memory_flush=False,
                    memory_tools=False,
                )
            ]
            if with_memdir
            else []
        )
        agent = PydanticAgent(FunctionModel(answer), capabilities=caps)
        if with_memdir:  # the first request writes the 100 messages to the log; time the next
            await agent.run("warm up", message_history=past)
        start = time.perf_counter()
        await agent.run("one more question", message_history=past)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def forty_turns(root: Path) -> dict[str, int]:
    ws = Workspace(root / "forty")
    session = MemdirSession(
        "forty", ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10)
    )
    added: list[Any] = []
    original = session.add_items

    async def recording(items: list[Any]) -> None:
        added.extend(json.loads(json.dumps(items)))
        await original(items)

    session.add_items = recording  # type: ignore[method-assign]

    turns = iter(range(1_000))

    def respond(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(f"Done: {last['output']}", item_id=f"m{len(added)}")]
        n = next(turns)
        return [function_call("lookup", {"key": f"k{n}"}, call_id=f"c{n}")]

    model = ScriptedModel([ModelStep(responder=respond, response_id=None) for _ in range(80)])
    agent = Agent(name="a", model=model, tools=[lookup])
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    for turn in range(40):
        await Runner.run(agent, f"Turn {turn}: check k{turn}", session=session, run_config=config)
    await session.aclose()
    window = await session.get_items()
    records = [r.msg for r in SessionLog(ws, "forty").read().records]
    logged = [i for m in records if ITEM_KEY in m.metadata for i in msg_to_items(m)]
    lost = sum(1 for item in added if item not in logged)
    in_window = sum(1 for item in window if item in added)
    return {
        "added": len(added),
        "kept": in_window,
        "offloaded": len(added) - in_window - lost,
        "lost": lost,
        "window_items": len(window),
    }


def summary(name: str, times: list[float]) -> str:
    p90 = sorted(times)[int(len(times) * 0.9)]
    return f"{name:<52} median {statistics.median(times):6.2f} ms   p90 {p90:6.2f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        counter = iter(range(10_000))
        sqlite = await time_sdk_turns(
            lambda: SQLiteSession("s", str(root / f"s{next(counter)}.db")), repeat, False
        )
        memdir = await time_sdk_turns(
            lambda: MemdirSession(
                "s",
                Workspace(root / f"m{next(counter)}"),
                compaction=NO_COMPACTION,
                memory_flush=False,
            ),
            repeat,
            True,
        )
        bare = await time_sdk_turns(lambda: None, repeat, False)
        pa_bare = await time_pydantic_turns(False, repeat, root)
        pa_memdir = await time_pydantic_turns(True, repeat, root)
        print("One model call with 100 messages of history (instant model):")
        print(summary("openai-agents, no session", bare))
        print(summary("openai-agents, SQLiteSession (file)", sqlite))
        print(summary("openai-agents, MemdirSession + memdir_input_filter", memdir))
        extra = statistics.median(memdir) - statistics.median(sqlite)
        print(f"  memdir beyond SQLiteSession: {extra:+.2f} ms")
        print(summary("pydantic-ai, message_history only", pa_bare))
        print(summary("pydantic-ai, + MemdirCompaction", pa_memdir))
        extra = statistics.median(pa_memdir) - statistics.median(pa_bare)
        print(f"  memdir beyond the bare run: {extra:+.2f} ms")
        counts = await forty_turns(root)
        print("Forty turns with a tool call each (openai-agents):", counts)


if __name__ == "__main__":
    asyncio.run(main())
