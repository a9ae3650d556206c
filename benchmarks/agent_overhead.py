"""Agent-loop overhead per model call, the model itself excluded.

Usage::

    python benchmarks/agent_overhead.py                      # Markdown table on stdout
    python benchmarks/agent_overhead.py --sizes 10 100 1000 --repeats 200

A :class:`~memdir.agent.HarnessAgent` with its default hooks (tool-result eviction, workspace
context with a 16 kB ``MEMORY.md`` and an ``AGENTS.md``, compaction configured but not
triggered), the memory and file tools, and a conversation of N messages (user turns, assistant
turns, tool calls with results of 0.2-3 kB). Two things are timed, medians over ``--repeats``:

* *pre-model hooks*: what the loop does before every model call: build the request event
  (history copy, tool list) and run the hooks on it: eviction check of every tool result and
  the turn budget, system prompt with date and the budgeted files (cached by mtime/size: two
  ``stat`` calls), and the compaction check (whole-request token count, per-message cache warm).
* *whole call*: ``agent.call()`` with a model that answers instantly and no tool call: input
  event, the same hooks, two atomic fsync'd rewrites of the session state (after the input and
  after the reply) and the reply event. The session is put back to N messages between calls.
* *one state write*: one atomic rewrite of a session state of N messages (temp file, fsync,
  rename, directory fsync); it dominates the whole call and depends on the disk.

The model is a :class:`~memdir.testing.FunctionModel` returning a fixed text; background memory
work (flush, maintenance) is turned off so that only the loop is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memdir.agent import HarnessAgent, PreReasoningEvent
from memdir.compaction import CompactionConfig
from memdir.messages import Msg, ToolUseBlock
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

_WORD_TEXT = (
    "service deploy queue worker retry cache schema index latency budget release branch "
    "migration rollback config token session handler parser client server request 数据库 迁移 "
    "决定 用户 偏好 部署"
)
WORDS = _WORD_TEXT.split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def memory_md(target_bytes: int = 16_000) -> str:
    """A MEMORY.md of about ``target_bytes`` bytes: dated sections of bullets."""
    rng = random.Random(7)
    parts = ["# Memory", "", "## Pinned", "- Answer in the user's language.", ""]
    month = 1
    while len("\n".join(parts).encode()) < target_bytes:
        parts.append(f"## Project notes 2026-{month:02d}")
        for day in range(1, 13):
            parts.append(f"- 2026-{month:02d}-{day:02d}: {_text(rng, 14)}")
        parts.append("")
        month = month % 12 + 1
    return "\n".join(parts)


def conversation(n: int, seed: int = 1) -> list[Msg]:
    """``n`` messages: user, assistant with a tool call, tool result, assistant, ..."""
    rng = random.Random(seed)
    out: list[Msg] = []
    i = 0
    while len(out) < n:
        out.append(Msg.user(_text(rng, 30)))
        if len(out) < n:
            call = ToolUseBlock(id=f"c{i}", name="search_docs", input={"q": _text(rng, 4)})
            out.append(Msg.assistant(_text(rng, 20), tool_calls=[call]))
        if len(out) < n:
            out.append(
                Msg.tool_result(f"c{i}", _text(rng, rng.randint(30, 450)), name="search_docs")
            )
        if len(out) < n:
            out.append(Msg.assistant(_text(rng, 60)))
        i += 1
    return out[:n]


def search_docs(q: str) -> str:
    """Search the documentation."""
    return q


def make_agent(root: Path) -> HarnessAgent:
    ws = Workspace(root, tz="UTC")
    ws.write_text("MEMORY.md", memory_md())
    ws.write_text("AGENTS.md", "You are a careful release engineer. Keep answers short.\n")
    return HarnessAgent(
        name="Bench",
        model=FunctionModel(lambda call: "ok"),
        workspace=ws,
        tools=[search_docs],
        compaction=CompactionConfig(trigger_messages=100_000, trigger_tokens=10_000_000),
        memory_flush=False,
        maintenance=None,
    )


async def time_hooks(agent: HarnessAgent, n: int, repeats: int) -> float:
    """Median seconds of building a PreReasoningEvent and running the hooks on it."""
    base = conversation(n)
    agent._commit("bench", base)  # the benchmark sets the history directly
    hooks = agent.hooks
    samples = []
    for i in range(repeats + 5):
        start = time.perf_counter()
        event = PreReasoningEvent(
            agent=agent,
            session_id="bench",
            messages=list(agent.history("bench")),
            system=agent.system_prompt,
            tools=agent.tools,
            iteration=0,
            _commit=lambda msgs: agent._commit("bench", msgs),
        )
        for hook in hooks:
            result = hook(event)
            if asyncio.iscoroutine(result):
                await result
        elapsed = time.perf_counter() - start
        if i >= 5:  # warm-up: first render of the files, first token counts
            samples.append(elapsed)
        assert len(event.messages) == n, "a hook changed the conversation"
    return statistics.median(samples)


async def time_call(agent: HarnessAgent, n: int, repeats: int) -> float:
    """Median seconds of one ``agent.call()`` with an instant model, at ``n`` messages."""
    base = conversation(n)
    samples = []
    for i in range(repeats + 3):
        agent._commit("call", base)
        start = time.perf_counter()
        await agent.call("next question", session_id="call")
        elapsed = time.perf_counter() - start
        if i >= 3:
            samples.append(elapsed)
    return statistics.median(samples)


def time_state_write(agent: HarnessAgent, n: int, repeats: int) -> float:
    """Median seconds of one atomic, fsync'd rewrite of a session state of ``n`` messages."""
    base = conversation(n)
    samples = []
    for i in range(repeats + 3):
        start = time.perf_counter()
        agent._commit("write", list(base))
        elapsed = time.perf_counter() - start
        if i >= 3:
            samples.append(elapsed)
    return statistics.median(samples)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1_000])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        agent = make_agent(Path(tmp) / "ws")
        for n in args.sizes:
            repeats = max(20, args.repeats // max(1, n // 100))
            hooks = await time_hooks(agent, n, repeats)
            call = await time_call(agent, n, max(20, repeats // 4))
            write = time_state_write(agent, n, max(20, repeats // 4))
            rows.append((n, hooks, call, write))
    base_n, base_hooks = rows[0][0], rows[0][1]
    print(
        "| messages | pre-model hooks | per message | whole call, instant model "
        "| one state write (fsync) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n, hooks, call, write in rows:
        print(
            f"| {n:,} | {hooks * 1e3:.2f} ms | {hooks / n * 1e6:.1f} µs | {call * 1e3:.2f} ms "
            f"| {write * 1e3:.2f} ms |"
        )
    last_n, last_hooks = rows[-1][0], rows[-1][1]
    growth = (last_hooks / base_hooks) / (last_n / base_n)
    print(
        f"\nhooks growth {base_n}→{last_n} messages: ×{last_hooks / base_hooks:.1f} "
        f"for ×{last_n / base_n:.0f} messages (ratio to linear: {growth:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
