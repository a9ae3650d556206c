"""HarnessAgent: the tool loop, hooks, events, persistence and serialisation of calls."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from memdir.agent import (
    AgentEvent,
    HarnessAgent,
    HookErrorEvent,
    PostActingEvent,
    PostCallEvent,
    PostReasoningEvent,
    PreActingEvent,
    PreCallEvent,
    PreReasoningEvent,
)
from memdir.errors import ConfigError, MemdirError, ModelError
from memdir.messages import Msg, ToolResultBlock, ToolUseBlock
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.workspace import Workspace


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> Msg:
    return Msg.assistant(tool_calls=[ToolUseBlock(id=i, name=n, input=a) for i, n, a in calls])


def _agent(ws: Workspace, model: Any, **kw: Any) -> HarnessAgent:
    kw.setdefault("workspace_context", False)
    kw.setdefault("memory_tools", False)
    kw.setdefault("memory_flush", False)
    kw.setdefault("maintenance", None)
    kw.setdefault("compaction", None)
    return HarnessAgent(name="Test", model=model, workspace=ws, **kw)


async def test_tool_loop_runs_tools_and_feeds_results_back(ws: Workspace) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    model = ScriptedModel(
        [
            _calls(("c1", "add", {"a": 2, "b": "3"}), ("c2", "shout", {"text": "hi"})),
            "The answer is 5.",
        ]
    )
    agent = _agent(ws, model, tools=[add, shout])
    reply = await agent.call("What is 2 + 3?")

    assert reply.text == "The answer is 5."
    model.assert_complete()
    results = model.calls[1].messages[-1].tool_results
    assert [(r.tool_use_id, r.text, r.is_error) for r in results] == [
        ("c1", "5", False),
        ("c2", "HI", False),
    ]
    assert [m.role for m in agent.history()] == ["user", "assistant", "tool", "assistant"]
    state = json.loads((ws.root / "sessions" / "default.state.json").read_text())
    assert [m["role"] for m in state["messages"]] == ["user", "assistant", "tool", "assistant"]


async def test_parallel_tool_calls_run_concurrently(ws: Workspace) -> None:
    started: list[str] = []
    both = asyncio.Event()

    async def wait_for_peer(name: str) -> str:
        """Wait until both calls have started."""
        started.append(name)
        if len(started) == 2:
            both.set()
        await both.wait()  # deadlocks if the calls ran one after the other
        return name

    def blocking(name: str) -> str:
        """A sync tool: runs in a worker thread, not on the loop."""
        return f"sync {name}"

    model = ScriptedModel(
        [
            _calls(
                ("a", "wait_for_peer", {"name": "a"}),
                ("b", "wait_for_peer", {"name": "b"}),
                ("c", "blocking", {"name": "c"}),
            ),
            "done",
        ]
    )
    agent = _agent(ws, model, tools=[wait_for_peer, blocking])
    reply = await asyncio.wait_for(agent.call("go"), timeout=30)
    assert reply.text == "done"
    texts = [r.text for r in model.calls[1].messages[-1].tool_results]
    assert texts == ["a", "b", "sync c"]  # results keep the order of the calls


async def test_tool_failures_become_error_results(ws: Workspace) -> None:
    def broken(x: int) -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel(
        [
            _calls(
                ("1", "broken", {"x": 1}),
                ("2", "missing_tool", {}),
                ("3", "broken", {"y": 1}),
                ("4", "broken", {"x": "many"}),
                ("5", "read_file", {"path": "../etc/passwd"}),
            ),
            "recovered",
        ]
    )
    agent = _agent(ws, model, tools=[broken])
    assert (await agent.call("go")).text == "recovered"
    results = {r.tool_use_id: r for r in model.calls[1].messages[-1].tool_results}
    assert all(r.is_error for r in results.values())
    assert "disk on fire" in results["1"].text
    assert "no tool named 'missing_tool'" in results["2"].text
    assert "unexpected argument(s) y" in results["3"].text
    assert "must be of type integer" in results["4"].text
    assert "leaves the workspace" in results["5"].text


async def test_events_fire_in_order_and_pre_reasoning_runs_before_every_model_call(
    ws: Workspace,
) -> None:
    seen: list[str] = []

    def record(event: AgentEvent) -> None:
        seen.append(type(event).__name__)

    def echo(text: str) -> str:
        """Echo."""
        return text

    model = ScriptedModel([_calls(("1", "echo", {"text": "x"})), _calls(("2", "echo", {})), "ok"])
    agent = _agent(ws, model, tools=[echo])
    agent.add_hook(record)
    await agent.call("go")
    assert seen == [
        "PreCallEvent",
        "PreReasoningEvent",
        "PostReasoningEvent",
        "PreActingEvent",
        "PostActingEvent",
        "PreReasoningEvent",
        "PostReasoningEvent",
        "PreActingEvent",
        "PostActingEvent",
        "PreReasoningEvent",
        "PostReasoningEvent",
        "PostCallEvent",
    ]


async def test_hooks_run_by_priority_can_replace_inputs_and_failures_are_reported(
    ws: Workspace,
) -> None:
    order: list[str] = []
    errors: list[HookErrorEvent] = []

    async def late(event: PreReasoningEvent) -> None:
        order.append("late")
        event.system = (event.system or "") + " [late]"

    def early(event: PreReasoningEvent) -> None:
        order.append("early")
        event.system = "base"

    def failing(event: PreReasoningEvent) -> None:
        order.append("failing")
        raise ValueError("hook bug")

    def censor(event: PostActingEvent) -> None:
        event.result = ToolResultBlock(tool_use_id="x", output="[censored]")

    def fix_args(event: PreActingEvent) -> None:
        event.tool_call = ToolUseBlock(id=event.tool_call.id, name="echo", input={"text": "fixed"})

    def echo(text: str) -> str:
        """Echo."""
        return text

    model = ScriptedModel([_calls(("1", "echo", {"text": "secret"})), "ok"])
    agent = _agent(ws, model, tools=[echo])
    agent.add_hook(late, priority=600, events=(PreReasoningEvent,))
    agent.add_hook(failing, priority=550, events=(PreReasoningEvent,))
    agent.add_hook(early, priority=10, events=(PreReasoningEvent,))
    agent.add_hook(censor, events=(PostActingEvent,))
    agent.add_hook(fix_args, events=(PreActingEvent,))
    agent.add_hook(errors.append, events=(HookErrorEvent,))
    await agent.call("go")

    assert order[:3] == ["early", "failing", "late"]
    assert model.calls[0].system == "base [late]"
    result = model.calls[1].messages[-1].tool_results[0]
    assert result.text == "[censored]"
    assert result.tool_use_id == "1"  # the pairing survives a replaced result
    assert len(errors) == 2 and errors[0].hook.endswith("failing")
    assert isinstance(errors[0].error, ValueError)
    assert agent.remove_hook(failing) and not agent.remove_hook(failing)


async def test_stream_yields_events_and_ends_with_the_reply(ws: Workspace) -> None:
    def echo(text: str) -> str:
        """Echo."""
        return text

    model = ScriptedModel([_calls(("1", "echo", {"text": "a"})), "final"])
    agent = _agent(ws, model, tools=[echo])
    events = [e async for e in agent.stream("go")]
    assert isinstance(events[0], PreCallEvent)
    assert isinstance(events[-1], PostCallEvent)
    assert events[-1].reply.text == "final"
    assert [e.result.text for e in events if isinstance(e, PostActingEvent)] == ["a"]
    assert [m.role for m in events[-1].new_messages] == ["user", "assistant", "tool", "assistant"]
    assert sum(isinstance(e, PostReasoningEvent) for e in events) == 2


async def test_max_iters_forces_a_final_answer_without_tools(ws: Workspace) -> None:
    def echo(text: str) -> str:
        """Echo."""
        return text

    looping = _calls(("1", "echo", {"text": "again"}))
    model = ScriptedModel([looping, _calls(("2", "echo", {"text": "again"})), "summary"])
    agent = _agent(ws, model, tools=[echo], max_iters=2)
    assert (await agent.call("go")).text == "summary"
    assert model.calls[2].tools is None
    assert "Answer now" in (model.calls[2].system or "")

    stubborn = ScriptedModel([looping, looping, looping])
    agent2 = _agent(ws, stubborn, tools=[echo], max_iters=2, session_id="s2")
    reply = await agent2.call("go")
    assert reply.metadata["memdir.stopped"] == "max_iters"
    last_results = agent2.history("s2")[-2].tool_results
    assert last_results[0].is_error  # every call in the history has a result


async def test_concurrent_calls_on_one_session_are_serialised(ws: Workspace) -> None:
    async def slow_answer(call: ModelCall) -> str:
        await asyncio.sleep(0.01)  # give the other call every chance to interleave
        return f"re: {call.last_user_text}"

    agent = _agent(ws, FunctionModel(slow_answer))
    await asyncio.gather(agent.call("one"), agent.call("two"), agent.call("three"))
    history = agent.history()
    assert len(history) == 6
    for user, answer in zip(history[::2], history[1::2], strict=True):
        assert user.role == "user" and answer.text == f"re: {user.text}"


async def test_sessions_are_separate_and_persist_across_agents(ws: Workspace) -> None:
    model = FunctionModel(lambda call: f"{len(call.messages)} messages")
    agent = _agent(ws, model)
    await agent.call("a", session_id="alpha")
    await agent.call("b", session_id="alpha")
    await agent.call("c", session_id="beta")
    again = _agent(ws, model)
    assert [m.text for m in again.history("alpha")] == ["a", "1 messages", "b", "3 messages"]
    assert len(again.history("beta")) == 2
    again.reset("alpha")
    assert again.history("alpha") == []
    with pytest.raises(MemdirError, match="invalid session id"):
        again.history("../escape")


async def test_model_failure_keeps_the_input_and_the_call_can_be_resumed(ws: Workspace) -> None:
    model = ScriptedModel([ModelError("provider down", status_code=503), "back again"])
    agent = _agent(ws, model)
    with pytest.raises(ModelError):
        await agent.call("remember me")
    assert [m.text for m in agent.history()] == ["remember me"]
    reply = await agent.call()  # resume: no new input
    assert reply.text == "back again"
    assert [m.text for m in model.calls[1].messages] == ["remember me"]
    with pytest.raises(ConfigError, match="no interrupted call"):
        await agent.call()


async def test_discard_unanswered_takes_back_a_failed_input_only(ws: Workspace) -> None:
    model = ScriptedModel(
        ["first answer", ModelError("down"), _calls(("c1", "nosuch", {})), ModelError("down")]
    )
    agent = _agent(ws, model)
    await agent.call("first")
    assert await agent.discard_unanswered() == []  # the session ends with a reply
    with pytest.raises(ModelError):
        await agent.call("second")
    removed = await agent.discard_unanswered()
    assert [m.text for m in removed] == ["second"]
    assert [m.text for m in agent.history()] == ["first", "first answer"]
    # Reloaded from the file by another agent: the removal was persisted.
    assert [m.text for m in _agent(ws, model).history()] == ["first", "first answer"]
    with pytest.raises(ModelError):
        await agent.call("third")  # a tool round ran before the failure
    assert await agent.discard_unanswered() == []  # the tool results stay, paired
    assert [m.role for m in agent.history()][-3:] == ["user", "assistant", "tool"]


async def test_cancelled_call_leaves_a_valid_history(ws: Workspace) -> None:
    gate = asyncio.Event()

    async def hang() -> str:
        """Never finishes."""
        gate.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([_calls(("h", "hang", {}))])
    agent = _agent(ws, model, tools=[hang])
    task = asyncio.create_task(agent.call("go"))
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    history = _agent(ws, ScriptedModel()).history()
    assert history[-1].tool_results[0].is_error
    assert "interrupted" in history[-1].tool_results[0].text


def test_call_sync_and_context_manager(ws: Workspace) -> None:
    model = ScriptedModel(["sync reply"])
    with _agent(ws, model) as agent:
        assert agent.call_sync("hello").text == "sync reply"


async def test_bad_configuration_is_rejected(ws: Workspace) -> None:
    def read_file(path: str) -> str:
        """Shadows the built-in."""
        return path

    with pytest.raises(ConfigError, match="two tools are named 'read_file'"):
        _agent(ws, ScriptedModel(), tools=[read_file])
    assert _agent(ws, ScriptedModel(), tools=[read_file], file_tools=False)
    with pytest.raises(ConfigError):
        _agent(ws, ScriptedModel(), max_iters=0)
    with pytest.raises(ConfigError):
        _agent(ws, object())
    agent = _agent(ws, ScriptedModel())
    with pytest.raises(ConfigError):
        await agent.call("   ")
    with pytest.raises(ConfigError):
        await agent.call(Msg.system("no"))


async def test_leaving_a_stream_early_cancels_the_call_and_keeps_the_history_valid(
    ws: Workspace,
) -> None:
    started = asyncio.Event()

    async def slow(text: str) -> str:
        """Takes forever."""
        started.set()
        await asyncio.Event().wait()
        return text

    model = ScriptedModel([_calls(("s1", "slow", {"text": "x"}))])
    agent = _agent(ws, model, tools=[slow])
    stream = agent.stream("go")
    async for event in stream:
        if isinstance(event, PreActingEvent):
            await started.wait()
            break
    await stream.aclose()  # type: ignore[attr-defined]
    history = _agent(ws, ScriptedModel()).history()
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[-1].tool_results[0].is_error
