"""Conversation messages: :class:`Msg`, its content blocks, JSON and provider formats.

A :class:`Msg` has a role (``system``, ``user``, ``assistant``, ``tool``) and a tuple of blocks
(:class:`TextBlock`, :class:`ThinkingBlock`, :class:`ImageBlock`, :class:`ToolUseBlock`,
:class:`ToolResultBlock`). Tool results live in ``tool`` messages, one or more per message, and
are paired with the assistant's tool calls by id. Parallel calls and a call whose result never
came are both representable; :func:`dangling_tool_calls` finds the latter.

Converters: :func:`to_openai` / :func:`from_openai` (chat completions) and :func:`to_anthropic`
/ :func:`from_anthropic` (Messages API); each module docstring lists what the format cannot carry.
Those formats have no message ids: :func:`stable_ids` gives the messages ids derived from their
session, position and content, so the same conversation sent again is recognised.

Serialisation is lossless: ``Msg.from_dict(m.to_dict()) == m`` and
``msgs_from_json(msgs_to_json(ms)) == ms``.

Malformed input raises :class:`MessageFormatError` (a :class:`~memdir.errors.MemdirError`), or
one of its subclasses :class:`UnknownRoleError` and :class:`MissingToolCallIdError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from memdir.messages._anthropic_format import from_anthropic, to_anthropic
from memdir.messages._ids import stable_ids
from memdir.messages._msg import (
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
    as_list,
    block_from_dict,
    block_to_dict,
)
from memdir.messages._openai_format import RAW_ARGUMENTS_KEY, from_openai, to_openai
from memdir.messages._pairs import ToolPairs, pair_tool_results

__all__ = [
    "MISSING_RESULT_TEXT",
    "RAW_ARGUMENTS_KEY",
    "SUMMARY_NAME",
    "Block",
    "ImageBlock",
    "MessageFormatError",
    "MissingToolCallIdError",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolPairs",
    "ToolResultBlock",
    "ToolUseBlock",
    "UnknownRoleError",
    "block_from_dict",
    "block_to_dict",
    "dangling_tool_calls",
    "from_anthropic",
    "from_openai",
    "msgs_from_json",
    "msgs_to_json",
    "pair_tool_results",
    "repair_tool_pairing",
    "stable_ids",
    "to_anthropic",
    "to_openai",
]

MISSING_RESULT_TEXT = (
    "Error: no result was recorded for this tool call (it was interrupted or lost)."
)
"""Output of the error result :func:`repair_tool_pairing` adds to an unanswered call."""


def msgs_to_json(msgs: Iterable[Msg]) -> str:
    """Serialise messages as a JSON array (UTF-8 text, non-ASCII kept as is)."""
    return json.dumps(
        [m.to_dict() for m in as_list(msgs, "msgs_to_json", of_msgs=True)],
        ensure_ascii=False,
        allow_nan=False,
    )


def msgs_from_json(text: str | bytes) -> list[Msg]:
    """Parse the output of :func:`msgs_to_json`.

    Raises:
        MessageFormatError: if the text is not a JSON array of messages.
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise MessageFormatError(f"messages are not valid JSON: {exc}") from exc
    except RecursionError:
        raise MessageFormatError("messages are not valid JSON: nested too deeply") from None
    if not isinstance(data, list):
        raise MessageFormatError("messages JSON must be an array")
    return [Msg.from_dict(d) for d in data]


def dangling_tool_calls(msgs: Sequence[Msg]) -> list[ToolUseBlock]:
    """Tool calls that no later ``tool`` message answers, in conversation order.

    A result answers the nearest earlier unanswered call of its id (ids may repeat across
    turns: see :func:`pair_tool_results`).
    """
    msgs = as_list(msgs, "dangling_tool_calls", of_msgs=True)
    return [call for _, call in pair_tool_results(msgs).unanswered]


def repair_tool_pairing(msgs: Sequence[Msg]) -> list[Msg]:
    """Make a conversation acceptable to providers that insist on paired calls and results.

    Both OpenAI and Anthropic reject a tool call not answered right after it, and a result
    whose call is not in the preceding assistant turn. This returns a copy in which every
    unanswered call gets an error result (:data:`MISSING_RESULT_TEXT`, metadata
    ``{"memdir.synthetic": True}``) placed after its turn's results, and every orphaned result
    is turned into a user message quoting it, so nothing the conversation held is dropped.
    The input is not modified; a conversation that needs no repair comes back equal.
    """
    out: list[Msg] = []
    pending: dict[str, ToolUseBlock] = {}
    orphans: list[ToolResultBlock] = []

    def close_turn() -> None:
        if pending:
            missing = tuple(
                ToolResultBlock(
                    tool_use_id=c.id, name=c.name, output=MISSING_RESULT_TEXT, is_error=True
                )
                for c in pending.values()
            )
            out.append(Msg(role="tool", content=missing, metadata={"memdir.synthetic": True}))
            pending.clear()
        if orphans:
            out.append(Msg.user("\n\n".join(_quote_result(r) for r in orphans)))
            orphans.clear()

    for msg in as_list(msgs, "repair_tool_pairing", of_msgs=True):
        if msg.role == "tool":
            kept: list[Block] = []
            for result in msg.tool_results:
                if pending.pop(result.tool_use_id, None) is not None:
                    kept.append(result)
                else:
                    orphans.append(result)
            if len(kept) == len(msg.content):
                out.append(msg)
            elif kept:
                out.append(msg.with_content(kept))
            continue
        close_turn()
        out.append(msg)
        if msg.role == "assistant":
            pending = {c.id: c for c in msg.tool_uses}
    close_turn()
    return out


def _quote_result(result: ToolResultBlock) -> str:
    label = f"{result.name or 'tool'} result for call {result.tool_use_id}"
    if result.is_error:
        label += " (error)"
    return f"[{label}]\n{result.text}"
