"""End-to-end runs of HarnessAgent: one per mechanism (eviction, compaction with flush and
offload, overflow recovery, background memory work, crash and resume, session locking)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memdir.agent import (
    INTERRUPTED_RESULT,
    ContextOverflowEvent,
    HarnessAgent,
    PostCallEvent,
    SessionBusyError,
)
from memdir.agent._state import repair_dangling
from memdir.compaction import CompactionConfig
from memdir.errors import ConfigError, ContextOverflowError
from memdir.memory import MaintenanceConfig
from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.workspace import Workspace

SUMMARY = (
    "## SESSION INTENT\nPlan the trip.\n## SUMMARY\nWe talked about colours.\n"
    "## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
)
FACT = "- The user's favourite colour is teal."
# Replies long enough that a summary of them is smaller than they are.
DETAILS = " Details: " + "the plan has several steps to check. " * 20


def _agent(ws: Workspace, model: Any, **kw: Any) -> HarnessAgent:
    kw.setdefault("workspace_context", False)
    kw.setdefault("memory_tools", False)
    kw.setdefault("maintenance", None)
    kw.setdefault("memory_flush", False)
    return HarnessAgent(name="E2E", model=model, workspace=ws, **kw)


def _call(call_id: str, name: str, **args: Any) -> Msg:
    return Msg.assistant(tool_calls=[ToolUseBlock(id=call_id, name=name, input=args)])


# -- eviction -----------------------------------------------------------------------------


async def test_huge_tool_result_is_evicted_and_read_back_in_pieces(ws: Workspace) -> None:
    rows = [{"id": i, "text": f"row {i} " + "x" * 40} for i in range(3_500)]
    big = json.dumps({"rows": rows, "error": "checksum mismatch at the very end"})
    assert len(big) > 200_000

    def export_table() -> str:
        """Export the whole table as one line of JSON."""
        return big

    pieces: list[str] = []

    def script(call: ModelCall) -> Msg | str:
        last = call.messages[-1]
        if last.role == "user":
            return _call("exp", "export_table")
        text = last.tool_results[0].text
        if last.tool_results[0].name == "export_table":
            assert len(text) < 6_000  # the model sees a placeholder, not 200 kB
            assert "checksum mismatch at the very end" in text  # the tail is previewed
            path = re.search(r"Saved in full to `([^`]+)`", text)
            assert path is not None
            return _call("r0", "read_file", path=path.group(1), start_char=0, max_chars=50_000)
        header, _, body = text.partition("\n")
        more = re.search(r"start_char=(\d+)\)\]$", body)
        pieces.append(body.rsplit("\n", 1)[0])
        if more is None:
            return "Read it all."
        path = header.split(":", 1)[0]
        start = int(more.group(1))
        return _call(f"r{start}", "read_file", path=path, start_char=start, max_chars=50_000)

    agent = _agent(ws, FunctionModel(script), tools=[export_table], max_iters=20)
    reply = await agent.call("Export the table and read it.")

    assert reply.text == "Read it all."
    assert "".join(pieces) == big
    state = json.loads((ws.root / "sessions" / "default.state.json").read_text("utf-8"))
    stored_result = next(
        block["output"]
        for msg in state["messages"]
        for block in msg["content"]
        if block.get("tool_use_id") == "exp"
    )
    assert len(stored_result) < 6_000  # the full output never reached the stored conversation
    stored = list((ws.root / "large_tool_results" / "default").iterdir())
    assert [p.read_text(encoding="utf-8") for p in stored] == [big]


# -- compaction ---------------------------------------------------------------------------


async def test_crossing_the_threshold_compacts_after_flush_and_offload(ws: Workspace) -> None:
    order: list[str] = []
    log_path = ws.root / "sessions" / "default.log.jsonl"

    def model_fn(call: ModelCall) -> str:
        if call.task == "flush":
            order.append("flush")
            return FACT
        if call.task == "summarize":
            order.append("summarize")
            # By now the prefix is in the ledger (flush) and in the session log (offload).
            assert "teal" in ws.read_text(ws.ledger_rel())
            assert log_path.is_file() and "favourite colour" in log_path.read_text("utf-8")
            return SUMMARY
        order.append("answer")
        return f"noted: {call.last_user_text}"

    agent = _agent(
        ws,
        FunctionModel(model_fn),
        compaction=CompactionConfig(trigger_messages=6, keep_messages=2),
        memory_flush=True,
    )
    await agent.call("My favourite colour is teal.")
    await agent.drain()
    for text in ("We fly on Monday.", "Book a window seat.", "What is left to do?"):
        await agent.call(text)
        await agent.drain()

    history = agent.history()
    assert history[0].name == SUMMARY_NAME and "colours" in history[0].text
    assert history[-2].text == "What is left to do?"
    assert len(history) < 6
    assert order.index("flush") < order.index("summarize")
    logged = SessionLog(ws, "default").messages()
    assert any(m.text == "My favourite colour is teal." for m in logged)
    assert ws.read_text(ws.ledger_rel()).count("teal") == 1  # flushed exactly once
    await agent.close()


async def test_a_model_that_reuses_its_call_ids_still_gets_compacted(ws: Workspace) -> None:
    # llama.cpp-style servers and scripted models number calls per answer: "c0" every turn.
    summaries = 0

    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}{DETAILS}"

    def model_fn(call: ModelCall) -> Msg | str:
        nonlocal summaries
        if call.task == "summarize":
            summaries += 1
            return SUMMARY
        if call.messages[-1].role == "user":
            return _call("c0", "lookup", key="k0")
        return "done"

    agent = _agent(
        ws,
        FunctionModel(model_fn),
        tools=[lookup],
        compaction=CompactionConfig(trigger_messages=8, keep_messages=4),
    )
    for turn in range(15):
        assert (await agent.call(f"look up key {turn}")).text == "done"
    history = agent.history()
    assert len(history) <= 8  # bounded, as with unique ids; it grew to 60 of 60
    assert history[0].name == SUMMARY_NAME
    assert summaries < 15  # a summary only when something was cut
    logged = SessionLog(ws, "default").messages()
    assert sum(m.text == "look up key 0" for m in logged) == 1  # offloaded once
    await agent.close()


async def test_compact_now_flushes_offloads_and_persists_the_compacted_history(
    ws: Workspace,
) -> None:
    order: list[str] = []

    def model_fn(call: ModelCall) -> str:
        if call.task in ("flush", "summarize"):
            order.append(call.task)
            return FACT if call.task == "flush" else SUMMARY
        return f"noted: {call.last_user_text}{DETAILS}"

    # Triggers far away: nothing compacts during the calls.
    config = CompactionConfig(trigger_messages=1_000, keep_messages=20)
    agent = _agent(ws, FunctionModel(model_fn), compaction=config, memory_flush=True)
    for text in ("My favourite colour is teal.", "We fly on Monday.", "Book a window seat."):
        await agent.call(text)
    await agent.drain()
    order.clear()

    assert await agent.compact(force=False) is None  # no trigger fires
    result = await agent.compact(keep_messages=0)

    assert result is not None and result.reason == "forced"
    assert order == ["summarize"]  # everything was already flushed: no second flush call
    history = agent.history()
    assert history == result.messages
    # The summary, then the latest request (always kept verbatim).
    assert [(m.name, m.text) for m in history[1:]] == [(None, "Book a window seat.")]
    assert history[0].name == SUMMARY_NAME
    logged = [m.text for m in SessionLog(ws, "default").messages()]
    assert "My favourite colour is teal." in logged and "We fly on Monday." in logged
    assert ws.read_text(ws.ledger_rel()).count("teal") == 1
    # A new agent on the workspace continues from the compacted conversation.
    assert _agent(ws, FunctionModel(model_fn), compaction=config).history() == history
    await agent.close()


async def test_compact_waits_for_a_call_on_the_session_and_needs_compaction_on(
    ws: Workspace,
) -> None:
    release = asyncio.Event()

    async def model_fn(call: ModelCall) -> str:
        if call.task == "summarize":
            return SUMMARY
        if call.last_user_text == "slow":
            await release.wait()
        return f"noted: {call.last_user_text}{DETAILS}"

    config = CompactionConfig(trigger_messages=1_000, keep_messages=20)
    agent = _agent(ws, FunctionModel(model_fn), compaction=config)
    for text in ("one", "two"):
        await agent.call(text)
    call = asyncio.create_task(agent.call("slow"))
    await asyncio.sleep(0)
    compact = asyncio.create_task(agent.compact(keep_messages=0))
    await asyncio.sleep(0.01)
    assert not compact.done()  # held back by the running call
    release.set()
    await call
    result = await compact
    assert result is not None
    # The compaction saw the finished call: its reply was offloaded with the rest.
    assert agent.history()[-1].text == "slow"
    logged = {m.text for m in SessionLog(ws, "default").messages()}
    assert {f"noted: two{DETAILS}", f"noted: slow{DETAILS}"} <= logged

    with pytest.raises(ConfigError, match="compaction is off"):
        await _agent(ws, FunctionModel(model_fn), compaction=None).compact()


# -- overflow recovery --------------------------------------------------------------------


def _overflowing_model(max_chars: int) -> FunctionModel:
    """A model that refuses requests whose messages hold more than ``max_chars`` characters."""

    def model_fn(call: ModelCall) -> str:
        if call.task == "summarize":
            return SUMMARY
        if sum(len(m.text) for m in call.messages) > max_chars:
            raise ContextOverflowError(
                "This model's maximum context length is 8192 tokens. However, your messages "
                "resulted in 9000 tokens.",
                status_code=400,
            )
        return f"ok with {len(call.messages)} messages"

    return FunctionModel(model_fn)


async def _grow(agent: HarnessAgent, n: int) -> None:
    for i in range(n):
        await agent.call(f"message {i}.{DETAILS}")


async def test_context_overflow_is_recovered_by_forced_compaction(ws: Workspace) -> None:
    model = _overflowing_model(max_chars=3 * len(DETAILS) + 200)
    events: list[ContextOverflowEvent] = []
    config = CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=2)
    agent = _agent(ws, model, compaction=config)
    agent.add_hook(events.append, events=(ContextOverflowEvent,))
    await _grow(agent, 3)  # still fits
    reply = await agent.call(f"the one that overflows.{DETAILS}")

    assert reply.text.startswith("ok with")
    assert [(e.attempt, e.recovered) for e in events] == [(1, True)]
    history = agent.history()
    assert history[0].name == SUMMARY_NAME
    # never appended twice
    assert sum(m.text == f"the one that overflows.{DETAILS}" for m in history) == 1
    logged = {m.text for m in SessionLog(ws, "default").messages()}
    assert {f"message 0.{DETAILS}", f"message 1.{DETAILS}"} <= logged  # nothing lost


async def test_overflow_recovery_works_when_streaming(ws: Workspace) -> None:
    config = CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=2)
    agent = _agent(ws, _overflowing_model(max_chars=3 * len(DETAILS) + 200), compaction=config)
    await _grow(agent, 3)
    events = [e async for e in agent.stream(f"streamed overflow.{DETAILS}")]
    assert any(isinstance(e, ContextOverflowEvent) and e.recovered for e in events)
    assert isinstance(events[-1], PostCallEvent)
    assert events[-1].reply.text.startswith("ok with")


async def test_a_single_oversized_message_is_cut_with_a_pointer_to_its_copy(
    ws: Workspace,
) -> None:
    def model_fn(call: ModelCall) -> str:
        if call.task == "summarize":
            return SUMMARY
        if any(len(m.text) > 20_000 for m in call.messages):
            raise ContextOverflowError("prompt is too long: 60000 tokens > 8192 maximum")
        return "read the start and the end"

    huge = "BEGIN " + "lorem ipsum " * 20_000 + " END"
    config = CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=2)
    agent = _agent(ws, FunctionModel(model_fn), compaction=config)
    reply = await agent.call(huge)

    assert reply.text == "read the start and the end"
    first = agent.history()[0]
    assert first.text.startswith("BEGIN") and first.text.endswith("END")
    assert "sessions/default.log.jsonl" in first.text
    assert [m.text for m in SessionLog(ws, "default").messages()] == [huge]


async def test_overflow_without_compaction_explains_how_to_enable_it(ws: Workspace) -> None:
    agent = _agent(ws, _overflowing_model(max_chars=0), compaction=None)
    with pytest.raises(ContextOverflowError) as info:
        await agent.call("hello")
    assert "compaction=CompactionConfig()" in " ".join(getattr(info.value, "__notes__", []))
    assert [m.text for m in agent.history()] == ["hello"]


async def test_overflow_gives_up_after_two_attempts(ws: Workspace) -> None:
    limit = {"messages": 100}
    answers: list[int] = []

    def model_fn(call: ModelCall) -> str:
        if call.task == "summarize":
            return SUMMARY
        answers.append(len(call.messages))
        if len(call.messages) > limit["messages"]:
            raise ContextOverflowError("context_length_exceeded")
        return "ok"

    config = CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=4)
    agent = _agent(ws, FunctionModel(model_fn), compaction=config)
    await _grow(agent, 5)
    limit["messages"] = 0  # from now on nothing fits
    answers.clear()
    events: list[ContextOverflowEvent] = []
    agent.add_hook(events.append, events=(ContextOverflowEvent,))
    with pytest.raises(ContextOverflowError) as info:
        await agent.call("hello")
    assert [e.attempt for e in events] == list(range(1, len(events) + 1))
    assert 1 <= len(events) <= 3 and not events[-1].recovered
    assert all(e.recovered for e in events[:-1])
    assert len(answers) == len(events)  # one model call per attempt, no endless retry
    assert getattr(info.value, "__notes__", [])
    assert sum(m.text == "hello" for m in agent.history()) == 1


# -- background memory work ---------------------------------------------------------------


async def test_flush_runs_after_the_reply_and_close_drains_it(ws: Workspace) -> None:
    gate = asyncio.Event()

    async def memory_fn(call: ModelCall) -> str:
        await gate.wait()
        return FACT

    agent = _agent(
        ws,
        ScriptedModel(["Nice colour."]),
        memory_flush=True,
        memory_model=FunctionModel(memory_fn),
    )
    reply = await agent.call("My favourite colour is teal.")
    assert reply.text == "Nice colour."
    assert agent.pending_background == 1  # the flush is still waiting for its model
    assert "teal" not in ws.read_text(ws.ledger_rel())
    gate.set()
    await agent.close()
    assert agent.pending_background == 0
    assert "favourite colour is teal" in ws.read_text(ws.ledger_rel())


async def test_close_is_bounded_when_memory_work_hangs(ws: Workspace) -> None:
    async def never(call: ModelCall) -> str:
        await asyncio.Event().wait()
        return FACT

    async with _agent(
        ws, ScriptedModel(["ok"]), memory_flush=True, memory_model=FunctionModel(never)
    ) as agent:
        await agent.call("My favourite colour is teal.")
        agent.close_timeout = 0.2
    assert agent.pending_background == 0


async def test_a_flush_nudges_consolidation_into_memory_md(ws: Workspace) -> None:
    def memory_fn(call: ModelCall) -> str:
        if call.task == "consolidate":
            return "# Memory\n\n## Preferences\n- The user's favourite colour is teal.\n"
        return FACT

    agent = _agent(
        ws,
        ScriptedModel(["Noted."]),
        memory_flush=True,
        memory_model=FunctionModel(memory_fn),
        maintenance=MaintenanceConfig(),
    )
    await agent.call("My favourite colour is teal.")
    await agent.drain()
    assert "teal" in ws.read_text(ws.ledger_rel())
    for _ in range(600):  # the scheduler's thread serves the nudge; wait for it (bounded)
        if "teal" in ws.read_text("MEMORY.md"):
            break
        await asyncio.sleep(0.05)
    assert "favourite colour is teal" in ws.read_text("MEMORY.md")
    await agent.close()
    assert agent.scheduler is not None and not agent.scheduler.running


# -- crash and resume ---------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import asyncio, os, sys
    from memdir.agent import HarnessAgent
    from memdir.messages import Msg, ToolUseBlock
    from memdir.testing import ScriptedModel
    from memdir.workspace import Workspace

    def deploy() -> str:
        \"\"\"Deploy the service.\"\"\"
        os._exit(17)  # the process dies while the tool runs

    step = Msg.assistant("Deploying.", tool_calls=[ToolUseBlock(id="d1", name="deploy", input={})])
    agent = HarnessAgent(
        model=ScriptedModel([step]), workspace=Workspace(sys.argv[1], tz="UTC"), tools=[deploy],
        compaction=None, memory_flush=False, maintenance=None, memory_tools=False,
        workspace_context=False,
    )
    asyncio.run(agent.call("Please deploy the service."))
    """
)


async def test_a_killed_process_resumes_its_session(ws: Workspace) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _CHILD, str(ws.root)],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 17, done.stderr.decode()

    model = ScriptedModel(["The deploy was interrupted; I will check its status first."])
    agent = _agent(ws, model)
    history = agent.history()
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[2].tool_results[0].text == INTERRUPTED_RESULT
    reply = await agent.call()  # resume the interrupted call
    assert reply.text.startswith("The deploy was interrupted")
    assert model.calls[0].messages[-1].tool_results[0].is_error


def test_an_interrupted_call_with_a_reused_id_gets_one_result() -> None:
    # an answered "c0" earlier, an interrupted "c0" last: only the last one is answered again
    history = [
        Msg.user("check the disk"),
        _call("c0", "bash", cmd="df -h"),
        Msg.tool_result("c0", "/ 40% used", name="bash"),
        Msg.assistant("The disk is 40% used."),
        Msg.user("now deploy"),
        _call("c0", "deploy"),
    ]
    repaired = repair_dangling(history)
    assert repaired[:6] == history
    assert [r.tool_use_id for r in repaired[6].tool_results] == ["c0"]
    assert repaired[6].tool_results[0].text == INTERRUPTED_RESULT
    assert len(repaired) == 7


# -- locking ------------------------------------------------------------------------------


async def test_a_session_busy_in_another_process_is_refused_clearly(ws: Workspace) -> None:
    lock_path = ws.root / ".index" / "locks" / "agent-session-default.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what another process's running call holds
        agent = _agent(ws, ScriptedModel(["never"]), lock_timeout=0.2)
        with pytest.raises(SessionBusyError, match="in use by another process"):
            await agent.call("hi")
        assert agent.history() == []
    finally:
        os.close(fd)


async def test_evicted_results_follow_the_compaction_redactor(ws: Workspace) -> None:
    def mask_codename(text: str) -> str:
        return text.replace("BLUEBIRD", "[codename]")

    def dump() -> str:
        """Dump the project notes."""
        return "project BLUEBIRD notes\n" + "line of notes\n" * 20_000

    def model_fn(call: ModelCall) -> Msg | str:
        if call.messages[-1].role == "tool":
            return "done"
        return _call("c1", "dump")

    agent = _agent(
        ws,
        FunctionModel(model_fn),
        tools=[dump],
        compaction=CompactionConfig(redactor=mask_codename),
    )
    assert (await agent.call("dump the notes")).text == "done"
    (stored,) = (ws.root / "large_tool_results" / "default").iterdir()
    text = stored.read_text(encoding="utf-8")
    assert "[codename]" in text and "BLUEBIRD" not in text
