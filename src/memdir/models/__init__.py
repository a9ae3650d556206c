"""Language models behind one narrow protocol, :class:`ChatModel`.

Adapters: :class:`OpenAIChatModel` (any OpenAI-compatible server), :class:`AnthropicModel`,
and :class:`ExtractiveModel` (offline, no LLM). :func:`model_from_string` builds one from
``"openai:gpt-4o-mini"``, ``"anthropic:claude-…"``, ``"extractive"`` and similar strings.
"""

from __future__ import annotations

from memdir.models._base import (
    CURRENT_KEY,
    ENTRIES_KEY,
    KNOWN_KEY,
    MAX_CHARS_KEY,
    MESSAGES_KEY,
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
