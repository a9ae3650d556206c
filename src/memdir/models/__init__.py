"""Language models behind one narrow protocol, :class:`ChatModel`.

Adapters: :class:`OpenAIChatModel` (any OpenAI-compatible server), :class:`AnthropicModel`,
and :class:`ExtractiveModel` (offline, no LLM). :func:`model_from_string` builds one from
``"openai:gpt-4o-mini"``, ``"anthropic:claude-…"``, ``"extractive"`` and similar strings.

The names load on first use: importing one adapter does not load the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memdir._lazy import lazy_exports

if TYPE_CHECKING:
    from memdir.models._base import (
        CURRENT_KEY,
        ENTRIES_KEY,
        KNOWN_KEY,
        MAX_CHARS_KEY,
        MESSAGES_KEY,
        SOURCES_KEY,
        TASK_KEY,
        ChatModel,
        ModelResponse,
        StreamingChatModel,
        ToolSpec,
        Usage,
        request_task,
    )
    from memdir.models._http import RetryPolicy
    from memdir.models._patience import (
        AUTO,
        Patience,
        check_patience,
        generate_patiently,
        resolve_patience,
    )
    from memdir.models._registry import PROVIDERS, model_from_string
    from memdir.models._stream import ModelDelta
    from memdir.models._windows import known_context_window
    from memdir.models.anthropic import AnthropicModel
    from memdir.models.extractive import NO_REPLY, ExtractiveModel
    from memdir.models.openai import OpenAIChatModel

__all__ = [
    "AUTO",
    "CURRENT_KEY",
    "ENTRIES_KEY",
    "KNOWN_KEY",
    "MAX_CHARS_KEY",
    "MESSAGES_KEY",
    "NO_REPLY",
    "PROVIDERS",
    "SOURCES_KEY",
    "TASK_KEY",
    "AnthropicModel",
    "ChatModel",
    "ExtractiveModel",
    "ModelDelta",
    "ModelResponse",
    "OpenAIChatModel",
    "Patience",
    "RetryPolicy",
    "StreamingChatModel",
    "ToolSpec",
    "Usage",
    "check_patience",
    "generate_patiently",
    "known_context_window",
    "model_from_string",
    "request_task",
    "resolve_patience",
]

_WHERE: dict[str, str] = {
    "AnthropicModel": "memdir.models.anthropic",
    "AUTO": "memdir.models._patience",
    "ChatModel": "memdir.models._base",
    "check_patience": "memdir.models._patience",
    "CURRENT_KEY": "memdir.models._base",
    "ENTRIES_KEY": "memdir.models._base",
    "ExtractiveModel": "memdir.models.extractive",
    "generate_patiently": "memdir.models._patience",
    "known_context_window": "memdir.models._windows",
    "KNOWN_KEY": "memdir.models._base",
    "MAX_CHARS_KEY": "memdir.models._base",
    "SOURCES_KEY": "memdir.models._base",
    "MESSAGES_KEY": "memdir.models._base",
    "model_from_string": "memdir.models._registry",
    "ModelDelta": "memdir.models._stream",
    "ModelResponse": "memdir.models._base",
    "NO_REPLY": "memdir.models.extractive",
    "OpenAIChatModel": "memdir.models.openai",
    "Patience": "memdir.models._patience",
    "PROVIDERS": "memdir.models._registry",
    "request_task": "memdir.models._base",
    "resolve_patience": "memdir.models._patience",
    "RetryPolicy": "memdir.models._http",
    "StreamingChatModel": "memdir.models._base",
    "TASK_KEY": "memdir.models._base",
    "ToolSpec": "memdir.models._base",
    "Usage": "memdir.models._base",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
