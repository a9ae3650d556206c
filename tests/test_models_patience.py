"""memdir's own model calls wait for progress, not for a fixed time; timeouts follow the model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.errors import ConfigError
from memdir.memory import MemoryFlushManager
from memdir.messages import Msg
from memdir.models import (
    AnthropicModel,
    ModelDelta,
    ModelResponse,
    OpenAIChatModel,
    generate_patiently,
    resolve_patience,
)
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

SUMMARY = (
    "## SESSION INTENT\nPlan.\n## SUMMARY\nThe plan was discussed.\n## ARTIFACTS\nNone\n"
    "## NEXT STEPS\nNone"
)


class SlowStreamingModel:
    """Writes ``answer`` a word every ``gap`` seconds, after ``first`` seconds of silence."""

    name = "slow"
    context_window = None

    def __init__(self, answer: str, *, gap: float, first: float = 0.0) -> None:
        self.answer = answer
        self.gap = gap
        self.first = first
        self.calls = 0

    async def generate(self, messages: Sequence[Msg], **kw: Any) -> ModelResponse:
        raise AssertionError("a model that streams is asked to stream")

    async def stream(
        self, messages: Sequence[Msg], **kw: Any
    ) -> AsyncIterator[ModelDelta | ModelResponse]:
        self.calls += 1
        await asyncio.sleep(self.first)
        for word in self.answer.split(" "):
            await asyncio.sleep(self.gap)
            yield ModelDelta(kind="text", text=word + " ")
        yield ModelResponse(message=Msg.assistant(self.answer), stop_reason="stop")


async def test_a_slow_answer_that_keeps_coming_finishes() -> None:
    model = SlowStreamingModel(" ".join(f"w{i}" for i in range(20)), gap=0.03)  # 0.6 s in all
    response = await generate_patiently(model, [Msg.user("go")], timeout=0.3)  # type: ignore[arg-type]
    assert response.text.startswith("w0 w1")


async def test_no_progress_for_the_timeout_gives_up() -> None:
    model = SlowStreamingModel("late", gap=0.0, first=2.0)
    with pytest.raises(TimeoutError):
        await generate_patiently(model, [Msg.user("go")], timeout=0.2)  # type: ignore[arg-type]


async def test_a_slow_summary_that_keeps_writing_is_not_cut_off(ws: Workspace) -> None:
    # The whole summary takes about 1 s; the timeout is 0.4 s without progress.
    model = SlowStreamingModel(SUMMARY, gap=0.08)
    msgs = [Msg.user(f"Question {i}: " + "about the plan " * 30) for i in range(6)]
    compactor = ConversationCompactor(
        model,  # type: ignore[arg-type]
        ws,
        CompactionConfig(trigger_messages=4, keep_messages=2, summary_timeout=0.4),
    )
    result = await compactor.compact_if_needed(msgs, session_id="s1")
    assert result is not None and result.stages == ("summary",)
    assert "The plan was discussed." in result.summary


async def test_a_flush_waits_for_a_slow_model_that_keeps_writing(ws: Workspace) -> None:
    model = SlowStreamingModel("- The deploy window is Friday 18:00.", gap=0.1)
    manager = MemoryFlushManager(ws, model, timeout=0.35)  # type: ignore[arg-type]
    convo = [Msg.user("When do we deploy?"), Msg.assistant("Friday at 18:00, as agreed.")]
    result = await manager.flush_memories(convo, session_id="s1")
    assert result.skipped is None
    assert "Friday 18:00" in ws.read_text(ws.ledger_rel())


def test_timeouts_follow_the_model() -> None:
    local = OpenAIChatModel("qwen2.5", base_url="http://127.0.0.1:8080/v1")
    lan = OpenAIChatModel("llama3", base_url="http://192.168.1.20:11434/v1")
    container = OpenAIChatModel("llama3", base_url="http://ollama:11434/v1")
    hosted = OpenAIChatModel("gpt-4o-mini", base_url="https://api.example.com/v1", api_key="k")
    claude = AnthropicModel("claude-sonnet-4-5", api_key="k")
    assert local.timeout == lan.timeout == container.timeout == 600.0
    assert hosted.timeout == claude.timeout == 120.0
    assert OpenAIChatModel("m", base_url="http://localhost:1/v1", timeout=30).timeout == 30.0
    assert resolve_patience("auto", local) == 600.0
    assert resolve_patience("auto", FunctionModel(lambda c: "x")) == 300.0  # no timeout of its own
    assert resolve_patience(None, local) is None
    assert resolve_patience(5.0, local) == 5.0


@pytest.mark.parametrize("bad", [0, -1, "soon", True, float("inf")])
def test_a_bad_timeout_is_a_config_error(ws: Workspace, bad: object) -> None:
    with pytest.raises(ConfigError, match="summary_timeout"):
        CompactionConfig(summary_timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout"):
        MemoryFlushManager(ws, FunctionModel(lambda c: "x"), timeout=bad)  # type: ignore[arg-type]
