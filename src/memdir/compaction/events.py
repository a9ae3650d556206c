"""Compaction events and their delivery to listeners.

A compactor emits ``compaction.started`` when a stage is about to run, then exactly one of
``compaction.completed`` (the context changed) or ``compaction.failed`` (it did not, and
``reason`` says why). Listeners are plain callables, sync or async; a listener that raises is
logged and skipped, never fatal. Events carry counts and locations, never message text.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["CompactionEvent", "CompactionListener", "EventKind", "emit"]

log = logging.getLogger("memdir.compaction")

EventKind: TypeAlias = Literal["compaction.started", "compaction.completed", "compaction.failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionEvent:
    """One step of a compaction, for logs and metrics.

    Attributes:
        kind: ``"compaction.started"``, ``"compaction.completed"`` or ``"compaction.failed"``.
        session_id: the session being compacted.
        reason: why compaction started (``"messages"``, ``"tokens"``, ``"hard_limit"``,
            ``"forced"``, ``"truncate_args"``) or, for ``failed``, why it did not complete.
        messages_before: messages in the conversation before.
        tokens_before: estimated tokens of the whole request before.
        messages_after: messages after (``None`` until known).
        tokens_after: estimated tokens of the request after (``None`` until known).
        cut_index: index of the first kept message (``None`` if no summary was made).
        stages: the stages applied so far (``"truncate_args"``, ``"clear_tool_results"``,
            ``"summary"``, ``"extractive_summary"``, ``"log_pointer"``).
        log_path: the session log the removed messages went to, workspace-relative.
        log_start_line: first line written for this compaction (1-based).
        log_end_line: last line written (inclusive).
        summary_chars: length of the summary text.
        model: name of the model that wrote the summary.
        latency_s: seconds since the compaction started.
    """

    kind: EventKind
    session_id: str
    reason: str
    messages_before: int
    tokens_before: int
    messages_after: int | None = None
    tokens_after: int | None = None
    cut_index: int | None = None
    stages: tuple[str, ...] = ()
    log_path: str | None = None
    log_start_line: int | None = None
    log_end_line: int | None = None
    summary_chars: int | None = None
    model: str | None = None
    latency_s: float = 0.0


CompactionListener: TypeAlias = Callable[[CompactionEvent], object | Awaitable[object]]
"""A callable taking a :class:`CompactionEvent`; may return an awaitable."""


async def emit(listeners: list[CompactionListener], event: CompactionEvent) -> None:
    """Deliver ``event`` to every listener in order; failures are logged, never raised."""
    for listener in list(listeners):
        try:
            result = listener(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.warning("compaction listener %r failed on %s", listener, event.kind, exc_info=True)
