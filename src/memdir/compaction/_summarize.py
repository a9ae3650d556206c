"""Asking a model for the summary: slicing, running summary, retries, timeout.

A prefix whose transcript does not fit in the summariser's input budget is summarised slice by
slice, oldest first, each call receiving the summary so far as its previous summary. When the
summariser still reports a context overflow, the budget is halved and the remaining messages are
sliced again. An answer that is no summary of its messages (a weak model's echo of the prompt,
:mod:`memdir.compaction._summary_check`) fails as an empty one does, but is not retried. Every
request carries the task marker and the structured messages, so an offline model
(``ExtractiveModel``) can serve it without parsing prose.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memdir.compaction._summary_check import summary_refusal
from memdir.compaction.overflow import is_context_overflow
from memdir.compaction.summary import render_messages, render_prompt
from memdir.compaction.summary import summary_text as unwrap_summary
from memdir.errors import MemdirError
from memdir.messages import SUMMARY_NAME, Msg
from memdir.messages._render import clip, render_message
from memdir.models import (
    MESSAGES_KEY,
    TASK_KEY,
    ChatModel,
    ExtractiveModel,
    generate_patiently,
)

__all__ = ["SummaryOutcome", "input_budget", "summarize"]

log = logging.getLogger("memdir.compaction")

_MIN_SLICE_TOKENS = 256
_MAX_HALVINGS = 4
_BACKOFF_SECONDS = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryOutcome:
    """What the summariser produced.

    Attributes:
        text: the summary, or ``None`` when it failed.
        calls: how many model calls were made.
        reason: why it failed (``None`` on success).
    """

    text: str | None
    calls: int
    reason: str | None = None


def input_budget(configured: int, window: int | None, max_output_tokens: int) -> int | None:
    """Tokens one summary request may hold: configured, else from the window, else unlimited."""
    if configured > 0:
        return configured
    if not isinstance(window, int) or window <= 0:
        return None
    room = window - max_output_tokens - 512
    return room if room > _MIN_SLICE_TOKENS else max(_MIN_SLICE_TOKENS, window // 2)


def _as_dict(msg: Msg) -> dict[str, Any]:
    try:
        return msg.to_dict()
    except MemdirError:
        # Unserialisable metadata must not stop the summary: send the content without it.
        return {"id": msg.id, "role": msg.role, "content": render_message(msg)}


def _strip_fences(text: str) -> str:
    text = text.strip()
    if text.startswith("```") and text.endswith("```") and text.count("\n") >= 2:
        text = text[text.index("\n") + 1 : text.rindex("```")].strip()
    return text


def _next_slice(
    msgs: Sequence[Msg],
    renders: Sequence[str],
    costs: Sequence[int],
    room: int | None,
) -> tuple[list[Msg], list[str]]:
    """The oldest messages fitting in ``room`` tokens (at least one; a giant one is clipped)."""
    if room is None:
        return list(msgs), list(renders)
    out_m: list[Msg] = []
    out_r: list[str] = []
    used = 0
    for msg, text, cost in zip(msgs, renders, costs, strict=True):
        if cost > room:
            # One message larger than a whole slice: send its head and tail only.
            text = clip(text, max(200, int(len(text) * room / cost * 0.9)))
            cost = room
        if out_m and used + cost > room:
            break
        out_m.append(msg)
        out_r.append(text)
        used += cost
    return out_m, out_r


async def _call(
    model: ChatModel,
    request: Msg,
    *,
    max_output_tokens: int,
    timeout: float | None,
) -> str:
    response = await generate_patiently(
        model, [request], max_output_tokens=max_output_tokens, timeout=timeout
    )
    return _strip_fences(response.text)


def _refusal(model: ChatModel, text: str, template: str, sources: list[str]) -> str | None:
    """Why a non-empty answer is no summary of ``sources`` (:mod:`._summary_check`), or ``None``.

    The extractive model's answer is made of the messages' own lines, and it is the last
    resort: it is not checked.
    """
    if not text or isinstance(model, ExtractiveModel):
        return None
    return summary_refusal(text, template=template, sources=sources)


async def summarize(
    model: ChatModel,
    msgs: Sequence[Msg],
    *,
    template: str,
    max_output_tokens: int,
    budget: int | None,
    timeout: float | None,
    retries: int,
    count_text: Callable[[str], int],
) -> SummaryOutcome:
    """Summarise ``msgs`` (earlier summaries among them are folded in as the running summary).

    Never raises for a model failure (the outcome says why); cancellation propagates.
    """
    previous = [unwrap_summary(m) for m in msgs if m.name == SUMMARY_NAME]
    running: str | None = "\n\n".join(p for p in previous if p) or None
    pending = [m for m in msgs if m.name != SUMMARY_NAME]
    renders = [render_message(m) for m in pending]
    costs = [count_text(r) + 4 for r in renders]
    calls = 0
    halvings = 0
    base = count_text(template) + 64
    if not pending and running is None:
        return SummaryOutcome(text=None, calls=0, reason="nothing to summarise")
    first = True
    while first or pending:
        first = False
        room = None
        if budget is not None:
            room = max(_MIN_SLICE_TOKENS, budget - base - count_text(running or ""))
        batch, batch_renders = _next_slice(pending, renders, costs, room)
        transcript = "\n\n".join(
            ([render_messages([], previous_summary=running)] if running else []) + batch_renders
        )
        marker: list[dict[str, Any]] = []
        if running:
            marker.append(_as_dict(Msg.user(running, name=SUMMARY_NAME)))
        marker.extend(_as_dict(m) for m in batch)
        request = Msg.user(
            render_prompt(template, transcript),
            metadata={TASK_KEY: "summarize", MESSAGES_KEY: marker},
        )
        text: str | None = None
        reason = "the summary call failed"
        overflowed = False
        for attempt in range(retries + 1):
            calls += 1
            try:
                text = await _call(
                    model, request, max_output_tokens=max_output_tokens, timeout=timeout
                )
            except TimeoutError:
                reason = f"the summary call made no progress for {timeout:g} s"
            except Exception as exc:
                if is_context_overflow(exc):
                    overflowed = True
                    reason = "the summary request was larger than the summary model's window"
                    break
                reason = f"the summary call failed: {type(exc).__name__}: {str(exc)[:200]}"
            else:
                refusal = _refusal(model, text, template, [running or "", *batch_renders])
                if refusal is not None:
                    # The same request would get the same kind of answer: no retry.
                    text, reason = None, f"the summary was refused: {refusal}"
                    break
                if text:
                    break
                reason = "the summary model returned an empty answer"
            text = None
            if attempt < retries:
                log.warning("%s; retrying (%d of %d)", reason, attempt + 1, retries)
                await asyncio.sleep(_BACKOFF_SECONDS * (2**attempt))
        if overflowed and halvings < _MAX_HALVINGS:
            halvings += 1
            current = budget if budget is not None else sum(costs) + base
            budget = max(_MIN_SLICE_TOKENS, current // 2)
            first = not pending  # retry a lone previous summary once more
            continue
        if text is None:
            return SummaryOutcome(text=None, calls=calls, reason=reason)
        running = text
        done = len(batch)
        pending, renders, costs = pending[done:], renders[done:], costs[done:]
    return SummaryOutcome(text=running, calls=calls)
