"""Messages as labelled plain text for a model to read: the summariser's and the flush's view.

One entry per message: ``[role name @ time] body``. Text is kept (clipped in the middle when
long), tool calls keep their arguments with long strings shortened in the middle (paths,
commands and ids stay), tool results keep their head and tail (errors often sit at the end)
and error results get more room. :class:`RenderOptions` sets the limits: the summariser
(:data:`SUMMARY_RENDER`) also reads thinking; the memory flush (:data:`FLUSH_RENDER`) reads
text whole, skips thinking, and sees when each message was written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memdir.messages import (
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "FLUSH_RENDER",
    "SUMMARY_RENDER",
    "RenderOptions",
    "clip",
    "render_message",
    "render_transcript",
]

# Tool arguments nest rarely and shallowly; bounds keep a pathological input cheap.
_MAX_DEPTH = 8
_MAX_ITEMS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderOptions:
    """How much of each block a rendering keeps, in characters.

    Attributes:
        text: limit of a text block (``None``: whole).
        thinking: limit of a thinking block (``0``: left out).
        arg_string: limit of each string inside tool-call arguments.
        call: limit of a tool call's arguments as a whole.
        result: limit of a tool result.
        error: limit of a tool result marked ``is_error``.
        timestamps: add the message's UTC time to its label.
    """

    text: int | None = 6_000
    thinking: int = 600
    arg_string: int = 300
    call: int = 1_500
    result: int = 1_200
    error: int = 4_000
    timestamps: bool = False


SUMMARY_RENDER = RenderOptions()
"""What the compaction summariser reads."""

FLUSH_RENDER = RenderOptions(
    text=None, thinking=0, arg_string=200, call=600, result=1_000, error=1_000, timestamps=True
)
"""What the memory flush reads."""


def clip(text: str, limit: int) -> str:
    """``text`` shortened in the middle to about ``limit`` characters (head twice the tail)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    return f"{text[:head]} …[{len(text) - limit:,} characters omitted]… {text[-tail:]}"


def _compact_args(value: Any, limit: int, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return "…"
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        return {str(k): _compact_args(v, limit, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_compact_args(v, limit, depth + 1) for v in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            items.append(f"…{len(value) - _MAX_ITEMS} more")
        return items
    return value


def _call(call: ToolUseBlock, opts: RenderOptions) -> str:
    try:
        args = json.dumps(
            _compact_args(call.input, opts.arg_string), ensure_ascii=False, default=str
        )
    except (TypeError, ValueError):
        args = repr(call.input)
    return f"[tool call {call.name} id={call.id}] {clip(args, opts.call)}"


def _result(block: ToolResultBlock, opts: RenderOptions) -> str:
    label = f"[tool result {block.name or '?'} id={block.tool_use_id}"
    label += " ERROR]" if block.is_error else "]"
    text = block.text
    if not isinstance(block.output, str):
        images = sum(isinstance(p, ImageBlock) for p in block.output)
        if images:
            text += f" [{images} image(s)]"
    return f"{label} {clip(text, opts.error if block.is_error else opts.result)}"


def _body(msg: Msg, opts: RenderOptions = SUMMARY_RENDER) -> str:
    """The blocks of ``msg`` as text, one per line; ``""`` when nothing is shown."""
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                parts.append(
                    block.text.strip() if opts.text is None else clip(block.text, opts.text)
                )
        elif isinstance(block, ThinkingBlock):
            if opts.thinking and block.thinking.strip():
                parts.append(f"[thinking] {clip(block.thinking, opts.thinking)}")
        elif isinstance(block, ImageBlock):
            parts.append("[image]")
        elif isinstance(block, ToolUseBlock):
            parts.append(_call(block, opts))
        else:
            parts.append(_result(block, opts))
    return "\n".join(parts)


def _label(msg: Msg, opts: RenderOptions = SUMMARY_RENDER) -> str:
    """``[role]``, with the message's name and (``opts.timestamps``) its UTC time."""
    name = f" {msg.name}" if msg.name else ""
    stamp = f" @ {msg.created_at.strftime('%Y-%m-%d %H:%M')}Z" if opts.timestamps else ""
    return f"[{msg.role}{name}{stamp}]"


def render_message(msg: Msg, opts: RenderOptions = SUMMARY_RENDER) -> str:
    """One message as a labelled entry (``(empty)`` when it shows nothing)."""
    return f"{_label(msg, opts)} {_body(msg, opts) or '(empty)'}"


def render_transcript(msgs: Sequence[Msg], opts: RenderOptions) -> str:
    """The messages that show something, one entry each, separated by blank lines."""
    entries = []
    for msg in msgs:
        body = _body(msg, opts)
        if body:
            entries.append(f"{_label(msg, opts)} {body}")
    return "\n\n".join(entries)
