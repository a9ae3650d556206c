"""Conversation messages: :class:`Msg`, its content blocks, JSON and provider formats.

A :class:`Msg` has a role (``system``, ``user``, ``assistant``, ``tool``) and a tuple of blocks
(:class:`TextBlock`, :class:`ThinkingBlock`, :class:`ImageBlock`, :class:`ToolUseBlock`,
:class:`ToolResultBlock`). Tool results live in ``tool`` messages, one or more per message, and
are paired with the assistant's tool calls by id. Parallel calls and a call whose result never
came are both representable; :func:`dangling_tool_calls` finds the latter.

Serialisation is lossless: ``Msg.from_dict(m.to_dict()) == m`` and
``msgs_from_json(msgs_to_json(ms)) == ms``.

Malformed input raises :class:`MessageFormatError` (a :class:`~memdir.errors.MemdirError`), or
one of its subclasses :class:`UnknownRoleError` and :class:`MissingToolCallIdError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from memdir._msg import (
    SUMMARY_NAME,
    Block,
    ImageBlock,
    MessageFormatError,
    MissingToolCallIdError,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownRoleError,
    block_from_dict,
    block_to_dict,
)

__all__ = [
    "SUMMARY_NAME",
    "Block",
    "ImageBlock",
    "MessageFormatError",
    "MissingToolCallIdError",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UnknownRoleError",
    "block_from_dict",
    "block_to_dict",
    "dangling_tool_calls",
    "msgs_from_json",
    "msgs_to_json",
]


def msgs_to_json(msgs: Iterable[Msg]) -> str:
    """Serialise messages as a JSON array (UTF-8 text, non-ASCII kept as is)."""
    return json.dumps([m.to_dict() for m in msgs], ensure_ascii=False, allow_nan=False)


def msgs_from_json(text: str | bytes) -> list[Msg]:
    """Parse the output of :func:`msgs_to_json`.

    Raises:
        MessageFormatError: if the text is not a JSON array of messages.
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise MessageFormatError(f"messages are not valid JSON: {exc}") from exc
    if not isinstance(data, list):
        raise MessageFormatError("messages JSON must be an array")
    return [Msg.from_dict(d) for d in data]


def dangling_tool_calls(msgs: Sequence[Msg]) -> list[ToolUseBlock]:
    """Tool calls that no later ``tool`` message answers, in conversation order."""
    answered = {r.tool_use_id for m in msgs for r in m.tool_results}
    return [c for m in msgs for c in m.tool_uses if c.id not in answered]
