"""Retention: move old ledgers to ``memory/archive/``, delete old session artefacts.

Moving a ledger is crash-safe: the file is hard-linked into the archive (or copied there
atomically when links are not available), the directory is synced, and only then is the
original removed. A kill in between leaves both names with the same content; the next run
sees that and removes the original. An archive file that already exists is never overwritten:
different content is merged (the archived text first, then whatever the original adds).

Deletion applies to session logs (``sessions/**.jsonl``), evicted tool results
(``large_tool_results/**``) and flush cursors whose last change is older than the retention;
the age is the file's modification time.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from memdir.memory._cursor import CURSOR_DIR
from memdir.memory._testpoint import pause_point
from memdir.store.workspace import Workspace, _fsync_dir, atomic_write

__all__ = ["PruneReport", "archive_ledger", "expire_ledgers", "prune_old_files"]


def archive_ledger(ws: Workspace, name: str) -> bool:
    """Move ``memory/<name>`` to ``memory/archive/<name>``; finish a half-done move.

    Returns whether anything changed.
    """
    src = ws.memory_dir / name
    dst = ws.archive_dir / name
    if not src.is_file():
        return False
    ws.archive_dir.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        _merge_into_archive(src, dst)
    else:
        try:
            os.link(src, dst)
        except FileExistsError:
            _merge_into_archive(src, dst)
            return True
        except OSError as exc:
            if exc.errno not in {errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK}:
                raise
            atomic_write(dst, src.read_bytes())
        _fsync_dir(ws.archive_dir)
        pause_point("archive:after-link")
    with contextlib.suppress(FileNotFoundError):
        src.unlink()
    _fsync_dir(ws.memory_dir)
    return True


def _merge_into_archive(src: Path, dst: Path) -> None:
    """Make ``dst`` hold everything ``src`` holds, without losing what ``dst`` had."""
    with contextlib.suppress(FileNotFoundError):
        if src.samefile(dst):
            return
    new = src.read_bytes()
    old = dst.read_bytes()
    if new in old:
        return
    if new.startswith(old):
        merged = new
    else:
        merged = old + (b"" if old.endswith(b"\n") or not old else b"\n") + new
    atomic_write(dst, merged)


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
    cutoff = (ws.utc_now() - timedelta(days=retention_days)).timestamp()
    sessions = _prune(ws, ws.sessions_dir, "**/*.jsonl", cutoff, dry_run)
    results = _prune(ws, ws.large_results_dir, "**/*", cutoff, dry_run)
    cursors = _prune(ws, ws.root / CURSOR_DIR, "*.json", cutoff, dry_run)
    if not dry_run:
        _remove_empty_dirs(ws.large_results_dir)
    return PruneReport(sessions=sessions, tool_results=results, cursors=cursors)


def _prune(
    ws: Workspace, root: Path, pattern: str, cutoff: float, dry_run: bool
) -> tuple[str, ...]:
    if not root.is_dir():
        return ()
    gone: list[str] = []
    for path in sorted(root.glob(pattern)):
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_mtime >= cutoff:
                continue
            if not dry_run:
                path.unlink()
        except FileNotFoundError:
            continue
        gone.append(path.relative_to(ws.root).as_posix())
    return tuple(gone)


def _remove_empty_dirs(root: Path) -> None:
    if not root.is_dir():
        return
    for directory in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            directory.rmdir()  # fails, harmlessly, when not empty
