"""CompactionConfig / TruncateArgsConfig validation, and context-overflow recognition."""

from __future__ import annotations

import dataclasses

import pytest

from memdir.compaction import (
    ClearToolResultsConfig,
    CompactionConfig,
    TruncateArgsConfig,
    is_context_overflow,
)
from memdir.errors import ConfigError, ContextOverflowError, ModelError

# -- config --------------------------------------------------------------------------------------


def test_defaults_match_the_documented_names() -> None:
    cfg = CompactionConfig()
    assert (cfg.trigger_messages, cfg.trigger_tokens, cfg.keep_messages, cfg.keep_tokens) == (
        50,
        80_000,
        20,
        0,
    )
    assert cfg.flush_before_compact and cfg.offload_before_compact
    assert cfg.summary_prompt is None and cfg.truncate_args is None and cfg.model is None
    assert isinstance(cfg.clear_tool_results, ClearToolResultsConfig)
    ta = TruncateArgsConfig()
    assert (ta.trigger_messages, ta.trigger_tokens, ta.keep_messages, ta.max_arg_length) == (
        25,
        40_000,
        20,
        2_000,
    )
    assert ta.truncation_text == "...(argument truncated)"
    assert ta.head_chars >= 200  # a useful head, not 20 characters


def test_configs_are_frozen_and_keyword_only() -> None:
    cfg = CompactionConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.keep_messages = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        CompactionConfig(50)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"trigger_messages": -1}, "trigger_messages must be >= 0"),
        ({"keep_messages": True}, "keep_messages must be an integer"),
        ({"trigger_messages": 10, "keep_messages": 10}, "must be smaller than trigger_messages"),
        ({"trigger_tokens": 1000, "keep_tokens": 2000}, "must be smaller than trigger_tokens"),
        ({"summary_prompt": "no placeholder"}, "{messages}"),
        ({"summary_timeout": 0}, "summary_timeout"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"model": "gpt-4o"}, "ChatModel"),
        ({"truncate_args": {"max_arg_length": 10}}, "TruncateArgsConfig"),
        ({"flush_before_compact": "yes"}, "True or False"),
    ],
)
def test_bad_values_raise_config_error_naming_the_field(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        CompactionConfig(**kwargs)
    assert fragment in str(info.value)


def test_zero_triggers_are_allowed_and_disable() -> None:
    cfg = CompactionConfig(trigger_messages=0, trigger_tokens=0)
    assert cfg.trigger_messages == 0 and cfg.trigger_tokens == 0


def test_truncate_and_clear_configs_validate() -> None:
    with pytest.raises(ConfigError, match="head_chars"):
        TruncateArgsConfig(max_arg_length=100, head_chars=100)
    with pytest.raises(ConfigError, match="truncation_text"):
        TruncateArgsConfig(truncation_text="  ")
    with pytest.raises(ConfigError, match="preview_chars"):
        ClearToolResultsConfig(min_chars=100, preview_chars=200)
    with pytest.raises(ConfigError, match="excluded_tools"):
        ClearToolResultsConfig(excluded_tools="read_file")  # type: ignore[arg-type]
    cfg = ClearToolResultsConfig(excluded_tools={"a", "b"})  # type: ignore[arg-type]
    assert cfg.excluded_tools == frozenset({"a", "b"})


def test_hard_limit_leaves_reserve_and_handles_small_windows() -> None:
    cfg = CompactionConfig(reserve_tokens=20_000)
    assert cfg.hard_limit(128_000) == 108_000
    assert cfg.hard_limit(8_000) == 6_000  # a small window reserves a quarter of itself
    assert cfg.hard_limit(32_768) == 24_576
    assert cfg.hard_limit(4_096) == 3_072
    assert cfg.hard_limit(None) is None and cfg.hard_limit(0) is None


# -- overflow ------------------------------------------------------------------------------------

OVERFLOW_MESSAGES = [
    # OpenAI
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "130012 tokens. Please reduce the length of the messages.",
    "Your input exceeds the context window of this model. Please adjust your input and try again.",
    # Anthropic
    "prompt is too long: 208310 tokens > 200000 maximum",
    "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000",
    # vLLM
    "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context "
    "length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
    "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
    # Ollama / LM Studio
    'unexpected status 400: {"error":"the input length exceeds the context length"}',
    "Input length 6491 exceeds context length 1500",
    # llama.cpp
    "request (4476 tokens) exceeds the available context size (4096 tokens)",
    # Gemini, Bedrock, generic
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    "Input is too long for requested model.",
    "too many tokens in the request",
    # DashScope, xAI, LM Studio, MiniMax
    "Range of input length should be [1, 30720]",
    "This model's maximum prompt length is 131072 but the request contains 140000 tokens.",
    "The number of tokens to keep from the initial prompt is greater than the context length",
    "context window exceeds limit",
]


@pytest.mark.parametrize("text", OVERFLOW_MESSAGES)
def test_provider_overflow_messages_are_recognised(text: str) -> None:
    assert is_context_overflow(RuntimeError(text))


@pytest.mark.parametrize("text", OVERFLOW_MESSAGES)
def test_adapters_and_compactor_share_one_overflow_list(text: str) -> None:
    # The adapters turn these HTTP answers into ContextOverflowError; the compactor must
    # recognise the very same texts, and vice versa (one list, no drift).
    from memdir.models._http import is_overflow

    assert is_overflow(400, {"error": {"message": text, "type": "invalid_request_error"}})
    assert is_overflow(400, text)


def test_adapters_never_take_a_rate_limit_for_an_overflow() -> None:
    from memdir.models._http import is_overflow

    tpm = "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000."
    assert not is_overflow(400, {"error": {"message": tpm, "code": "rate_limit_exceeded"}})
    assert not is_overflow(429, {"error": {"message": "maximum context length"}})
    assert is_overflow(413, "Request Entity Too Large")


@pytest.mark.parametrize(
    "text",
    [
        "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000.",
        "Invalid API key provided",
        "max_tokens: 8192 > 4096, which is the maximum allowed number of output tokens",
        "connection reset by peer",
        "",
    ],
)
def test_other_errors_are_not_overflow(text: str) -> None:
    assert not is_context_overflow(RuntimeError(text))


def test_overflow_by_type_status_and_payload() -> None:
    assert is_context_overflow(ContextOverflowError("too long"))
    assert is_context_overflow(ModelError("HTTP 413", status_code=413))
    body = {"error": {"message": "bad request", "type": "exceed_context_size_error", "n_ctx": 4096}}
    assert is_context_overflow(ModelError("HTTP 400", status_code=400, body=body))
    openai = {"error": {"code": "context_length_exceeded", "message": "...", "type": "invalid"}}
    assert is_context_overflow(ModelError("HTTP 400", status_code=400, body=openai))
    limited = ModelError("maximum context length", status_code=429, body=None)
    assert not is_context_overflow(limited)
    assert not is_context_overflow(None)


def test_overflow_is_found_through_the_cause_chain() -> None:
    try:
        try:
            raise ModelError(
                "HTTP 400", status_code=400, body={"error": {"code": "context_length_exceeded"}}
            )
        except ModelError as inner:
            raise RuntimeError("agent step failed") from inner
    except RuntimeError as outer:
        assert is_context_overflow(outer)
    group = ExceptionGroup("several", [ValueError("x"), RuntimeError("prompt is too long: 9 > 8")])
    assert is_context_overflow(group)


def test_cyclic_cause_chain_terminates() -> None:
    a = RuntimeError("first")
    b = RuntimeError("second")
    a.__cause__ = b
    b.__cause__ = a
    b.__context__ = a
    assert not is_context_overflow(a)
    c = RuntimeError("maximum context length is 10")
    b.__context__ = c
    assert is_context_overflow(a)


def test_http_response_status_on_sdk_style_errors() -> None:
    class Response:
        status_code = 413

    class SdkError(Exception):
        response = Response()

    assert is_context_overflow(SdkError("Request Entity Too Large"))
