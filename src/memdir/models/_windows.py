"""Context windows of common models, for when the caller does not give one.

Matched on the model name's last path segment (``Qwen/Qwen2.5-7B-Instruct`` →
``qwen2.5-7b-instruct``), case-insensitively, by the longest matching prefix. Local servers
(Ollama, llama.cpp) run models with whatever context they were started with, so their names
map to ``None`` unless the caller passes ``context_window=``.
"""

from __future__ import annotations

__all__ = ["known_context_window"]

# Prefix → tokens. Longest prefix wins, so specific names override their family.
_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-": 200_000,
    # DeepSeek
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    # Alibaba Qwen (DashScope names and open weights as served by vLLM)
    "qwen-max": 32_768,
    "qwen-plus": 131_072,
    "qwen-turbo": 1_000_000,
    "qwen-long": 10_000_000,
    "qwen2.5-": 32_768,
    "qwen3-": 32_768,
    # Moonshot, Zhipu, Mistral, Google (OpenAI-compatible endpoints)
    "moonshot-v1-8k": 8_192,
    "moonshot-v1-32k": 32_768,
    "moonshot-v1-128k": 131_072,
    "kimi-k2": 131_072,
    "glm-4": 128_000,
    "mistral-large": 131_072,
    "mistral-small": 32_768,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
}
_BY_LENGTH = sorted(_WINDOWS, key=len, reverse=True)


def known_context_window(model: str) -> int | None:
    """The context window of ``model`` in tokens, or ``None`` when it is not known."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    for prefix in _BY_LENGTH:
        if name.startswith(prefix):
            return _WINDOWS[prefix]
    return None
