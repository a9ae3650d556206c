"""When maintenance last ran, and the consolidations asked for: ``memory/.maintenance.json``.

The file is shared by every process (and, on PostgreSQL, every host) maintaining the
workspace, so each job runs once per interval whoever runs it::

    {"last_tick_at": "<instant>", "last_consolidation_at": "<instant>",
     "consolidation_requested_at": "<instant>", "consolidation_request": "<token>"}

A process claims a slot (``last_tick_at``, ``last_consolidation_at``) by writing the time under
a workspace lock once the gap since the recorded time has passed. A consolidation request
(:func:`request_consolidation`, made after a flush by a process that has no scheduler of its
own, such as a server replica) is kept here until a consolidation that started after it is
done, so any process or replica can serve it; a request made during a consolidation survives
it (each request has its own token).
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = [
    "LAST_CONSOLIDATION",
    "LAST_TICK",
    "STATE_REL",
    "MaintenanceSchedule",
    "Schedule",
    "read_schedule",
    "request_consolidation",
]

STATE_REL = f"{MEMORY_DIR}/.maintenance.json"
LAST_TICK = "last_tick_at"
LAST_CONSOLIDATION = "last_consolidation_at"
_REQUESTED_AT = "consolidation_requested_at"
_REQUEST = "consolidation_request"
_LOCK = "maintenance-state"


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceSchedule:
    """The recorded times of a workspace's maintenance (``None``: never, or unreadable).

    Attributes:
        last_tick_at: when the last maintenance pass was claimed.
        last_consolidation_at: when the last consolidation was claimed.
        consolidation_requested_at: when a consolidation still to be served was asked for.
    """

    last_tick_at: datetime | None
    last_consolidation_at: datetime | None
    consolidation_requested_at: datetime | None


class Schedule:
    """The times of one workspace, read and claimed under its ``maintenance-state`` lock."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._lock = threading.Lock()  # threads of this process; the workspace lock: others

    def load(self) -> dict[str, Any]:
        """The record; a missing or damaged file is an empty one."""
        try:
            data = json.loads(self.ws.read_bytes(STATE_REL))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def last(self, key: str, data: dict[str, Any] | None = None) -> datetime | None:
        """The time recorded under ``key`` (in ``data``, else read now)."""
        return _instant((self.load() if data is None else data).get(key))

    def record(self, key: str) -> None:
        """Record now under ``key``."""
        with self._locked() as data:
            data[key] = self.ws.utc_now().isoformat()
            self._save(data)

    def claim(self, key: str, gap: timedelta) -> timedelta:
        """Claim the slot ``key`` if ``gap`` has passed: ``0`` on success, else the time left."""
        with self._locked() as data:
            now = self.ws.utc_now()
            elapsed = elapsed_since(self.last(key, data), now)
            if elapsed is not None and elapsed < gap:
                return gap - elapsed
            data[key] = now.isoformat()
            self._save(data)
            return timedelta(0)

    def request(self) -> None:
        """Record a consolidation request (a new token, so one being served keeps it)."""
        with self._locked() as data:
            data[_REQUESTED_AT] = self.ws.utc_now().isoformat()
            data[_REQUEST] = uuid.uuid4().hex
            self._save(data)

    def pending_request(self, data: dict[str, Any] | None = None) -> str | None:
        """The token of the request not served yet, if there is one."""
        token = (self.load() if data is None else data).get(_REQUEST)
        return token if isinstance(token, str) and token else None

    def settle(self, token: str) -> None:
        """The request ``token`` is served: forget it, unless a newer one came meanwhile."""
        with self._locked() as data:
            if data.get(_REQUEST) != token:
                return
            data.pop(_REQUEST, None)
            data.pop(_REQUESTED_AT, None)
            self._save(data)

    def state(self) -> MaintenanceSchedule:
        """The recorded times."""
        data = self.load()
        return MaintenanceSchedule(
            last_tick_at=self.last(LAST_TICK, data),
            last_consolidation_at=self.last(LAST_CONSOLIDATION, data),
            consolidation_requested_at=(
                self.last(_REQUESTED_AT, data) if self.pending_request(data) else None
            ),
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The record, read under this process's lock and the workspace's."""
        with self._lock, self.ws.lock(_LOCK):
            yield self.load()

    def _save(self, data: dict[str, Any]) -> None:
        self.ws.write_text(STATE_REL, json.dumps(data, sort_keys=True) + "\n")


def request_consolidation(ws: Workspace | str) -> None:
    """Ask for a consolidation of ``ws``, served by whichever process maintains it next.

    The request is kept in ``memory/.maintenance.json`` (not in this process), so a process
    that flushes without running maintenance itself (a server replica, a short CLI run) leaves
    it for a :class:`~memdir.memory.MemoryMaintenanceScheduler` anywhere: its background worker
    or its :meth:`~memdir.memory.MemoryMaintenanceScheduler.arun_due` serves it once
    ``consolidation_min_gap`` has passed since the last consolidation.

    Raises:
        WorkspaceError: the workspace cannot be written.
    """
    Schedule(Workspace.coerce(ws)).request()


def read_schedule(ws: Workspace | str) -> MaintenanceSchedule:
    """When ``ws`` was last maintained and consolidated, and any request not served yet."""
    return Schedule(Workspace.coerce(ws)).state()


def elapsed_since(last: datetime | None, now: datetime) -> timedelta | None:
    """Time since ``last``; ``None`` when unknown, or when ``last`` is in the future (a clock
    that ran ahead, here or on another host, must not postpone maintenance until then)."""
    if last is None or last.tzinfo is None or last > now:
        return None
    return now - last


def _instant(raw: object) -> datetime | None:
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
