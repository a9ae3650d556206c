"""Where a ``/memories`` path of the memory tool lands in a workspace, and what it may do there.

``/memories`` is the workspace's memory, seen as one directory::

    /memories/MEMORY.md           MEMORY.md             curated memory: editable (atomic rewrite)
    /memories/<name>.md           memory/<name>.md      notes: editable, searchable
    /memories/YYYY-MM-DD.md       memory/YYYY-MM-DD.md  daily ledgers: append-only, today's only
    /memories/archive/...         memory/archive/...    archived ledgers: read-only

Dot-files (memdir's own state: flush cursors, history, leases) are neither listed nor opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Literal, TypeAlias

from memdir.errors import ToolInputError

__all__ = ["ROOT", "MemoryToolError", "Target", "TargetKind", "escaped", "parse_path"]

ROOT = "/memories"
_LEDGER = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")

TargetKind: TypeAlias = Literal["root", "memory_md", "note", "ledger", "archive", "nested"]


class MemoryToolError(ToolInputError):
    """A memory tool command was refused; the message is the text the model gets back.

    With the ``anthropic`` SDK installed the error raised is also an ``anthropic`` ``ToolError``,
    so the SDK's tool runner returns it as a ``tool_result`` with ``is_error: true``.
    """


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed ``/memories`` path.

    Attributes:
        path: the path as the model gave it (used in every answer, as the reference tool does).
        rel: the workspace-relative path (``MEMORY.md``, ``memory/...``); the root's is
            ``memory``.
        kind: what lives there (see the module docstring); ``nested`` is anything below a
            subdirectory of ``/memories`` other than ``archive/``.
        day: the ledger's date, for ``ledger`` and for ledger names in ``archive/``.
    """

    path: str
    rel: str
    kind: TargetKind
    day: date | None = None


def escaped(path: str) -> str:
    """``path`` as shown in an error: control characters escaped, so one line stays one line."""
    return path if path.isprintable() else repr(path)[1:-1]


def _ledger_day(name: str) -> date | None:
    match = _LEDGER.fullmatch(name)
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def parse_path(path: object, *, what: str = "path") -> Target:
    """Map a memory tool path onto the workspace.

    Raises:
        MemoryToolError: the path is not text, holds a NUL byte, does not start with
            ``/memories``, leaves it with ``..``, or names memdir's own dot-files.
    """
    if not isinstance(path, str):
        raise MemoryToolError(f"`{what}` must be a string path under {ROOT}")
    if "\x00" in path:
        raise MemoryToolError(f"Path {escaped(path)} contains a NUL byte")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise MemoryToolError(f"Path must start with {ROOT}, got: {escaped(path)}")
    parts: list[str] = []
    for part in path[len(ROOT) :].split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise MemoryToolError(f"Path {escaped(path)} would escape {ROOT} directory")
            parts.pop()
            continue
        if "\\" in part:
            raise MemoryToolError(f"Path {escaped(path)} holds a backslash; use / between names")
        parts.append(part)
    if any(part.startswith(".") for part in parts):
        raise MemoryToolError(
            f"{escaped(path)} is memdir's own state (a dot-file); the memory tool does not open it"
        )
    if not parts:
        return Target(path=path, rel="memory", kind="root")
    if parts == ["MEMORY.md"]:
        return Target(path=path, rel="MEMORY.md", kind="memory_md")
    rel = "memory/" + "/".join(parts)
    if parts[0] == "archive":
        day = _ledger_day(parts[-1]) if len(parts) == 2 else None
        return Target(path=path, rel=rel, kind="archive", day=day)
    if len(parts) > 1:
        return Target(path=path, rel=rel, kind="nested")
    day = _ledger_day(parts[0])
    if day is not None:
        return Target(path=path, rel=rel, kind="ledger", day=day)
    return Target(path=path, rel=rel, kind="note")
