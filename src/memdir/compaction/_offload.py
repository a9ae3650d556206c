"""Offloading messages to the session log and finding where each one landed."""

from __future__ import annotations

from collections.abc import Sequence

from memdir.errors import MemdirError
from memdir.messages import Msg
from memdir.sessions import LogSpan, SessionLog

__all__ = ["OffloadError", "Offloaded", "offload"]


class OffloadError(Exception):
    """The session log could not be written; ``reason`` is one line for events and logs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Offloaded:
    """Line numbers (1-based) of offloaded messages in one session log."""

    def __init__(self, path: str, lines: dict[str, int]) -> None:
        self.path = path
        self.lines = lines

    def locate(self, msg_id: str) -> str:
        """Where a message is kept, in words (for previews and truncation notes)."""
        line = self.lines.get(msg_id)
        return f"{self.path} line {line}" if line is not None else self.path

    def span(self, ids: Sequence[str]) -> LogSpan | None:
        """The smallest line range holding every message in ``ids`` that was logged."""
        found = [self.lines[i] for i in ids if i in self.lines]
        if not found:
            return None
        return LogSpan(path=self.path, start_line=min(found), end_line=max(found))


def offload(log: SessionLog, msgs: Sequence[Msg], known: dict[str, int] | None = None) -> Offloaded:
    """Append ``msgs`` to ``log`` (messages already there are skipped) and locate them all.

    Args:
        log: the session log.
        msgs: the messages, in conversation order.
        known: lines already known for some ids (from earlier offloads of the same run); it
            spares reading the log back when every other message turns out to be new.

    Raises:
        OffloadError: the log could not be written or read back (disk full, permissions...).
    """
    known = known or {}
    fresh = list(dict.fromkeys(m.id for m in msgs if m.id not in known))
    wanted = {m.id for m in msgs}
    try:
        span = log.append(msgs)
        written = 0 if span is None else span.end_line - span.start_line + 1
        if written == len(fresh):
            # Exactly the unknown messages were written, in order.
            lines = {i: known[i] for i in wanted if i in known}
            if span is not None:
                lines.update({mid: span.start_line + k for k, mid in enumerate(fresh)})
            return Offloaded(log.rel_path, lines)
        lines = {}
        for record in log.read().records:
            if record.msg.id in wanted and record.msg.id not in lines:
                lines[record.msg.id] = record.line
    except (MemdirError, OSError) as exc:
        raise OffloadError(f"the session log could not be written: {exc}") from exc
    missing = wanted - lines.keys()
    if missing:
        raise OffloadError(
            f"{len(missing)} message(s) are missing from {log.rel_path} after writing it"
        )
    return Offloaded(log.rel_path, lines)
