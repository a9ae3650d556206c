"""An empty answer (no text, no tool call) is asked for again, and never passed off as a reply."""

from __future__ import annotations

from memdir.agent import HarnessAgent
from memdir.messages import Msg, ThinkingBlock, ToolUseBlock
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.workspace import Workspace


def _agent(ws: Workspace, model: object) -> HarnessAgent:
    return HarnessAgent(
        model=model,  # type: ignore[arg-type]
        workspace=ws,
        memory_flush=False,
        maintenance=None,
        workspace_context=False,
    )


async def test_an_empty_answer_is_retried_once_with_a_nudge(ws: Workspace) -> None:
    model = ScriptedModel(["", "Paris is the capital of France."])
    agent = _agent(ws, model)
    reply = await agent.call("What is the capital of France?")
    assert reply.text == "Paris is the capital of France."
    assert len(model.calls) == 2
    assert "previous reply was empty" in (model.calls[1].system or "")
    assert "previous reply was empty" not in (model.calls[0].system or "")
    # The empty answer never entered the conversation.
    assert [m.role for m in agent.history()] == ["user", "assistant"]
    assert agent.history()[-1].text == reply.text


async def test_two_empty_answers_are_reported_not_returned_as_text(ws: Workspace) -> None:
    thinking_only = Msg(role="assistant", content=(ThinkingBlock(thinking="hmm"),))
    model = ScriptedModel(["   \n", thinking_only])
    agent = _agent(ws, model)
    reply = await agent.call("Say something.")
    assert reply.text.strip()
    assert "no answer" in reply.text
    assert reply.metadata["memdir.stopped"] == "empty_answer"
    assert len(model.calls) == 2  # one retry, no loop
    history = agent.history()
    assert [m.role for m in history] == ["user", "assistant"] and history[-1] == reply


async def test_an_empty_answer_after_a_tool_call_is_retried_too(ws: Workspace) -> None:
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"{city}: sunny"

    def answer(call: ModelCall) -> Msg | str:
        if len(call.messages) == 1:
            return Msg.assistant(
                tool_calls=[ToolUseBlock(id="c1", name="lookup", input={"city": "Oslo"})]
            )
        return "" if "previous reply was empty" not in (call.system or "") else "Sunny in Oslo."

    agent = HarnessAgent(
        model=FunctionModel(answer),
        workspace=ws,
        tools=[lookup],
        memory_flush=False,
        maintenance=None,
        workspace_context=False,
    )
    reply = await agent.call("Weather in Oslo?")
    assert reply.text == "Sunny in Oslo."
    assert [m.role for m in agent.history()] == ["user", "assistant", "tool", "assistant"]
