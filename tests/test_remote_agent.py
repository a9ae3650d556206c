"""``HarnessAgent(workspace="http://127.0.0.1:PORT")`` with a scripted model, on a real ``memdir
serve`` over both stores: MEMORY.md is injected from the server, the memory tools search and
add there, compaction offloads into the server's session log, and flushes reach the server,
which extracts with its own model (the agent's model never sees a flush); no maintenance
thread runs here."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from _server import Served, fresh_namespace, wait_for
from memdir.agent import HarnessAgent
from memdir.compaction import CompactionConfig
from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock
from memdir.testing import FunctionModel, ModelCall
from memdir.tools._core import add_memory
from memdir.workspace import Workspace

SUMMARY = (
    "## SESSION INTENT\nPlan the release.\n## SUMMARY\nWe talked about databases.\n"
    "## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
)
DETAILS = " Details: " + "the plan has several steps to check. " * 20


@pytest.fixture(params=["files", "postgres"])
def served(request: pytest.FixtureRequest, remote_servers: Any) -> Served:
    found: Served = remote_servers.get(request.param)
    return found


def _call(call_id: str, name: str, **args: Any) -> Msg:
    return Msg.assistant(tool_calls=[ToolUseBlock(id=call_id, name=name, input=args)])


def _script(calls: list[ModelCall]) -> FunctionModel:
    def answer(call: ModelCall) -> Msg | str:
        calls.append(call)
        if call.task == "summarize":
            return SUMMARY
        last = call.messages[-1]
        if last.role == "user":
            if "Which database" in last.text:
                return _call("s1", "memory_search", query="Wang Lei database")
            if "deploy window" in last.text:
                return _call("a1", "memory_add", text="The deploy window is Friday 18:00.")
            return f"noted: {last.text}{DETAILS}"
        result = last.tool_results[0]
        if result.name == "memory_search":
            return "PostgreSQL 16." if "PostgreSQL 16" in result.text else "I do not know."
        return "Saved."

    return FunctionModel(answer)


async def test_an_agent_keeps_its_memory_on_the_server(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = fresh_namespace()
    monkeypatch.setenv("MEMDIR_API_KEY", served.keys.secrets["acme_write"])
    before = Workspace(served.server.url, namespace=ns)
    before.write_text("MEMORY.md", "# Memory\n- The team ships on Thursdays.\n")
    add_memory(before, "Wang Lei prefers PostgreSQL 16 for billing")
    calls: list[ModelCall] = []
    agent = HarnessAgent(
        name="Remote",
        model=_script(calls),
        workspace=served.server.url,
        namespace=ns,
        compaction=CompactionConfig(trigger_messages=6, keep_messages=2),
    )
    turns = [
        "Which database does Wang Lei prefer?",
        "Please save that the deploy window is Friday 18:00.",
        "Remember that the staging cluster moved to Frankfurt on 2026-03-02.",
        "We fly on Monday.",
        "Book a window seat.",
    ]
    replies = []
    for text in turns:
        replies.append((await agent.call(text)).text)
        await agent.drain()
    await agent.close()

    assert replies[:2] == ["PostgreSQL 16.", "Saved."]
    assert "The team ships on Thursdays." in (calls[0].system or "")  # MEMORY.md, injected
    assert not [c.task for c in calls if c.task in ("flush", "consolidate")]  # the server's
    assert agent.scheduler is not None and not agent.scheduler.running
    assert not [t for t in threading.enumerate() if t.name == "memdir-maintenance"]
    history = agent.history()
    assert history[0].name == SUMMARY_NAME and len(history) < 2 * len(turns)

    stored = Workspace(served.workspace, namespace=ns, create=False)  # the server's own store
    ledgers = "".join(stored.read_text(rel) for _, rel in stored.ledgers())
    assert "The deploy window is Friday 18:00." in ledgers  # memory_add, written there
    assert "Frankfurt" in ledgers  # extracted by the server's model from a flush
    assert ledgers.count("Frankfurt") == 1
    log = stored.read_text("sessions/default.log.jsonl")
    assert "Which database does Wang Lei prefer?" in log  # offloaded before compaction
    assert stored.stat("sessions/default.state.json") is not None
    routes = wait_for(
        lambda: {line["route"].rsplit("/", 1)[-1] for line in served.server.access_log()},
        "the access log",
    )
    assert {"flush", "search", "memories"} <= routes
