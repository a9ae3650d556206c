"""ScriptedModel and FunctionModel behave like real models and record what they were asked."""

from __future__ import annotations

import pytest

from memdir.errors import ContextOverflowError
from memdir.messages import Msg, ToolUseBlock
from memdir.models import TASK_KEY, ChatModel, ModelResponse, ToolSpec, Usage
from memdir.testing import FunctionModel, ModelCall, ScriptedModel

TOOL = ToolSpec(name="memory_search", description="search", parameters={"type": "object"})


async def test_scripted_model_plays_steps_in_order_and_records_calls() -> None:
    call = ToolUseBlock(id="c1", name="memory_search", input={"query": "tea"})
    model = ScriptedModel(
        [
            "plain text",
            Msg.assistant(tool_calls=[call]),
            ModelResponse(message=Msg.assistant("x"), usage=Usage(input_tokens=5, output_tokens=1)),
            lambda c: f"echo {c.last_user_text}",
        ],
        context_window=8000,
    )
    assert isinstance(model, ChatModel)
    first = Msg.user("a")
    r1 = await model.generate([first], system="sys", tools=[TOOL])
    r2 = await model.generate([Msg.user("b")])
    r3 = await model.generate([Msg.user("c")], max_output_tokens=10)
    r4 = await model.generate([Msg.user("d")])
    assert (r1.text, r1.stop_reason) == ("plain text", "stop")
    assert r2.tool_calls == (call,) and r2.stop_reason == "tool_calls"
    assert r3.usage == Usage(input_tokens=5, output_tokens=1)
    assert r4.text == "echo d"
    assert model.calls[0] == ModelCall(messages=[first], tools=[TOOL], system="sys")
    assert model.calls[2].max_output_tokens == 10
    assert model.context_window == 8000
    model.assert_complete()


async def test_scripted_model_raises_scripted_errors_and_runs_dry_loudly() -> None:
    model = ScriptedModel([ContextOverflowError("too long"), RuntimeError])
    with pytest.raises(ContextOverflowError):
        await model.generate([Msg.user("x")])
    with pytest.raises(RuntimeError):
        await model.generate([Msg.user("x")])
    with pytest.raises(AssertionError, match="call #3 has no scripted step"):
        await model.generate([Msg.user("x")])
    assert len(model.calls) == 3


async def test_assert_complete_reports_unused_steps() -> None:
    model = ScriptedModel(["a", "b"])
    await model.generate([Msg.user("x")])
    with pytest.raises(AssertionError, match="1 scripted step"):
        model.assert_complete()
    model.add("c")
    assert model.remaining == 2


async def test_call_task_marker_is_visible() -> None:
    model = ScriptedModel(["ok"])
    await model.generate([Msg.user("summarise", metadata={TASK_KEY: "summarize"})])
    assert model.calls[0].task == "summarize"


async def test_non_assistant_reply_is_rejected() -> None:
    model = ScriptedModel([Msg.user("wrong")])
    with pytest.raises(TypeError, match="assistant"):
        await model.generate([Msg.user("x")])


async def test_function_model_builds_replies_from_the_request() -> None:
    async def reply(call: ModelCall) -> str:
        return f"{len(call.messages)} messages, tools={call.tools is not None}"

    model = FunctionModel(reply, context_window=1000)
    assert isinstance(model, ChatModel)
    r = await model.generate([Msg.user("a"), Msg.assistant("b"), Msg.user("c")])
    assert r.text == "3 messages, tools=False"
    assert len(model.calls) == 1

    def boom(call: ModelCall) -> str:
        raise ContextOverflowError("over")

    with pytest.raises(ContextOverflowError):
        await FunctionModel(boom).generate([Msg.user("x")])
