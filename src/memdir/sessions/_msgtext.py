"""What of a logged message is searched and shown: its text, tool calls and tool results.

One message is one searchable unit. Text is kept up to :data:`TEXT_CHARS`; a tool call
becomes its name and its arguments as JSON (up to :data:`CALL_CHARS`); a tool result its
output (up to :data:`RESULT_CHARS`, head and tail: an error often sits at the end). Thinking
and images are left out. The log itself keeps every message whole; these limits only bound
what one search unit holds. A lone surrogate, which a log keeps as it was written, is searched
and shown as U+FFFD: SQLite cannot store it.
"""

from __future__ import annotations

import json
import re

from memdir.messages import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.messages._render import clip

__all__ = ["CALL_CHARS", "RESULT_CHARS", "TEXT_CHARS", "message_text", "searchable", "tool_names"]

TEXT_CHARS = 16_000
"""Characters of a message's text that are searched."""
CALL_CHARS = 1_000
"""Characters of one tool call's arguments that are searched."""
RESULT_CHARS = 2_000
"""Characters of one tool result that are searched."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def searchable(text: str) -> str:
    """``text`` with each lone surrogate made U+FFFD, so that it can be indexed."""
    return _SURROGATE.sub("\ufffd", text)


def _arguments(call: ToolUseBlock) -> str:
    try:
        return json.dumps(call.input, ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(call.input)


def message_text(msg: Msg) -> str:
    """The searchable text of ``msg``, one line or paragraph per block (``""``: nothing)."""
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            if block.text.strip():
                parts.append(clip(block.text, TEXT_CHARS))
        elif isinstance(block, ToolUseBlock):
            parts.append(f"{block.name} {clip(_arguments(block), CALL_CHARS)}")
        elif isinstance(block, ToolResultBlock) and block.text.strip():
            parts.append(clip(block.text, RESULT_CHARS))
    return searchable("\n".join(parts))


def tool_names(msg: Msg) -> tuple[str, ...]:
    """Names of the tools ``msg`` calls or answers for, in order, each once."""
    names: list[str] = []
    for block in msg.content:
        name = block.name if isinstance(block, ToolUseBlock | ToolResultBlock) else None
        if name and name not in names:
            names.append(name)
    return tuple(names)
