"""The kept versions of ``MEMORY.md`` and who made each one.

A version is a file ``memory/.history/MEMORY.<UTC instant>.md`` (the file as it was just
before a rewrite, saved at that instant) or ``current`` (``MEMORY.md`` itself). Who made a
version is read from the consolidation log: each run and each replace that wrote the file
records the SHA-256 of what it wrote, so a version's maker is the last writer, before the
version was replaced, whose digest is the version's. A version written by a path that keeps
no log (an agent's memory tool, an erasure, an import, an older memdir) has no maker on
record: it says so rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from memdir.errors import ToolInputError
from memdir.memory._state import sha256
from memdir.store.workspace import HISTORY_DIR, MEMORY_MD, Workspace

__all__ = [
    "CURRENT",
    "Maker",
    "made_by",
    "read_version",
    "replaced_at",
    "version_names",
]

CURRENT: Final = "current"
"""The name of ``MEMORY.md`` as it is now, among the versions."""

_NAME: Final = re.compile(r"MEMORY\.(\d{8}T\d{6}\.\d{6}Z)(?:-(\d{1,6}))?\.md")


@dataclass(frozen=True, slots=True)
class Maker:
    """Who wrote a version, from the consolidation log.

    Attributes:
        who: ``consolidation``, or the ``by`` of a replace (``person``, ``api``, a key id).
        at: when, as the log says it (``2026-11-30T09:00:00Z``).
        model: a consolidation's model (``""`` for a replace).
    """

    who: str
    at: str
    model: str = ""

    @property
    def person(self) -> bool:
        """Whether a person (not a consolidation or a client) made it."""
        return self.who == "person"


def _order(name: str) -> tuple[str, int]:
    match = _NAME.fullmatch(name)
    assert match is not None
    return match[1], int(match[2] or 1)


def version_names(ws: Workspace) -> list[str]:
    """The kept versions' file names in ``memory/.history/``, newest first.

    Raises:
        WorkspaceError: the store cannot be read.
    """
    names = [
        e.name for e in ws.listdir(HISTORY_DIR) if e.kind == "file" and _NAME.fullmatch(e.name)
    ]
    return sorted(names, key=_order, reverse=True)


def replaced_at(name: str) -> datetime | None:
    """When the version ``name`` was replaced (saved into the history); ``None`` for
    :data:`CURRENT` or a name that is not a version's."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return datetime.strptime(match[1], "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC)


def read_version(ws: Workspace, name: str) -> bytes:
    """The bytes of version ``name`` (:data:`CURRENT`: ``MEMORY.md``, empty if there is none).

    Only a name the history directory holds is read: anything else (a path, ``../``) is
    refused before the store is asked.

    Raises:
        ToolInputError: ``name`` is not a version's name, or no such version is kept.
        WorkspaceError: the store cannot be read.
    """
    if name == CURRENT:
        found = ws.read_versioned(MEMORY_MD)
        return found.data if found is not None else b""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ToolInputError(
            "a version is 'current' or a name such as MEMORY.20261130T090000.000000Z.md"
        )
    if name not in version_names(ws):
        raise ToolInputError(f"no version {name} is kept (the history keeps the newest ones)")
    return ws.read_bytes(f"{HISTORY_DIR}/{name}")


def made_by(name: str, data: bytes, records: list[dict[str, Any]]) -> Maker | None:
    """Who made version ``name`` holding ``data``, from the log ``records`` (oldest first);
    ``None`` when no logged writer wrote it.

    A kept version was made before the run that replaced it (the record naming it as its
    ``history``); without that record (a writer that keeps no log replaced it), before the
    instant it was saved. :data:`CURRENT` was made by the last writer of its digest.
    """
    digest = sha256(data)
    before = len(records)
    if name != CURRENT:
        saved = f"{HISTORY_DIR}/{name}"
        index = next((i for i, r in enumerate(records) if r.get("history") == saved), None)
        if index is not None:
            before = index
        else:
            stamp = replaced_at(name)
            limit = stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp is not None else ""
            before = sum(1 for r in records if str(r.get("at", "")) <= limit)
    for record in reversed(records[:before]):
        if record.get("sha256") == digest:
            who = "consolidation" if record.get("status") != "replaced" else str(record.get("by"))
            return Maker(who=who, at=str(record.get("at", "")), model=str(record.get("model", "")))
    return None
