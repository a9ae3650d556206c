"""Language models behind one narrow protocol, :class:`ChatModel`."""

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
    ToolSpec,
    Usage,
    request_task,
)

__all__ = [
    "CURRENT_KEY",
    "ENTRIES_KEY",
    "KNOWN_KEY",
    "MAX_CHARS_KEY",
    "MESSAGES_KEY",
    "TASK_KEY",
    "ChatModel",
    "ModelResponse",
    "ToolSpec",
    "Usage",
    "request_task",
]
