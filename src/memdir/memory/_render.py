"""Render conversation messages as plain text for memory extraction.

System messages and compaction summaries are left out (they are not new facts); thinking is
left out; tool calls keep their arguments, compacted (long strings clipped), so paths,
commands and ids survive; tool results are clipped, keeping head and tail since errors often
sit at the end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memdir.messages import (
    SUMMARY_NAME,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["render_transcript"]

_ARG_STRING_CHARS = 200
_ARGS_CHARS = 600
_RESULT_CHARS = 1_000


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]} …[{len(text) - limit} chars cut]… {text[-tail:]}"


def _compact(value: Any) -> Any:
    if isinstance(value, str):
        return _clip(value, _ARG_STRING_CHARS)
    if isinstance(value, dict):
        return {str(k): _compact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_compact(v) for v in value[:20]]
    return value


def _tool_call(block: ToolUseBlock) -> str:
    if not block.input:
        return f"[tool_call: {block.name}]"
    try:
        args = json.dumps(_compact(block.input), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        args = "…"
    return f"[tool_call: {block.name}({_clip(args, _ARGS_CHARS)})]"


def _tool_result(block: ToolResultBlock) -> str:
    label = block.name or block.tool_use_id
    flag = " (error)" if block.is_error else ""
    return f"[tool_result: {label}{flag}] {_clip(block.text.strip(), _RESULT_CHARS)}"


def _body(msg: Msg) -> str:
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                parts.append(block.text.strip())
        elif isinstance(block, ToolUseBlock):
            parts.append(_tool_call(block))
        elif isinstance(block, ToolResultBlock):
            parts.append(_tool_result(block))
        elif isinstance(block, ImageBlock):
            parts.append("[image]")
    return "\n".join(parts)


def extractable(msg: Msg) -> bool:
    """Whether a message can hold new facts (not a system prompt or a summary)."""
    return msg.role != "system" and msg.name != SUMMARY_NAME


def render_transcript(messages: Sequence[Msg]) -> str:
    """``[USER]: …`` / ``[ASSISTANT]: …`` / ``[TOOL]: …`` lines; empty if nothing renders."""
    lines: list[str] = []
    for msg in messages:
        if not extractable(msg):
            continue
        body = _body(msg)
        if body:
            stamp = msg.created_at.strftime("%Y-%m-%d %H:%M")
            who = f" {msg.name}" if msg.name else ""
            lines.append(f"[{msg.role.upper()}{who} @ {stamp}Z]: {body}")
    return "\n".join(lines)
