"""Planning a summary: the cut, what is summarised, what is pinned, and the repaired tail."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memdir.compaction._pairing import latest_user_index, safe_cut, tail_start
from memdir.messages import Msg, repair_tool_pairing

__all__ = ["SummaryPlan", "plan_summary", "repair"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryPlan:
    """How a conversation will be split.

    Attributes:
        cut: index of the first message of the kept tail.
        summarize: indexes (before ``cut``) of the messages the summary replaces.
        pinned_system: system messages from before the cut, kept verbatim (repeats collapsed).
        body: the kept body (the latest user message if it was before the cut, then the
            tail), with tool pairing repaired: an unanswered call gets an error result, a
            misplaced result is quoted in a user message (nothing is dropped).
        altered: ids of messages at or after ``cut`` that the repair changed or replaced;
            their originals must be logged too.
    """

    cut: int
    summarize: list[int]
    pinned_system: list[Msg]
    body: list[Msg]
    altered: frozenset[str]


def _pinned_system(prefix: Sequence[Msg]) -> list[Msg]:
    # A system message is an instruction, not history: keep it whole, but one copy of each text
    # (re-injected reminders would otherwise pile up across compactions).
    last: dict[str, int] = {}
    for i, msg in enumerate(prefix):
        if msg.role == "system":
            last[msg.text] = i
    return [prefix[i] for i in sorted(last.values())]


def plan_summary(
    msgs: Sequence[Msg],
    *,
    keep_messages: int,
    keep_tokens: int,
    count_message: Callable[[Msg], int],
    max_tail_tokens: int = 0,
) -> SummaryPlan | None:
    """Split ``msgs`` for a summary, or ``None`` when nothing before the tail can be summarised.

    The cut never separates a tool call from any of its results. The newest real user message
    is always kept verbatim: when it falls before the cut it is moved right after the summary.
    ``max_tail_tokens`` (message mode only) also caps the tail's tokens.
    """
    desired = tail_start(
        msgs,
        keep_messages=keep_messages,
        keep_tokens=keep_tokens,
        count_message=count_message,
        max_tokens=max_tail_tokens,
    )
    cut = safe_cut(msgs, desired)
    if cut <= 0:
        return None
    user = latest_user_index(msgs)
    pinned_user = user if user is not None and user < cut else None
    summarize = [i for i in range(cut) if msgs[i].role != "system" and i != pinned_user]
    if not summarize:
        return None
    body = ([msgs[pinned_user]] if pinned_user is not None else []) + list(msgs[cut:])
    repaired, altered = repair(body)
    return SummaryPlan(
        cut=cut,
        summarize=summarize,
        pinned_system=_pinned_system(msgs[:cut]),
        body=repaired,
        altered=altered,
    )


def repair(msgs: Sequence[Msg]) -> tuple[list[Msg], frozenset[str]]:
    """:func:`~memdir.messages.repair_tool_pairing`, and the ids of the messages it changed."""
    repaired = repair_tool_pairing(msgs)
    if len(repaired) == len(msgs) and all(
        a is b or a == b for a, b in zip(msgs, repaired, strict=True)
    ):
        return list(msgs), frozenset()
    kept = {m.id: m for m in repaired}
    return repaired, frozenset(m.id for m in msgs if kept.get(m.id) != m)
