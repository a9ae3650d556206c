"""model_from_string and the known context windows."""

from __future__ import annotations

import pytest

from memdir.errors import ConfigError
from memdir.models import (
    AnthropicModel,
    ChatModel,
    ExtractiveModel,
    OpenAIChatModel,
    known_context_window,
    model_from_string,
)

KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*KEYS, "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def test_builds_each_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-ds")
    openai = model_from_string("openai:gpt-4o-mini")
    assert isinstance(openai, OpenAIChatModel) and openai.name == "openai:gpt-4o-mini"
    claude = model_from_string("anthropic:claude-sonnet-4-5", max_tokens=1000)
    assert isinstance(claude, AnthropicModel) and claude.context_window == 200_000
    extractive = model_from_string("extractive")
    assert isinstance(extractive, ExtractiveModel) and extractive.name == "extractive"
    deepseek = model_from_string("deepseek:deepseek-chat")
    assert isinstance(deepseek, OpenAIChatModel)
    assert deepseek.base_url == "https://api.deepseek.com/v1" and deepseek.api_key == "sk-ds"
    ollama = model_from_string("ollama:llama3.1:8b", context_window=8192)
    assert isinstance(ollama, OpenAIChatModel)
    assert (ollama.model, ollama.base_url) == ("llama3.1:8b", "http://localhost:11434/v1")
    assert ollama.api_key is None and ollama.context_window == 8192
    # Named as typed, so errors and reports say which service answered.
    assert (deepseek.name, ollama.name) == ("deepseek:deepseek-chat", "ollama:llama3.1:8b")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dash")
    assert model_from_string("DashScope:qwen-plus").name == "dashscope:qwen-plus"
    for model in (openai, claude, extractive, deepseek, ollama):
        assert isinstance(model, ChatModel)


def test_openai_prefix_honours_base_url_without_key() -> None:
    model = model_from_string(
        "openai:Qwen/Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1"
    )
    assert isinstance(model, OpenAIChatModel)
    assert model.base_url == "http://localhost:8000/v1" and model.api_key is None
    assert model.context_window == 32_768


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "openai:gpt-4o-mini",
            "OPENAI_API_KEY is not set: export it, pass api_key=, or use --model extractive",
        ),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY is not set"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY is not set"),
        ("dashscope:qwen-plus", "DASHSCOPE_API_KEY is not set"),
        ("gemini:pro", "unknown model provider 'gemini'"),
        ("openai:", "no model name in 'openai:'"),
        ("gpt-4o", "unknown model provider 'gpt-4o'"),
    ],
)
def test_errors_are_one_line_config_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        model_from_string(spec)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bad option for 'extractive'"):
        model_from_string("extractive", temperature=0.2)


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4", 8_192),
        ("claude-3-5-haiku-latest", 200_000),
        ("deepseek-chat", 128_000),
        ("qwen-plus", 131_072),
        ("Qwen/Qwen2.5-72B-Instruct", 32_768),
        ("llama3.1:8b", None),
        ("my-finetune", None),
    ],
)
def test_known_context_windows(name: str, window: int | None) -> None:
    assert known_context_window(name) == window


@pytest.mark.parametrize("spec", [None, 123, b"openai:gpt-4o"])
def test_a_spec_that_is_not_a_string_is_a_config_error(spec: object) -> None:
    with pytest.raises(ConfigError, match="model spec must be a string"):
        model_from_string(spec)  # type: ignore[arg-type]
