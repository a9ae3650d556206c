"""The per-session flush cursor: which messages are already extracted to the ledger.

``memory/.flush_state/<session_id>.json`` records the id and time of the last flushed message
and the ids of the most recent ones. A flush takes only messages after the cursor, so the whole
context can be passed every turn (and the compaction prefix before compaction) without a
message ever being extracted twice.

``pending`` covers a crash between the ledger append and the cursor update: it names the
ledger, its size before the append and the bullets about to be written. The next flush looks
for those bullets after that offset; if they are there, the cursor is advanced without writing
them again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memdir.errors import MemdirError
from memdir.messages import Msg
from memdir.store.ledger import landed_since
from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = ["CURSOR_DIR", "FlushCursor"]

log = logging.getLogger("memdir.memory")

CURSOR_DIR = f"{MEMORY_DIR}/.flush_state"
_RECENT = 512


@dataclass(slots=True, kw_only=True)
class FlushCursor:
    """The cursor of one session (see the module docstring)."""

    session_id: str
    last_id: str | None = None
    last_created_at: datetime | None = None
    recent_ids: list[str] = field(default_factory=list)
    pending: dict[str, Any] | None = None

    @property
    def rel(self) -> str:
        """Workspace-relative path of the cursor file."""
        return f"{CURSOR_DIR}/{self.session_id}.json"

    @classmethod
    def load(cls, ws: Workspace, session_id: str) -> FlushCursor:
        """Read the cursor; a missing or damaged file is an empty cursor (damage is logged)."""
        cursor = cls(session_id=session_id)
        try:
            data = json.loads(ws.read_bytes(cursor.rel))
        except FileNotFoundError:
            return cursor
        except ValueError:
            log.warning("flush cursor %s is damaged; starting it again", cursor.rel)
            return cursor
        if not isinstance(data, dict):
            return cursor
        last_id = data.get("last_id")
        cursor.last_id = last_id if isinstance(last_id, str) else None
        created = data.get("last_created_at")
        if isinstance(created, str):
            try:
                cursor.last_created_at = datetime.fromisoformat(created)
            except ValueError:
                cursor.last_created_at = None
        recent = data.get("recent_ids")
        if isinstance(recent, list):
            cursor.recent_ids = [r for r in recent if isinstance(r, str)][-_RECENT:]
        pending = data.get("pending")
        cursor.pending = pending if isinstance(pending, dict) else None
        return cursor

    def save(self, ws: Workspace) -> None:
        """Write the cursor atomically."""
        record = {
            "version": 1,
            "session_id": self.session_id,
            "last_id": self.last_id,
            "last_created_at": self.last_created_at.isoformat() if self.last_created_at else None,
            "recent_ids": self.recent_ids[-_RECENT:],
            "pending": self.pending,
        }
        ws.write_text(self.rel, json.dumps(record, ensure_ascii=False) + "\n")

    def select_new(self, messages: Sequence[Msg]) -> list[Msg]:
        """The messages of ``messages`` that come after the cursor.

        Everything after the last flushed message is new. When compaction replaced that
        message by a summary, everything after the newest recently flushed message still in
        the list is new (a clock running ahead on one message must not hide later ones); only
        when none is left do timestamps decide: messages not older than the newest flushed one
        are new. Ids seen recently are never new.
        """
        seen = set(self.recent_ids)
        position = _last_index(messages, lambda m: m.id == self.last_id)
        if position is None and self.last_id is not None:
            position = _last_index(messages, lambda m: m.id in seen)
        if position is not None:
            candidates = list(messages[position + 1 :])
        elif self.last_created_at is not None:
            floor = self.last_created_at
            candidates = [m for m in messages if _aware(m.created_at) >= floor]
        else:
            candidates = list(messages)
        return [m for m in candidates if m.id not in seen]

    def advance(self, flushed: Sequence[Msg]) -> None:
        """Move the cursor past ``flushed`` (in order) and clear any pending append."""
        if flushed:
            last = flushed[-1]
            self.last_id = last.id
            newest = max(_aware(m.created_at) for m in flushed)
            if self.last_created_at is None or newest > self.last_created_at:
                self.last_created_at = newest
            self.recent_ids = [*self.recent_ids, *(m.id for m in flushed)][-_RECENT:]
        self.pending = None

    def pending_landed(self, ws: Workspace) -> bool:
        """Whether the pending append is already in its ledger."""
        pending = self.pending or {}
        rel, size, bullets = pending.get("rel"), pending.get("size"), pending.get("bullets")
        if not isinstance(rel, str) or not isinstance(size, int) or not isinstance(bullets, list):
            return False
        try:
            return landed_since(ws, rel, size, [str(b) for b in bullets]) is not None
        except MemdirError:  # unreadable, or a damaged record: the append is redone
            return False


def _last_index(messages: Sequence[Msg], match: Callable[[Msg], bool]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if match(messages[i]):
            return i
    return None


def _aware(instant: datetime) -> datetime:
    return instant if instant.tzinfo is not None else instant.astimezone()
