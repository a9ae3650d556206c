"""A session log as a transcript a person reads: each message with its role and log line,
tool calls and results readable (long ones clipped, the rest a click away), and each
compaction summary with the messages it replaced.

A compaction offloads the messages it summarises to the log before it replaces them, and a
summary message (named :data:`~memdir.messages.SUMMARY_NAME`) reaches the log when a later
compaction folds it in; its metadata (or its lead-in) names the log lines it stands for
(:func:`memdir.compaction.summary.summary_log`). A message those lines hold is shown as
replaced by the first summary that names it; a later summary that folds an earlier one
in lists that summary among what it replaced.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from memdir.compaction.summary import summary_log, summary_text
from memdir.messages import (
    SUMMARY_NAME,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from memdir.sessions import LogRecord

__all__ = ["CLIP_CHARS", "Entry", "Part", "Replaced", "entries"]

CLIP_CHARS: Final = 2_000
"""Characters of a tool call or result shown before the rest is folded away."""
FOLDED_CHARS: Final = 200_000
"""Characters the folded rest holds; a longer one is shown whole on a page of its own."""
_GIST: Final = 160


@dataclass(frozen=True, slots=True)
class Part:
    """One block of a message as shown.

    Attributes:
        kind: ``text``, ``call``, ``result``, ``thinking`` or ``image``.
        label: what it is (``call Bash``, ``result of Bash (error)``...), ``""`` for text.
        head: what is shown at once.
        rest: the whole text when ``head`` is clipped and it is small enough to fold in.
        size: the whole text's length.
    """

    kind: str
    label: str
    head: str
    rest: str | None = None
    size: int = 0

    @property
    def clipped(self) -> bool:
        """Whether ``head`` is only the start."""
        return self.size > len(self.head)


@dataclass(frozen=True, slots=True)
class Replaced:
    """A message a compaction summary stands for."""

    line: int
    role: str
    gist: str


@dataclass(slots=True)
class Entry:
    """One logged message of the transcript.

    Attributes:
        line: its log line (what a session citation names).
        role: ``user``, ``assistant``, ``tool`` or ``system``.
        at: when it was written.
        parts: its blocks.
        summary: a compaction summary's text (``None``: an ordinary message).
        span: the log lines a summary stands for.
        replaced: the messages of those lines.
        replaced_by: the line of the first summary that stands for this message.
    """

    line: int
    role: str
    at: datetime | None
    parts: list[Part]
    summary: str | None = None
    span: tuple[int, int] | None = None
    replaced: list[Replaced] = field(default_factory=list)
    replaced_by: int | None = None


def _shown(kind: str, label: str, text: str, whole: bool) -> Part:
    if whole or len(text) <= CLIP_CHARS:
        return Part(kind, label, text, None, len(text))
    rest = text if len(text) <= FOLDED_CHARS else None
    return Part(kind, label, text[:CLIP_CHARS], rest, len(text))


def _arguments(call: ToolUseBlock) -> str:
    try:
        return json.dumps(call.input, ensure_ascii=False, indent=2, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(call.input)


def parts_of(msg: Msg, *, whole: bool = False) -> list[Part]:
    """The blocks of ``msg`` as shown (``whole``: nothing clipped)."""
    names = {call.id: call.name for call in msg.tool_uses}
    out: list[Part] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            out.append(_shown("text", "", block.text, whole or msg.role != "tool"))
        elif isinstance(block, ToolUseBlock):
            out.append(_shown("call", f"call {block.name}", _arguments(block), whole))
        elif isinstance(block, ToolResultBlock):
            name = block.name or names.get(block.tool_use_id) or "a tool"
            label = f"result of {name}" + (" (error)" if block.is_error else "")
            out.append(_shown("result", label, block.text, whole))
        elif isinstance(block, ThinkingBlock):
            text = "(redacted)" if block.redacted else block.thinking
            out.append(_shown("thinking", "thinking", text, whole))
        elif isinstance(block, ImageBlock):
            out.append(Part("image", "image", block.media_type or "an image"))
    return out


def _gist(msg: Msg) -> str:
    if msg.name == SUMMARY_NAME:
        return _clipped("compaction summary: " + summary_text(msg))
    text = msg.text or "\n".join(r.text for r in msg.tool_results)
    if not text and msg.tool_uses:
        text = "calls " + ", ".join(call.name for call in msg.tool_uses)
    return _clipped(text)


def _clipped(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _GIST else flat[: _GIST - 1] + "…"


def entries(
    records: Sequence[LogRecord], rel_path: str, shown: slice, *, whole: int | None = None
) -> list[Entry]:
    """The transcript of the ``shown`` slice of a log's ``records`` (``whole``: the line
    shown unclipped); what the summaries replaced is found over all of them."""
    out = [Entry(r.line, r.msg.role, r.msg.created_at, []) for r in records]
    lines = [r.line for r in records]
    for record, entry in zip(records, out, strict=True):
        if record.msg.name != SUMMARY_NAME:
            continue
        entry.summary = summary_text(record.msg)
        span = summary_log(record.msg)
        if span is None or span.path != rel_path:
            continue
        entry.span = (span.start_line, span.end_line)
        # Listed under the first summary that stands for it: a later summary that folds an
        # earlier one in lists that summary, not again the messages it stood for.
        for k in range(bisect_left(lines, span.start_line), bisect_right(lines, span.end_line)):
            other = out[k]
            if other.replaced_by is None and other.line != entry.line:
                other.replaced_by = entry.line
                entry.replaced.append(Replaced(other.line, other.role, _gist(records[k].msg)))
    for record, entry in zip(records[shown], out[shown], strict=True):
        if entry.summary is None:
            entry.parts = parts_of(record.msg, whole=record.line == whole)
    return out[shown]
