"""LangChain / LangGraph adapters: cost per model call, store operations, and a 40-turn run.

Usage::

    python benchmarks/adapters_langchain.py               # Markdown tables on stdout
    python benchmarks/adapters_langchain.py --repeat 60

Offline: LangChain's ``GenericFakeChatModel`` answers at once, so what is timed is LangChain's
agent loop plus memdir. Three measurements:

* *one model call at 100 messages*: ``agent.invoke`` of one question on a thread that already
  holds 100 messages (50 questions, 25 tool calls with results, answers), the model answering
  without tools. Beside it LangChain alone with its in-memory checkpointer and LangGraph's
  ``InMemoryStore``, and the same with ``MemdirMiddleware`` and ``MemdirStore``: compaction
  triggers out of reach (this is the bookkeeping every call pays); the log append and flush
  after the run are background work (they start 50 ms after the run returns, while an agent
  waits for its model) and are waited for outside the timed call. The thread is put back to
  100 messages between calls (``update_state`` with ``RemoveMessage``, untimed).
* *store operations*: ``put``, ``get``, ``search`` with a query and without, and
  ``list_namespaces`` on 1,000 items in 10 namespaces, ``MemdirStore`` (every put an fsync'd
  file and an index update) beside ``InMemoryStore`` (a dict; its query search needs an
  embedder, so it has none here).
* *40 turns*: the run of ``tests/test_adapter_langchain.py`` (a tool call per turn,
  ``CompactionConfig(trigger_messages=30, keep_messages=10)``): messages produced, kept in the
  state, offloaded (in the session log, out of the state), lost (neither; must be 0).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from memdir.adapters.langchain import MemdirMiddleware, memdir_tools
from memdir.adapters.langgraph import MemdirStore
from memdir.compaction import CompactionConfig
from memdir.messages import SUMMARY_NAME
from memdir.sessions import SessionLog
from memdir.workspace import Workspace


class Chat(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Chat:  # type: ignore[override]
        return self


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"wiki page about {topic}: owner, status, links " * 8


def history(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    i = 0
    while len(out) < n:
        out.append(HumanMessage(f"question {i} about the deploy queue and the cache", id=f"h{i}"))
        if i % 2 == 0:
            call = {"name": "lookup", "args": {"topic": f"t{i}"}, "id": f"c{i}"}
            out.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
            out.append(
                ToolMessage(lookup.invoke({"topic": f"t{i}"}), tool_call_id=f"c{i}", id=f"r{i}")
            )
        out.append(AIMessage(f"answer {i}: the queue is fine", id=f"b{i}"))
        i += 1
    return out[:n]


def answers() -> Iterator[AIMessage]:
    while True:
        yield AIMessage("fine")


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


class Hollow(AgentMiddleware[Any, Any, Any]):
    """The hooks MemdirMiddleware has, doing nothing: what LangChain charges for them."""

    def before_model(self, state: Any, runtime: Any) -> None:
        return None

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


def _agent(kind: str) -> tuple[Any, MemdirMiddleware | None]:
    ws = Workspace(tempfile.mkdtemp(prefix="bench-lc-"), tz="UTC")
    sections = "".join(f"## Topic {i}\n- fact {i} about the queue\n\n" for i in range(40))
    (ws.root / "MEMORY.md").write_text("# Memory\n\n" + sections, encoding="utf-8")
    mw = (
        MemdirMiddleware(ws, compaction=CompactionConfig(trigger_messages=1000, trigger_tokens=0))
        if kind == "memdir"
        else None
    )
    middleware: list[Any] = [mw] if mw is not None else [Hollow()] if kind == "hollow" else []
    extra_tools = memdir_tools(ws, files=True) if kind == "hollow" else []
    agent = create_agent(
        Chat(messages=answers()),
        tools=[lookup, *extra_tools],
        middleware=middleware,
        checkpointer=InMemorySaver(),
        store=MemdirStore(ws) if kind == "memdir" else InMemoryStore(),
    )
    agent.invoke({"messages": history(99)}, CONFIG)  # the thread holds 100 messages
    return agent, mw


CONFIG: Any = {"configurable": {"thread_id": "bench"}}


def per_call(repeat: int) -> list[float]:
    """Median time of one call: LangChain alone, with a hollow middleware, with memdir
    (interleaved, so that a busy machine slows all three alike)."""
    agents = [_agent("plain"), _agent("hollow"), _agent("memdir")]
    samples: list[list[float]] = [[], [], []]
    for r in range(repeat + 3):
        for which, (agent, mw) in enumerate(agents):
            if mw is not None:
                mw.drain()
            start = time.perf_counter()
            state = agent.invoke({"messages": [HumanMessage("and now?")]}, CONFIG)
            elapsed = time.perf_counter() - start
            if r >= 3:
                samples[which].append(elapsed)
            # back to 100 messages: the question and the answer go (untimed)
            extra = [RemoveMessage(id=m.id) for m in state["messages"][100:] if m.id]
            agent.update_state(CONFIG, {"messages": extra})
    for _, mw in agents:
        if mw is not None:
            mw.close()
    return [median_ms(s) for s in samples]


def store_ops(make: Callable[[], Any], repeat: int, *, query: bool) -> dict[str, float]:
    store = make()
    put = [0.0] * 0
    for i in range(1000):
        start = time.perf_counter()
        store.put(
            ("memories", f"user{i % 10}"),
            f"k{i}",
            {"content": f"note {i}: the deploy queue of service {i % 37} is slow", "n": i},
        )
        put.append(time.perf_counter() - start)
    timings: dict[str, list[float]] = {"get": [], "search": [], "list": [], "query": []}
    for r in range(repeat):
        for name, run in (
            ("get", lambda r=r: store.get(("memories", f"user{r % 10}"), f"k{r * 10 % 1000}")),
            ("search", lambda r=r: store.search(("memories", f"user{r % 10}"), limit=10)),
            ("list", lambda: store.list_namespaces()),
            ("query", lambda r=r: store.search(("memories",), query=f"service {r % 37} slow")),
        ):
            if name == "query" and not query:
                continue
            start = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - start)
    out = {"put": median_ms(put)}
    out.update({k: median_ms(v) for k, v in timings.items() if v})
    return out


def forty_turns() -> dict[str, int]:
    ws = Workspace(tempfile.mkdtemp(prefix="bench-lc40-"), tz="UTC")

    def script() -> Iterator[AIMessage]:
        for i in range(40):
            call = {"name": "lookup", "args": {"topic": f"topic{i}"}, "id": f"c{i}"}
            yield AIMessage("", tool_calls=[call])
            yield AIMessage(f"Answer {i}.")

    mw = MemdirMiddleware(ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10))
    agent = create_agent(
        Chat(messages=script()), tools=[lookup], middleware=[mw], checkpointer=InMemorySaver()
    )
    produced: set[str] = set()
    config = {"configurable": {"thread_id": "forty"}}
    for turn in range(40):
        state = agent.invoke(
            {"messages": [HumanMessage(f"Turn {turn}: look up topic{turn}")]}, config
        )
        produced |= {m.id for m in state["messages"] if m.name != SUMMARY_NAME}
    mw.close()
    kept = {m.id for m in state["messages"] if m.name != SUMMARY_NAME}
    logged = {m.id for m in SessionLog(ws, "forty").messages()}
    return {
        "produced": len(produced),
        "kept": len(kept),
        "offloaded": len((produced - kept) & logged),
        "lost": len(produced - kept - logged),
        "summaries": sum(1 for m in state["messages"] if m.name == SUMMARY_NAME),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()

    base, hollow, ours = per_call(args.repeat)
    print("| one model call, 100 messages | median |\n|---|---:|")
    print(f"| LangChain agent, `InMemorySaver` + `InMemoryStore` | {base:.2f} ms |")
    print(
        f"| + a middleware with the same hooks doing nothing, + the same tools | {hollow:.2f} ms |"
    )
    print(f"| + `MemdirMiddleware`, `MemdirStore` | {ours:.2f} ms |")
    print(
        f"| **memdir beyond LangChain's in-memory checkpointer and store** | "
        f"**{ours - base:+.2f} ms** |"
    )
    print(f"| of which LangChain's own cost of the hooks and tools | {hollow - base:+.2f} ms |")
    print(f"| of which memdir's work in the hooks | {ours - hollow:+.2f} ms |\n")

    mem = store_ops(InMemoryStore, args.repeat, query=False)
    ws = Workspace(tempfile.mkdtemp(prefix="bench-store-"), tz="UTC")
    ours_ops = store_ops(lambda: MemdirStore(ws), args.repeat, query=True)
    print("| 1,000 items, 10 namespaces | `InMemoryStore` | `MemdirStore` |\n|---|---:|---:|")
    for name, label in (
        ("put", "put"),
        ("get", "get"),
        ("search", "search (no query, 10)"),
        ("query", "search(query=...), 10 hits"),
        ("list", "list_namespaces"),
    ):
        left = f"{mem[name]:.3f} ms" if name in mem else "n/a (needs an embedder)"
        print(f"| {label} | {left} | {ours_ops[name]:.3f} ms |")
    print()
    counts = forty_turns()
    print("| 40 turns | messages |\n|---|---:|")
    for key, value in counts.items():
        print(f"| {key} | {value} |")


if __name__ == "__main__":
    main()
