"""Tool call / tool result pairing: where a conversation may be cut, and repair of a kept list.

A cut at index ``c`` splits ``msgs[:c]`` (summarised) from ``msgs[c:]`` (kept). It is *safe*
when no assistant message before ``c`` has a call whose result is at or after ``c``: providers
reject a result without its call and a call without its results. Parallel calls and results
spread over several ``tool`` messages are handled by tracking, for every message, the furthest
index any of its calls is answered at. The kept list is then repaired with
:func:`memdir.messages.repair_tool_pairing` and checked with :func:`find_orphans`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memdir.messages import SUMMARY_NAME, Msg, pair_tool_results

__all__ = ["find_orphans", "latest_user_index", "safe_cut", "tail_start"]


def _reach(msgs: Sequence[Msg]) -> list[int]:
    """For each index, the furthest index answering one of its calls (itself if none).

    Pairing follows :func:`~memdir.messages.pair_tool_results`: with ids reused across turns,
    pairing a result with the *first* call of its id would tie the whole conversation
    together, so that no cut is ever safe.
    """
    reach = list(range(len(msgs)))
    for (i, _), origin in pair_tool_results(msgs).origin.items():
        if reach[origin] < i:
            reach[origin] = i
    return reach


def safe_cut(msgs: Sequence[Msg], desired: int) -> int:
    """The cut closest to ``desired`` that separates no call from any of its results.

    Prefers moving the cut earlier (a longer kept tail). When no safe cut exists before
    ``desired``, the nearest safe cut after it is used instead, so that one long run of
    parallel calls cannot block compaction; ``len(msgs)`` means everything is summarised.

    Args:
        msgs: the conversation.
        desired: the cut asked for, ``0 <= desired <= len(msgs)``.

    Returns:
        A safe cut index; ``0`` means nothing can be summarised.
    """
    n = len(msgs)
    desired = max(0, min(desired, n))
    if desired == 0:
        return 0
    reach = _reach(msgs)
    # prefix_max[c] = furthest answer of any call made before c; c is safe iff it is < c.
    prefix_max = [-1] * (n + 1)
    for i in range(n):
        prefix_max[i + 1] = max(prefix_max[i], reach[i])
    for c in range(desired, 0, -1):
        if prefix_max[c] < c:
            return c
    for c in range(desired + 1, n + 1):
        if prefix_max[c] < c:
            return c
    return 0  # unreachable: c == n is always safe


def tail_start(
    msgs: Sequence[Msg],
    *,
    keep_messages: int,
    keep_tokens: int,
    count_message: Callable[[Msg], int],
    max_tokens: int = 0,
) -> int:
    """Where the kept tail begins before pairing is considered.

    With ``keep_tokens > 0`` the tail is the longest run of newest messages whose estimates sum
    to at most ``keep_tokens`` (at least one message, even an oversized one); otherwise it is
    the newest ``keep_messages`` messages, further cut to ``max_tokens`` when that is > 0.
    """
    n = len(msgs)
    budget = keep_tokens if keep_tokens > 0 else max_tokens
    start = max(0, n - keep_messages) if keep_tokens <= 0 else 0
    if budget > 0:
        total = 0
        by_tokens = n
        for i in range(n - 1, start - 1, -1):
            total += count_message(msgs[i])
            if total > budget:
                break
            by_tokens = i
        start = max(start, min(by_tokens, n - 1)) if n else 0
    return start


def latest_user_index(msgs: Sequence[Msg]) -> int | None:
    """Index of the newest real user message (not a compaction summary), if any."""
    for i in range(len(msgs) - 1, -1, -1):
        msg = msgs[i]
        if msg.role == "user" and msg.name != SUMMARY_NAME:
            return i
    return None


def find_orphans(msgs: Sequence[Msg]) -> tuple[list[str], list[str]]:
    """Pairing faults as providers see them: (misplaced results, unanswered calls).

    A result must answer a call of the nearest assistant message before it, with only ``tool``
    messages in between, and answer it once; every call must be answered that way.
    """
    misplaced: list[str] = []
    unanswered: list[str] = []
    open_calls: set[str] = set()
    for msg in msgs:
        if msg.role == "tool":
            for result in msg.tool_results:
                if result.tool_use_id in open_calls:
                    open_calls.discard(result.tool_use_id)
                else:
                    misplaced.append(result.tool_use_id)
            continue
        unanswered.extend(sorted(open_calls))
        open_calls = {c.id for c in msg.tool_uses} if msg.role == "assistant" else set()
    unanswered.extend(sorted(open_calls))
    return misplaced, unanswered
