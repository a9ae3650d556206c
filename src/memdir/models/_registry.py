"""``model_from_string``: build a :class:`ChatModel` from ``"provider:model"``."""

from __future__ import annotations

import os
from typing import Any

from memdir.errors import ConfigError
from memdir.models._base import ChatModel
from memdir.models.anthropic import AnthropicModel
from memdir.models.extractive import ExtractiveModel
from memdir.models.openai import OpenAIChatModel

__all__ = ["PROVIDERS", "model_from_string"]

# OpenAI-compatible services reachable by a short prefix: (base URL, key variable or None).
_COMPATIBLE: dict[str, tuple[str, str | None]] = {
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "dashscope": ("https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    "ollama": ("http://localhost:11434/v1", None),
}
PROVIDERS = ("openai", "anthropic", *_COMPATIBLE, "extractive")
"""The prefixes :func:`model_from_string` understands."""


def model_from_string(spec: str, **kwargs: Any) -> ChatModel:
    """Build a model from a ``"provider:model"`` string.

    ``"openai:gpt-4o-mini"`` (any OpenAI-compatible server with ``base_url=`` or
    ``$OPENAI_BASE_URL``), ``"anthropic:claude-sonnet-4-5"``, ``"ollama:llama3.1"``,
    ``"deepseek:deepseek-chat"``, ``"dashscope:qwen-plus"``, or ``"extractive"`` (offline).
    Keyword arguments go to the model's constructor.

    Raises:
        ConfigError: unknown provider, missing model name, missing API key, or bad option.
    """
    if not isinstance(spec, str):
        raise ConfigError(
            f"model spec must be a string such as 'openai:gpt-4o-mini', not {type(spec).__name__}"
        )
    provider, _, name = spec.strip().partition(":")
    provider = provider.lower()
    name = name.strip()
    if provider == "extractive":
        return _build(ExtractiveModel, spec, **kwargs)
    if provider not in PROVIDERS:
        raise ConfigError(
            f"unknown model provider {provider!r} in {spec!r}: use one of "
            + ", ".join(f"{p}:" if p != "extractive" else p for p in PROVIDERS)
        )
    if not name:
        raise ConfigError(f"no model name in {spec!r}: write {provider}:<model>")
    if provider == "anthropic":
        return _build(AnthropicModel, spec, name, **kwargs)
    if provider in _COMPATIBLE:
        base_url, key_var = _COMPATIBLE[provider]
        kwargs.setdefault("base_url", base_url)
        if key_var is None:
            kwargs.setdefault("api_key", "")  # never send $OPENAI_API_KEY to a local server
        elif "api_key" not in kwargs:
            kwargs["api_key"] = os.environ.get(key_var)
            if not kwargs["api_key"]:
                raise ConfigError(
                    f"{key_var} is not set: export it, pass api_key=, or use --model extractive"
                )
    model = _build(OpenAIChatModel, spec, name, **kwargs)
    # Errors, logs and reports show the name as typed ("ollama:qwen3"), not the protocol.
    model.name = f"{provider}:{name}"
    return model


def _build(cls: type[Any], spec: str, *args: Any, **kwargs: Any) -> ChatModel:
    try:
        model: ChatModel = cls(*args, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad option for {spec!r}: {exc}") from exc
    return model
