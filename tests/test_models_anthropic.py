"""AnthropicModel against hand-written Messages API answers through httpx.MockTransport."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memdir.errors import ConfigError, ContextOverflowError, ModelError
from memdir.messages import Msg, ThinkingBlock, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, ChatModel, ToolSpec, Usage, _http

TOOL = ToolSpec(
    name="read_file",
    description="Read a UTF-8 file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)

MESSAGE_WITH_TOOLS = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Two files to read.", "signature": "EqQBCkYIBxgCKkA="},
        {"type": "text", "text": "Reading both files."},
        {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "toolu_02", "name": "read_file", "input": {"path": "b.py"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 120,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 2000,
        "output_tokens": 95,
    },
}


class Recorder:
    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    def payload(self, i: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[i].content)  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    waited: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(_http, "_sleep", fake_sleep)
    yield waited


def make(rec: Recorder, **kw: Any) -> AnthropicModel:
    kw.setdefault("api_key", "sk-ant-test")
    client = httpx.AsyncClient(transport=httpx.MockTransport(rec))
    return AnthropicModel("claude-sonnet-4-5", client=client, **kw)


async def test_request_shape_and_tool_use_response() -> None:
    rec = Recorder(httpx.Response(200, json=MESSAGE_WITH_TOOLS))
    model = make(rec)
    assert isinstance(model, ChatModel)
    history = [
        Msg.system("You are terse."),
        Msg.user("Compare a.py and b.py"),
    ]
    resp = await model.generate(history, tools=[TOOL], system="Answer in English.")
    request = rec.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = rec.payload()
    assert body["system"] == "Answer in English.\n\nYou are terse."
    assert body["max_tokens"] == 4096
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Compare a.py and b.py"}]}
    ]
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a UTF-8 file.", "input_schema": TOOL.parameters}
    ]
    assert resp.message.content[0] == ThinkingBlock(
        thinking="Two files to read.", signature="EqQBCkYIBxgCKkA="
    )
    assert resp.text == "Reading both files."
    assert [c.id for c in resp.tool_calls] == ["toolu_01", "toolu_02"]
    # The whole prompt was 2120 tokens: cached parts count towards the request's size.
    assert resp.usage == Usage(input_tokens=2120, output_tokens=95)
    assert resp.stop_reason == "tool_use"
    assert model.context_window == 200_000


async def test_tool_results_thinking_and_leading_assistant_turn() -> None:
    rec = Recorder(
        httpx.Response(
            200,
            json={
                "content": [{"type": "text", "text": "Both fine."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 50, "output_tokens": 4},
            },
        )
    )
    calls = [
        ToolUseBlock(id="toolu_01", name="read_file", input={"path": "a.py"}),
        ToolUseBlock(id="toolu_02", name="read_file", input={"path": "b.py"}),
    ]
    history = [
        Msg(
            role="assistant",
            content=(ThinkingBlock(thinking="t", signature="sig"), *calls),
        ),
        Msg(
            role="tool",
            content=(
                ToolResultBlock(tool_use_id="toolu_01", output="x = 1"),
                ToolResultBlock(tool_use_id="toolu_02", output="boom", is_error=True),
            ),
        ),
    ]
    resp = await make(rec).generate(history, max_output_tokens=100)
    body = rec.payload()
    assert body["max_tokens"] == 100
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "t",
        "signature": "sig",
    }
    assert body["messages"][2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_02",
        "content": "boom",
        "is_error": True,
    }
    assert resp.text == "Both fine."


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 213462 tokens > 200000 maximum",
                },
            },
        ),
        (
            413,
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum allowed number of bytes.",
                },
            },
        ),
    ],
)
async def test_context_overflow(status: int, body: dict[str, Any], sleeps: list[float]) -> None:
    rec = Recorder(httpx.Response(status, json=body))
    with pytest.raises(ContextOverflowError) as info:
        await make(rec).generate([Msg.user("long")])
    assert info.value.status_code == status
    assert len(rec.requests) == 1 and sleeps == []


async def test_overloaded_and_rate_limited_are_retried(sleeps: list[float]) -> None:
    overloaded = httpx.Response(
        529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    limited = httpx.Response(
        429,
        headers={"retry-after": "3"},
        json={
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed the rate limit for your organization "
                "of 40,000 input tokens per minute.",
            },
        },
    )
    ok = httpx.Response(200, json={"content": [{"type": "text", "text": "ok"}]})
    rec = Recorder(overloaded, limited, ok)
    resp = await make(rec).generate([Msg.user("x")])
    assert resp.text == "ok" and resp.usage is None
    assert len(rec.requests) == 3
    assert sleeps[1] == 3.0


async def test_other_errors() -> None:
    rec = Recorder(
        httpx.Response(
            400,
            json={
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "max_tokens: must be > 0"},
            },
        ),
        httpx.Response(200, json={"id": "msg", "type": "message"}),
    )
    model = make(rec)
    with pytest.raises(ModelError, match="HTTP 400: max_tokens: must be > 0"):
        await model.generate([Msg.user("x")])
    with pytest.raises(ModelError, match="without content"):
        await model.generate([Msg.user("x")])


def test_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicModel("claude-sonnet-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    model = AnthropicModel("claude-sonnet-4-5")
    assert model.base_url == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"model": None}, "needs a model name"),
        ({"max_tokens": 0}, "max_tokens must be a positive int"),
        ({"base_url": "api.anthropic.com"}, "http:// or https://"),
    ],
)
def test_bad_constructor_arguments_are_config_errors(kw: dict[str, Any], message: str) -> None:
    args = {"model": "claude-sonnet-4-5", "api_key": "k", **kw}
    with pytest.raises(ConfigError, match=message):
        AnthropicModel(**args)
