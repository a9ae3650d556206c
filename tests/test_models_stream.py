"""Streamed answers of the OpenAI-compatible and Anthropic adapters, and through the agent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from memdir.agent import HarnessAgent, ModelDeltaEvent, PostCallEvent, PostReasoningEvent
from memdir.errors import ContextOverflowError, ModelError
from memdir.messages import Msg, ToolResultBlock, ToolUseBlock
from memdir.models import (
    AnthropicModel,
    ModelDelta,
    ModelResponse,
    OpenAIChatModel,
    RetryPolicy,
    StreamingChatModel,
    ToolSpec,
    _http,
)
from memdir.models._stream import TextToolGuard
from memdir.testing import ScriptedModel
from memdir.workspace import Workspace

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _sse(*events: Any, named: bool = False) -> bytes:
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(f"data: {event}\n\n")
        elif named:
            out.append(f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n")
        else:
            out.append(f"data: {json.dumps(event, ensure_ascii=False)}\n\n")
    return "".join(out).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _stream_response(body: bytes) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _openai(handler: Any, **kw: Any) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel("qwen2.5", base_url="http://127.0.0.1:8080/v1", client=client, **kw)


async def _collect(stream: AsyncIterator[Any]) -> tuple[list[ModelDelta], ModelResponse]:
    deltas: list[ModelDelta] = []
    response: ModelResponse | None = None
    async for item in stream:
        if isinstance(item, ModelResponse):
            response = item
        else:
            deltas.append(item)
    assert response is not None
    return deltas, response


async def test_openai_text_thinking_tool_calls_and_usage_stream_in_pieces() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return _stream_response(
            _sse(
                _chunk({"role": "assistant", "reasoning_content": "The user wants "}),
                _chunk({"reasoning_content": "weather."}),
                _chunk({"content": "Let me "}),
                _chunk({"content": "check 北京."}),
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"ci'},
                            }
                        ]
                    }
                ),
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "北京"}'}}]}),
                _chunk({}, finish="tool_calls"),
                {"id": "c1", "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 9}},
                "[DONE]",
            )
        )

    model = _openai(handler)
    assert isinstance(model, StreamingChatModel)
    deltas, response = await _collect(model.stream([_user("weather in Beijing?")], tools=[WEATHER]))
    assert sent[0]["stream"] is True and sent[0]["stream_options"] == {"include_usage": True}
    assert "".join(d.text for d in deltas if d.kind == "text") == "Let me check 北京."
    assert "".join(d.text for d in deltas if d.kind == "thinking") == "The user wants weather."
    calls = [d for d in deltas if d.kind == "tool_call"]
    assert calls[0].tool_name == "get_weather" and calls[0].tool_call_id == "call_1"
    assert "".join(d.text for d in calls) == '{"city": "北京"}'
    assert response.text == "Let me check 北京."
    (use,) = response.tool_calls
    assert (use.id, use.name, use.input) == ("call_1", "get_weather", {"city": "北京"})
    assert response.stop_reason == "tool_calls"
    assert response.usage is not None and response.usage.input_tokens == 50


def _user(text: str) -> Msg:
    return Msg.user(text)


async def test_a_tool_call_written_as_text_is_not_shown_and_becomes_a_call() -> None:
    pieces = ["I will look", " it up.\n<tool", '_call>{"name": "get_weather", ', '"arguments": ']
    pieces += ['{"city": "Oslo"}}</tool_call>']

    def handler(request: httpx.Request) -> httpx.Response:
        chunks = [_chunk({"content": p}) for p in pieces]
        return _stream_response(_sse(*chunks, _chunk({}, finish="stop"), "[DONE]"))

    deltas, response = await _collect(_openai(handler).stream([_user("Oslo?")], tools=[WEATHER]))
    shown = "".join(d.text for d in deltas if d.kind == "text")
    assert shown == "I will look it up.\n"
    assert "<tool" not in shown
    (use,) = response.tool_calls
    assert use.input == {"city": "Oslo"} and response.stop_reason == "tool_calls"


async def test_a_call_alone_in_a_json_fence_is_not_shown_and_becomes_a_call() -> None:
    pieces = [
        "```",
        "json\n",
        '{"name": "get_weather", ',
        '"arguments": {"city": "Oslo"}}',
        "\n```",
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        chunks = [_chunk({"content": p}) for p in pieces]
        return _stream_response(_sse(*chunks, _chunk({}, finish="stop"), "[DONE]"))

    deltas, response = await _collect(_openai(handler).stream([_user("Oslo?")], tools=[WEATHER]))
    assert not [d for d in deltas if d.kind == "text"]
    (use,) = response.tool_calls
    assert use.input == {"city": "Oslo"}


async def test_a_code_block_answer_is_shown_once_it_ends() -> None:
    pieces = ["```python\n", "print(1)\n", "```"]

    def handler(request: httpx.Request) -> httpx.Response:
        chunks = [_chunk({"content": p}) for p in pieces]
        return _stream_response(_sse(*chunks, _chunk({}, finish="stop"), "[DONE]"))

    deltas, response = await _collect(_openai(handler).stream([_user("code?")], tools=[WEATHER]))
    assert "".join(d.text for d in deltas if d.kind == "text") == "".join(pieces)
    assert response.text == "".join(pieces) and not response.tool_calls


def test_the_guard_shows_text_that_only_looked_like_markup() -> None:
    guard = TextToolGuard()
    shown = guard.push("<to") + guard.push("day is sunny") + guard.push("\n<") + guard.flush()
    assert shown == "<today is sunny\n<"
    inline = TextToolGuard()
    assert inline.push("use `<tool_call>` tags") + inline.flush() == "use `<tool_call>` tags"


async def test_a_server_that_ignores_the_stream_flag_still_answers() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        message = {"role": "assistant", "content": "whole answer"}
        return httpx.Response(
            200, json={"choices": [{"message": message, "finish_reason": "stop"}]}
        )

    deltas, response = await _collect(_openai(handler).stream([_user("hi")]))
    assert [d.text for d in deltas] == ["whole answer"]
    assert response.text == "whole answer"


async def test_errors_before_the_stream_are_retried_or_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(_http, "_sleep", no_wait)
    answers = iter(
        [
            httpx.Response(429, json={"error": {"message": "slow down"}}),
            _stream_response(_sse(_chunk({"content": "fine"}, finish="stop"), "[DONE]")),
        ]
    )
    model = _openai(lambda request: next(answers), retry=RetryPolicy(max_retries=2))
    _, response = await _collect(model.stream([_user("hi")]))
    assert response.text == "fine" and len(waits) == 1

    def overflow(request: httpx.Request) -> httpx.Response:
        error = {
            "message": "maximum context length is 4096 tokens",
            "code": "context_length_exceeded",
        }
        return httpx.Response(400, json={"error": error})

    with pytest.raises(ContextOverflowError):
        await _collect(_openai(overflow).stream([_user("hi")]))


async def test_an_error_in_the_middle_of_the_stream_is_a_model_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = _sse(_chunk({"content": "half"}), {"error": {"message": "worker crashed"}})
        return _stream_response(body)

    with pytest.raises(ModelError, match="worker crashed"):
        await _collect(_openai(handler).stream([_user("hi")]))


async def test_anthropic_text_thinking_and_tool_use_stream_in_pieces() -> None:
    def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": block}

    def delta(index: int, kind: str, **piece: str) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": {"type": kind, **piece}}

    tool = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 40, "output_tokens": 1}}},
        start(0, {"type": "thinking", "thinking": ""}),
        delta(0, "thinking_delta", thinking="Plan."),
        delta(0, "signature_delta", signature="sig"),
        {"type": "content_block_stop", "index": 0},
        start(1, {"type": "text", "text": ""}),
        delta(1, "text_delta", text="Checking "),
        delta(1, "text_delta", text="now."),
        start(2, tool),
        delta(2, "input_json_delta", partial_json='{"city": '),
        delta(2, "input_json_delta", partial_json='"Paris"}'),
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return _stream_response(_sse(*events, named=True))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", client=client)
    deltas, response = await _collect(model.stream([_user("Paris?")], tools=[WEATHER]))
    assert sent[0]["stream"] is True
    assert "".join(d.text for d in deltas if d.kind == "text") == "Checking now."
    assert [d.text for d in deltas if d.kind == "thinking"] == ["Plan."]
    first_call = next(d for d in deltas if d.kind == "tool_call")
    assert (first_call.tool_call_id, first_call.tool_name) == ("toolu_1", "get_weather")
    assert response.text == "Checking now."
    (use,) = response.tool_calls
    assert (use.id, use.input) == ("toolu_1", {"city": "Paris"})
    assert response.stop_reason == "tool_use"
    assert response.usage is not None and response.usage.output_tokens == 30


async def test_agent_stream_yields_the_text_as_it_is_written(ws: Workspace) -> None:
    agent = HarnessAgent(
        model=ScriptedModel(["The capital of France is Paris."]),
        workspace=ws,
        memory_flush=False,
        maintenance=None,
    )
    events = [e async for e in agent.stream("Capital of France?")]
    deltas = [e for e in events if isinstance(e, ModelDeltaEvent)]
    assert len(deltas) > 3
    assert "".join(e.delta.text for e in deltas) == "The capital of France is Paris."
    post = next(i for i, e in enumerate(events) if isinstance(e, PostReasoningEvent))
    assert all(events.index(d) < post for d in deltas)  # pieces come before the whole answer
    assert isinstance(events[-1], PostCallEvent)
    assert events[-1].reply.text == "The capital of France is Paris."


async def test_agent_streams_through_the_openai_adapter(ws: Workspace) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body.get("stream") is True
        return _stream_response(
            _sse(_chunk({"content": "Hel"}), _chunk({"content": "lo!"}, finish="stop"), "[DONE]")
        )

    agent = HarnessAgent(model=_openai(handler), workspace=ws, memory_flush=False, maintenance=None)
    texts = [e.delta.text async for e in agent.stream("hi") if isinstance(e, ModelDeltaEvent)]
    assert texts == ["Hel", "lo!"]
    assert agent.history()[-1].text == "Hello!"


# -- a real socket: the timeout bounds each wait, not the whole answer --------------------


async def _slow_server(pieces: list[str], gap: float, stall: float = 0.0) -> tuple[Any, int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        await writer.drain()
        for i, piece in enumerate(pieces):
            if stall and i == len(pieces) // 2:
                await asyncio.sleep(stall)
            writer.write(_sse(_chunk({"content": piece})))
            await writer.drain()
            await asyncio.sleep(gap)
        writer.write(_sse(_chunk({}, finish="stop"), "[DONE]"))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_slow_answer_that_keeps_coming_is_not_cut_off() -> None:
    pieces = [f"w{i} " for i in range(30)]
    server, port = await _slow_server(pieces, gap=0.05)  # 1.5 s in all, a piece every 50 ms
    async with server:
        model = OpenAIChatModel(
            "local", base_url=f"http://127.0.0.1:{port}/v1", api_key="", timeout=1.0
        )
        _, response = await _collect(model.stream([_user("go")]))
    assert response.text == "".join(pieces)


async def test_a_stream_that_stops_moving_times_out() -> None:
    server, port = await _slow_server(["a ", "b ", "c ", "d "], gap=0.0, stall=3.0)
    async with server:
        model = OpenAIChatModel(
            "local",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="",
            timeout=0.5,
            retry=RetryPolicy(max_retries=0),
        )
        with pytest.raises(ModelError, match="stopped sending"):
            await _collect(model.stream([_user("go")]))


async def test_an_empty_stream_is_asked_again_without_streaming() -> None:
    # llama-cpp-python answers an over-long streamed request with "200 OK" and no events.
    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return _stream_response(b"")
        error = {
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 4529 tokens (4529 in the messages, None in the completion).",
            "code": "context_length_exceeded",
        }
        return httpx.Response(400, json={"error": error})

    with pytest.raises(ContextOverflowError):
        await _collect(_openai(handler).stream([_user("a long story")]))


async def test_an_answer_cut_short_by_the_server_is_an_error_not_an_answer() -> None:
    # Another request arrived: the server ends the stream with [DONE] and no finish reason.
    def handler(request: httpx.Request) -> httpx.Response:
        return _stream_response(_sse(_chunk({"content": "1\n2\n3\n4"}), "[DONE]"))

    with pytest.raises(ModelError, match="ended before it was finished"):
        await _collect(_openai(handler).stream([_user("count to 60")]))


async def test_a_tool_call_turn_is_sent_with_empty_text_not_null() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        message = {"role": "assistant", "content": "ok"}
        return httpx.Response(
            200, json={"choices": [{"message": message, "finish_reason": "stop"}]}
        )

    call = Msg.assistant(tool_calls=[ToolUseBlock(id="c1", name="get_weather", input={})])
    result = Msg(role="tool", content=(ToolResultBlock(tool_use_id="c1", output="sunny"),))
    await _openai(handler).generate([_user("weather?"), call, result], tools=[WEATHER])
    assistant = next(m for m in sent[0]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"]


async def test_a_request_the_server_calls_invalid_is_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    async def no_wait(seconds: float) -> None:
        pass

    monkeypatch.setattr(_http, "_sleep", no_wait)

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        detail = "7 validation errors: Input should be a valid string ('content', None)"
        return httpx.Response(500, json={"error": {"message": detail}})

    with pytest.raises(ModelError, match="validation errors"):
        await _openai(handler, retry=RetryPolicy(max_retries=3)).generate([_user("hi")])
    assert len(calls) == 1
