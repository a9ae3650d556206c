"""Which call each tool result answers, when call ids may repeat.

Providers pair a result with a call by id, but ids are unique only within one answer: models
and frameworks that number their calls per answer (``call_0`` every turn, llama.cpp-style
servers, scripted models) reuse them. A result therefore answers the nearest earlier call of
its id that is still unanswered; a result whose calls are all answered (a repeated result)
belongs to the nearest earlier call of its id; a result with no call of its id before it
answers nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memdir.messages._blocks import ToolUseBlock
from memdir.messages._msg import Msg

__all__ = ["ToolPairs", "pair_tool_results"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPairs:
    """The pairing of a conversation's tool calls and results.

    Attributes:
        origin: for a result, keyed by ``(message index, index among its message's results)``,
            the index of the message holding the call it answers; results that answer no
            call are absent.
        unanswered: the calls no result answers, as ``(message index, call)``, in order.
    """

    origin: dict[tuple[int, int], int]
    unanswered: list[tuple[int, ToolUseBlock]]


def pair_tool_results(msgs: Sequence[Msg]) -> ToolPairs:
    """Pair every tool result of ``msgs`` with the call it answers (see the module docstring)."""
    waiting: dict[str, list[tuple[int, int]]] = {}  # id -> (message, call position), oldest first
    last_call: dict[str, int] = {}
    answered: set[tuple[int, int]] = set()
    origin: dict[tuple[int, int], int] = {}
    for i, msg in enumerate(msgs):
        if msg.role == "assistant":
            for k, call in enumerate(msg.tool_uses):
                waiting.setdefault(call.id, []).append((i, k))
                last_call[call.id] = i
        elif msg.role == "tool":
            for j, result in enumerate(msg.tool_results):
                open_calls = waiting.get(result.tool_use_id)
                if open_calls:
                    where = open_calls.pop()
                    answered.add(where)
                    origin[(i, j)] = where[0]
                elif result.tool_use_id in last_call:
                    origin[(i, j)] = last_call[result.tool_use_id]
    unanswered = [
        (i, call)
        for i, msg in enumerate(msgs)
        if msg.role == "assistant"
        for k, call in enumerate(msg.tool_uses)
        if (i, k) not in answered
    ]
    return ToolPairs(origin=origin, unanswered=unanswered)
