"""Retention: move old ledgers to ``memory/archive/``, delete old session artefacts.

Moving a ledger is crash-safe: the file is first created in the archive (atomically, never
over an existing one), and only then is the original removed. A kill in between leaves both
names with the same content; the next run sees that and removes the original. An archive
file that already exists is never overwritten: different content is merged (the archived
text first, then whatever the original adds).

Deletion applies to session logs (``sessions/**.jsonl``), evicted tool results
(``large_tool_results/**``) and flush cursors whose last change is older than the retention;
the age is the file's modification time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from memdir.memory._cursor import CURSOR_DIR
from memdir.memory._testpoint import pause_point
from memdir.store.workspace import (
    ARCHIVE_DIR,
    LARGE_RESULTS_DIR,
    MEMORY_DIR,
    SESSIONS_DIR,
    Workspace,
)

__all__ = ["PruneReport", "archive_ledger", "expire_ledgers", "prune_old_files"]


def archive_ledger(ws: Workspace, name: str) -> bool:
    """Move ``memory/<name>`` to ``memory/archive/<name>``; finish a half-done move.

    Returns whether anything changed.
    """
    src, dst = f"{MEMORY_DIR}/{name}", f"{ARCHIVE_DIR}/{name}"
    try:
        data = ws.read_bytes(src)
    except FileNotFoundError:
        return False
    if not ws.create_text(dst, data):
        _merge_into_archive(ws, src, dst)
    else:
        pause_point("archive:after-link")
    ws.delete(src)
    return True


def _merge_into_archive(ws: Workspace, src: str, dst: str) -> None:
    """Make ``dst`` hold everything ``src`` holds, without losing what ``dst`` had."""
    while True:
        try:
            new = ws.read_bytes(src)
        except FileNotFoundError:
            return
        current = ws.read_versioned(dst)
        old = current.data if current is not None else b""
        if new in old:
            return
        if new.startswith(old):
            merged = new
        else:
            merged = old + (b"" if old.endswith(b"\n") or not old else b"\n") + new
        if ws.replace_if(dst, merged, current.version if current is not None else None):
            return


def expire_ledgers(ws: Workspace, *, retention_days: int, dry_run: bool = False) -> list[str]:
    """Archive ledgers dated more than ``retention_days`` before today. Returns their names.

    A move a crash left half done (the name in both places) is completed the same way.
    """
    cutoff = ws.today() - timedelta(days=retention_days)
    moved: list[str] = []
    for day, rel in ws.ledgers():
        name = rel.rsplit("/", 1)[-1]
        if day < cutoff and (dry_run or archive_ledger(ws, name)):
            moved.append(name)
    return moved


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneReport:
    """Files deleted (or, in a dry run, that would be) by :func:`prune_old_files`."""

    sessions: tuple[str, ...]
    tool_results: tuple[str, ...]
    cursors: tuple[str, ...]


def prune_old_files(ws: Workspace, *, retention_days: int, dry_run: bool = False) -> PruneReport:
    """Delete session logs, evicted tool results and flush cursors older than the retention."""
    cutoff = (ws.utc_now() - timedelta(days=retention_days)).timestamp() * 1e9
    sessions = _prune(ws, SESSIONS_DIR, lambda name: name.endswith(".jsonl"), cutoff, dry_run)
    results = _prune(ws, LARGE_RESULTS_DIR, lambda name: True, cutoff, dry_run)
    cursors = _prune(ws, CURSOR_DIR, lambda name: name.endswith(".json"), cutoff, dry_run)
    if not dry_run and ws.is_local:
        _remove_empty_dirs(ws.root / LARGE_RESULTS_DIR)
    return PruneReport(sessions=sessions, tool_results=results, cursors=cursors)


def _prune(
    ws: Workspace, top: str, wanted: Callable[[str], bool], cutoff: float, dry_run: bool
) -> tuple[str, ...]:
    gone: list[str] = []
    for rel, st in ws.walk(top):
        if st.mtime_ns >= cutoff or not wanted(rel.rsplit("/", 1)[-1]):
            continue
        if dry_run or ws.delete(rel):
            gone.append(rel)
    return tuple(sorted(gone))


def _remove_empty_dirs(root: Path) -> None:
    if not root.is_dir():
        return
    for directory in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            directory.rmdir()  # fails, harmlessly, when not empty
