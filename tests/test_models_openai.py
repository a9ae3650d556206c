"""OpenAIChatModel against hand-written server answers through httpx.MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from memdir.errors import ConfigError, ContextOverflowError, ModelError
from memdir.messages import (
    MISSING_RESULT_TEXT,
    MessageFormatError,
    Msg,
    ThinkingBlock,
    ToolUseBlock,
)
from memdir.models import ChatModel, OpenAIChatModel, RetryPolicy, ToolSpec, Usage, _http

Handler = Callable[[httpx.Request], httpx.Response]

TOOL = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)

COMPLETION_WITH_TOOLS = {
    "id": "chatcmpl-9",
    "object": "chat.completion",
    "created": 1764493200,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_Paris",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_Beijing",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "北京"}'},
                    },
                ],
                "refusal": None,
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 40, "total_tokens": 122},
}


def text_completion(text: str, **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


class Recorder:
    """A MockTransport handler that answers from a queue and keeps the requests."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def payload(self, i: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[i].content)  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    waited: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(_http, "_sleep", fake_sleep)
    yield waited


def make(handler: Recorder, **kw: Any) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    kw.setdefault("api_key", "sk-test")
    return OpenAIChatModel("gpt-4o-mini", client=client, **kw)


async def test_request_and_parallel_tool_call_response() -> None:
    rec = Recorder(httpx.Response(200, json=COMPLETION_WITH_TOOLS))
    model = make(rec)
    assert isinstance(model, ChatModel)
    resp = await model.generate(
        [Msg.user("Weather in Paris and Beijing?")],
        tools=[TOOL],
        system="Be brief.",
        max_output_tokens=256,
    )
    request = rec.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = rec.payload()
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Beijing?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": TOOL.parameters,
            },
        }
    ]
    assert body["max_completion_tokens"] == 256  # OpenAI's current name for the cap
    assert resp.tool_calls == (
        ToolUseBlock(id="call_Paris", name="get_weather", input={"city": "Paris"}),
        ToolUseBlock(id="call_Beijing", name="get_weather", input={"city": "北京"}),
    )
    assert resp.text == ""
    assert resp.usage == Usage(input_tokens=82, output_tokens=40)
    assert resp.stop_reason == "tool_calls"
    assert model.context_window == 128_000
    assert model.name == "openai:gpt-4o-mini"


async def test_compatible_server_without_key_and_reasoning_content() -> None:
    rec = Recorder(
        httpx.Response(200, json=text_completion("42", reasoning_content="6 times 7 is 42"))
    )
    model = make(rec, api_key=None, base_url="http://localhost:8000/v1", extra_body={"top_p": 0.9})
    resp = await model.generate([Msg.user("6*7?")], max_output_tokens=5)
    assert str(rec.requests[0].url) == "http://localhost:8000/v1/chat/completions"
    assert "authorization" not in rec.requests[0].headers
    assert rec.payload()["max_tokens"] == 5  # what vLLM, Ollama and llama.cpp accept
    assert rec.payload()["top_p"] == 0.9
    assert resp.message.content[0] == ThinkingBlock(thinking="6 times 7 is 42")
    assert resp.text == "42"


async def test_env_base_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    rec = Recorder(httpx.Response(200, json=text_completion("hi")))
    model = OpenAIChatModel(
        "llama3.1:8b", client=httpx.AsyncClient(transport=httpx.MockTransport(rec))
    )
    await model.generate([Msg.user("hello")])
    assert str(rec.requests[0].url) == "http://127.0.0.1:11434/v1/chat/completions"
    assert rec.requests[0].headers["authorization"] == "Bearer sk-env"
    assert model.context_window is None  # a local server's context is whatever it was started with


def test_missing_key_for_openai_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY is not set.*--model extractive"):
        OpenAIChatModel("gpt-4o-mini")


async def test_message_names_are_made_acceptable_to_openai() -> None:
    rec = Recorder(httpx.Response(200, json=text_completion("hi")))
    await make(rec).generate(
        [Msg.user("a", name="Alice Chen"), Msg.user("b", name="张三"), Msg.user("c", name="bob_1")]
    )
    messages = rec.payload()["messages"]
    assert [m.get("name") for m in messages] == ["Alice_Chen", None, "bob_1"]


async def test_unanswered_tool_call_is_closed_before_sending() -> None:
    rec = Recorder(httpx.Response(200, json=text_completion("ok")))
    call = ToolUseBlock(id="call_1", name="get_weather", input={"city": "Oslo"})
    await make(rec).generate([Msg.user("go"), Msg.assistant(tool_calls=[call]), Msg.user("and?")])
    messages = rec.payload()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": MISSING_RESULT_TEXT}


async def test_429_is_retried_with_retry_after(sleeps: list[float]) -> None:
    rate_limited = httpx.Response(
        429,
        headers={"retry-after": "2"},
        json={
            "error": {
                "message": "Rate limit reached for gpt-4o-mini on tokens per min (TPM): "
                "Limit 200000, Used 199000, Requested 5000.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
    )
    rec = Recorder(rate_limited, httpx.Response(200, json=text_completion("done")))
    resp = await make(rec).generate([Msg.user("x")])
    assert resp.text == "done"
    assert len(rec.requests) == 2
    assert sleeps == [2.0]


async def test_5xx_retries_are_bounded(sleeps: list[float]) -> None:
    busy = httpx.Response(503, json={"error": {"message": "The server is overloaded"}})
    rec = Recorder(busy, busy, busy)
    model = make(rec, retry=RetryPolicy(max_retries=2, initial_backoff=1.0, max_backoff=10.0))
    with pytest.raises(ModelError, match=r"HTTP 503.*overloaded.*after 3 attempts") as info:
        await model.generate([Msg.user("x")])
    assert info.value.status_code == 503
    assert info.value.body == {"error": {"message": "The server is overloaded"}}
    assert len(rec.requests) == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0


async def test_timeouts_and_network_errors_become_model_errors(sleeps: list[float]) -> None:
    rec = Recorder(httpx.ReadTimeout("slow"), httpx.ConnectError("refused"))
    model = make(rec, retry=RetryPolicy(max_retries=1), timeout=7)
    with pytest.raises(ModelError, match="cannot reach openai:gpt-4o-mini"):
        await model.generate([Msg.user("x")])
    rec = Recorder(httpx.ReadTimeout("slow"))
    with pytest.raises(ModelError, match="did not answer within 7s"):
        await make(rec, retry=RetryPolicy(max_retries=0), timeout=7).generate([Msg.user("x")])


async def test_client_errors_are_not_retried() -> None:
    rec = Recorder(
        httpx.Response(
            401,
            json={
                "error": {
                    "message": "Incorrect API key provided: sk-test.",
                    "code": "invalid_api_key",
                }
            },
        )
    )
    with pytest.raises(ModelError, match="HTTP 401: Incorrect API key") as info:
        await make(rec).generate([Msg.user("x")])
    assert info.value.status_code == 401
    assert not isinstance(info.value, ContextOverflowError)
    assert len(rec.requests) == 1


OVERFLOWS = {
    "openai": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130211 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "vllm": (
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 32768 tokens. However, you "
            "requested 34000 tokens (33000 in the messages, 1000 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "ollama": (
        400,
        {"error": {"message": "the input length exceeds the context length", "type": "api_error"}},
    ),
    "llama.cpp": (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
    ),
    "dashscope": (
        400,
        {
            "error": {
                "code": "invalid_parameter_error",
                "message": "<400> InternalError.Algo.InvalidParameter: Range of input length "
                "should be [1, 129024]",
                "type": "invalid_request_error",
            }
        },
    ),
    "deepseek": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 131072 tokens. However, you "
                "requested 140000 tokens (139000 in the messages, 1000 in the completion).",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        },
    ),
}


@pytest.mark.parametrize("server", sorted(OVERFLOWS))
async def test_context_overflow_is_recognised(server: str, sleeps: list[float]) -> None:
    status, body = OVERFLOWS[server]
    rec = Recorder(httpx.Response(status, json=body))
    with pytest.raises(ContextOverflowError) as info:
        await make(rec).generate([Msg.user("very long")])
    assert info.value.status_code == status
    assert info.value.body == body
    assert len(rec.requests) == 1 and sleeps == []  # no point in retrying the same request


async def test_unusable_success_answers() -> None:
    rec = Recorder(
        httpx.Response(200, json={"error": {"message": "upstream provider failed"}}),
        httpx.Response(200, json={"id": "x", "choices": []}),
        httpx.Response(200, text="<html>gateway</html>"),
    )
    model = make(rec)
    with pytest.raises(ModelError, match="unusable answer: upstream provider failed"):
        await model.generate([Msg.user("x")])
    with pytest.raises(ModelError, match="without choices"):
        await model.generate([Msg.user("x")])
    with pytest.raises(ModelError, match="unusable answer"):
        await model.generate([Msg.user("x")])


def test_retry_policy_validates() -> None:
    with pytest.raises(ConfigError, match="non-negative"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ConfigError, match="max_retries"):
        RetryPolicy(max_retries="3")  # type: ignore[arg-type]
    assert RetryPolicy(max_backoff=5).delay(1, retry_after=60) == 5


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"model": 123}, "needs a model name"),
        ({"base_url": "localhost:11434/v1"}, "http:// or https://"),
        ({"base_url": 5}, "http:// or https://"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"context_window": "128k"}, "context_window must be a positive int"),
        ({"retry": 3}, "retry must be a RetryPolicy"),
        ({"client": object()}, "client must be an httpx.AsyncClient"),
    ],
)
def test_bad_constructor_arguments_are_config_errors(kw: dict[str, Any], message: str) -> None:
    args = {"model": "gpt-4o-mini", "api_key": "sk-test", **kw}
    with pytest.raises(ConfigError, match=message):
        OpenAIChatModel(**args)


async def test_a_base_url_without_scheme_fails_at_once_not_after_retries(
    sleeps: list[float],
) -> None:
    with pytest.raises(ConfigError, match="http://"):
        OpenAIChatModel("llama3.1", base_url="localhost:11434/v1")
    assert sleeps == []


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m.generate(None), MessageFormatError, "takes a list"),
        (lambda m: m.generate(Msg.user("x")), MessageFormatError, "takes a list"),
        (lambda m: m.generate([Msg.user("x")], tools=[{"name": "f"}]), ConfigError, "ToolSpec"),
        (lambda m: m.generate([Msg.user("x")], system=5), ConfigError, "system"),
        (lambda m: m.generate([Msg.user("x")], max_output_tokens=0), ConfigError, "positive"),
    ],
)
async def test_bad_request_arguments_fail_before_any_request(
    call: Any, error: type[Exception], message: str
) -> None:
    rec = Recorder()
    with pytest.raises(error, match=message):
        await call(make(rec))
    assert rec.requests == []


@pytest.mark.parametrize("base_url", ["http://", "https:///v1", "ftp://example.com/v1"])
def test_a_base_url_without_a_host_is_a_config_error(base_url: str) -> None:
    with pytest.raises(ConfigError, match="http:// or https://"):
        OpenAIChatModel("m", base_url=base_url)


async def test_an_undecodable_answer_is_a_model_error(sleeps: list[float]) -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.DecodingError("invalid gzip data", request=request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(broken))
    model = OpenAIChatModel(
        "m", base_url="http://llm.local/v1", client=client, retry=RetryPolicy(max_retries=1)
    )
    with pytest.raises(ModelError, match="invalid gzip data"):
        await model.generate([Msg.user("x")])
    assert len(sleeps) == 1
