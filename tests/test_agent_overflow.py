"""Overflow recovery against servers whose limit memdir does not know in advance.

The server here is the real OpenAI adapter's peer: an OpenAI-compatible endpoint (through
``httpx.MockTransport``) that refuses every request body over a size, as a local server started
with a small context does. The model's name is not in memdir's table, so its window is unknown.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memdir.agent import ContextOverflowEvent, HarnessAgent
from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.compaction.overflow import overflow_limit
from memdir.errors import ContextOverflowError
from memdir.messages import SUMMARY_NAME, Msg
from memdir.models import OpenAIChatModel
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace

SUMMARY = (
    "## SESSION INTENT\nChat about the plan.\n## SUMMARY\nEarlier turns covered steps 1-9.\n"
    "## ARTIFACTS\nNone\n## NEXT STEPS\nContinue."
)
PARAGRAPH = "We looked at the migration plan step by step and wrote down what changed. "


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "local-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }


class SizeLimitedServer:
    """Refuses request bodies over ``max_chars`` characters with ``context_length_exceeded``.

    ``message`` is the error text (``None``: the code alone, no numbers, as many gateways do).
    """

    def __init__(self, max_chars: int, message: str | None = None) -> None:
        self.max_chars = max_chars
        self.message = message
        self.refused = 0
        self.answered = 0
        self.sizes: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        size = len(request.content.decode("utf-8"))
        self.sizes.append(size)
        if size > self.max_chars:
            self.refused += 1
            error = {"message": self.message or "context_length_exceeded", "type": "invalid"}
            error["code"] = "context_length_exceeded"
            return httpx.Response(400, json={"error": error})
        text = json.dumps(body["messages"], ensure_ascii=False)
        if "You are compacting the history" in text:
            return httpx.Response(200, json=_completion(SUMMARY))
        self.answered += 1
        return httpx.Response(200, json=_completion(f"answer {self.answered}: " + "fine. " * 40))


class ShortAnswers(SizeLimitedServer):
    """A :class:`SizeLimitedServer` whose answers are one word."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        response = super().__call__(request)
        if response.status_code == 200 and "answer " in response.text:
            return httpx.Response(200, json=_completion("ok"))
        return response


def _agent(ws: Workspace, server: SizeLimitedServer, **kw: Any) -> HarnessAgent:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    model = OpenAIChatModel("local-model", base_url="http://127.0.0.1:8080/v1", client=client)
    assert model.context_window is None  # not in the table: the limit is unknown
    kw.setdefault("memory_flush", False)
    kw.setdefault("maintenance", None)
    return HarnessAgent(model=model, workspace=ws, **kw)


async def test_a_short_conversation_on_a_small_unknown_window_answers_every_turn(
    ws: Workspace,
) -> None:
    # Defaults everywhere (keep_messages=20, tools and workspace context on): the history
    # overflows while it is still shorter than the kept tail.
    ws.write_text("AGENTS.md", "Answer briefly.\n")
    server = SizeLimitedServer(max_chars=24_000)
    agent = _agent(ws, server)
    events: list[ContextOverflowEvent] = []
    agent.add_hook(events.append, events=(ContextOverflowEvent,))
    questions = [f"Question {i}: " + PARAGRAPH * 20 for i in range(30)]
    replies = [await agent.call(q) for q in questions]

    assert all(r.text.startswith("answer ") for r in replies)  # 30 of 30
    assert events and all(e.recovered for e in events)
    # The limit was learned: later turns compact before the server refuses them.
    assert server.refused <= 4
    assert agent.compaction_hook is not None
    assert agent.compaction_hook.compactor.context_window is not None
    # Nothing was lost: every question is in the session log or still in the history.
    logged = {m.text for m in SessionLog(ws, "default").messages()}
    kept = {m.text for m in agent.history()}
    assert all(q in logged | kept for q in questions)
    assert sum(m.text == questions[-1] for m in agent.history()) == 1
    await agent.close()


async def test_the_limit_stated_by_the_provider_is_used_in_one_retry(ws: Workspace) -> None:
    server = SizeLimitedServer(
        max_chars=100_000,
        message=(
            "This model's maximum context length is 2048 tokens. However, your messages "
            "resulted in 4000 tokens."
        ),
    )
    agent = _agent(ws, server, workspace_context=False, memory_tools=False, file_tools=False)
    for i in range(12):
        await agent.call(f"Question {i}: " + PARAGRAPH * 10)
    events: list[ContextOverflowEvent] = []
    agent.add_hook(events.append, events=(ContextOverflowEvent,))
    server.max_chars = 6_000  # the server restarts with a smaller context
    reply = await agent.call("And now? " + PARAGRAPH)
    assert reply.text.startswith("answer")
    assert [(e.attempt, e.recovered) for e in events] == [(1, True)]


async def test_an_oversized_latest_message_is_cut_after_the_tail_is_exhausted(
    ws: Workspace,
) -> None:
    server = SizeLimitedServer(max_chars=20_000)
    agent = _agent(ws, server, workspace_context=False)
    await agent.call("hello")
    huge = "BEGIN " + PARAGRAPH * 400 + " END"  # ~30,000 characters, alone over the limit
    reply = await agent.call(huge)
    assert reply.text.startswith("answer")
    cut = next(m for m in agent.history() if m.text.startswith("BEGIN"))
    assert cut.text.endswith("END") and "sessions/default.log.jsonl" in cut.text
    assert huge in {m.text for m in SessionLog(ws, "default").messages()}


async def test_memory_context_is_shrunk_when_nothing_else_can_be(ws: Workspace) -> None:
    sections = "\n\n".join(f"## Topic {i}\n- fact {i}: " + PARAGRAPH * 6 for i in range(40))
    ws.write_text("MEMORY.md", sections + "\n")
    server = SizeLimitedServer(max_chars=14_000)
    agent = _agent(
        ws,
        server,
        memory_tools=False,
        file_tools=False,
        inject_memory=True,
        max_context_tokens=8_000,
    )
    reply = await agent.call("What do we know?")
    assert reply.text.startswith("answer")
    assert agent.context_hook is not None
    assert agent.context_hook.memory_budget("default") < 8_000
    # The note says what was left out, and MEMORY.md itself is untouched.
    assert ws.read_text("MEMORY.md") == sections + "\n"


async def test_nothing_left_to_shrink_is_explained_and_the_session_stays_usable(
    ws: Workspace,
) -> None:
    server = SizeLimitedServer(max_chars=100_000)
    agent = _agent(ws, server, workspace_context=False)
    await agent.call("hello")
    server.max_chars = 500  # smaller than the tool schemas alone
    with pytest.raises(ContextOverflowError) as info:
        await agent.call("still there?")
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "could not be made smaller" in notes and "tool schemas" in notes
    assert server.refused <= 7  # bounded, no endless retry
    server.max_chars = 100_000
    assert (await agent.call(None)).text.startswith("answer")  # the same input, retried


async def test_a_forced_compaction_that_would_grow_the_request_is_not_applied(
    ws: Workspace,
) -> None:
    def model_fn(call: ModelCall) -> str:
        return SUMMARY + "\n" + "a long-winded summary line. " * 80

    msgs = [Msg.user("hi"), Msg.assistant("hello"), Msg.user("ok"), Msg.assistant("bye")]
    compactor = ConversationCompactor(FunctionModel(model_fn), ws, CompactionConfig())
    result = await compactor.compact_if_needed(msgs, session_id="s1", force=True, keep_messages=0)
    assert result is None  # neither the summary nor the extractive one is smaller


async def test_the_last_resort_keeps_a_pointer_when_no_summary_is_smaller(ws: Workspace) -> None:
    def model_fn(call: ModelCall) -> str:
        return SUMMARY + "\n" + "a long-winded summary line. " * 80

    topics = ["the billing cluster", "the search index", "the nightly export", "the CDN cache"]
    msgs: list[Msg] = []
    for i, topic in enumerate(topics):
        msgs.append(Msg.user(f"Switch to {topic}; never restart it in office hours (ops-{i})."))
        msgs.append(Msg.assistant(f"We decided: {topic} stays, config in ops-{i}/app.yaml."))
    msgs.append(Msg.user("And the last one?"))
    compactor = ConversationCompactor(FunctionModel(model_fn), ws, CompactionConfig())
    kw: dict[str, Any] = {"session_id": "s1", "force": True, "keep_messages": 1}
    assert await compactor.compact_if_needed(msgs, **kw) is None  # no summary is smaller
    result = await compactor.compact_if_needed(msgs, **kw, last_resort=True)
    assert result is not None and result.stages == ("log_pointer",)
    assert result.tokens_after < result.tokens_before
    assert [m.text for m in result.messages[1:]] == ["And the last one?"]
    assert "sessions/s1.log.jsonl, lines 1-8" in result.messages[0].text
    assert SessionLog(ws, "s1").messages(1, 8) == msgs[:8]  # nothing lost


async def test_a_history_too_short_to_summarise_still_recovers(ws: Workspace) -> None:
    # 22 short messages (under 300 tokens before the kept tail) on a window that the tool
    # schemas nearly fill: recovery keeps the latest request, the rest is summarised and logged
    server = ShortAnswers(max_chars=100_000)
    agent = _agent(ws, server, workspace_context=False)
    events: list[ContextOverflowEvent] = []
    agent.add_hook(events.append, events=(ContextOverflowEvent,))
    for i in range(11):
        await agent.call(f"q{i}")
    assert len(agent.history()) == 22
    server.max_chars = server.sizes[-1] - 50
    reply = await agent.call("final question")
    assert reply.text == "ok"
    assert [(e.attempt, e.recovered) for e in events] == [(1, True)]
    history = agent.history()
    assert history[0].name == SUMMARY_NAME
    assert [m.text for m in history[1:]] == ["final question", "ok"]
    logged = [m.text for m in SessionLog(ws, "default").messages()]
    assert all(f"q{i}" in logged for i in range(11))


async def test_agent_compact_refuses_a_summary_bigger_than_the_messages(ws: Workspace) -> None:
    def model_fn(call: ModelCall) -> str:
        if call.task == "summarize":
            return SUMMARY + "\n" + "a long-winded summary line. " * 80
        return "short"

    agent = HarnessAgent(
        model=FunctionModel(model_fn),
        workspace=ws,
        memory_flush=False,
        maintenance=None,
        workspace_context=False,
    )
    for text in ("one", "two", "three"):
        await agent.call(text)
    before = agent.history()
    assert await agent.compact(keep_messages=0) is None
    assert agent.history() == before
    assert all(m.name != SUMMARY_NAME for m in agent.history())


@pytest.mark.parametrize(
    ("message", "limit", "requested"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens.",
            8192,
            9000,
        ),
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 "
            "tokens (4000 in the messages, 1000 in the completion).",
            3096,
            4000,
        ),
        ("prompt is too long: 210,000 tokens > 200,000 maximum", 200_000, 210_000),
        ("request (9000 tokens) exceeds the available context size (8192 tokens)", 8192, 9000),
        ("Range of input length should be [1, 30720]", 30720, None),
        ("the input length exceeds the context length", None, None),
    ],
)
def test_the_limit_is_read_from_each_providers_wording(
    message: str, limit: int | None, requested: int | None
) -> None:
    found = overflow_limit(ContextOverflowError(message))
    if limit is None:
        assert found is None
    else:
        assert found is not None and (found.limit, found.requested) == (limit, requested)
