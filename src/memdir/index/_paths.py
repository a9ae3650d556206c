"""Which workspace files are searchable, and reading one consistently for indexing."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import time
from datetime import date
from pathlib import Path

from memdir.errors import WorkspaceError
from memdir.index._append import content_digest
from memdir.index._engine import FileSnapshot
from memdir.store._safeopen import PathMissing, PathRefused, open_regular, read_fd, warn_skipped
from memdir.store.workspace import MEMORY_AREA

__all__ = [
    "check_memory_path",
    "digest",
    "is_plain_file",
    "ledger_day",
    "load_snapshot",
    "snapshot_of_text",
]

_MEMORY_PATH = re.compile(r"^(?:MEMORY\.md|memory/(?:archive/)?[^/.][^/]*\.md)$")
_DAY = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})\.md$")
logger = logging.getLogger("memdir.index")
RACY_NS = 2_000_000_000
"""A file modified less than this before it was read may change again within one mtime tick."""


def check_memory_path(rel: str) -> str:
    """Return ``rel`` if it names a searchable memory file, else raise :class:`WorkspaceError`."""
    if not _MEMORY_PATH.match(rel):
        raise WorkspaceError(
            f"{rel!r} is not a memory file: the index holds MEMORY.md, memory/*.md and "
            "memory/archive/*.md"
        )
    return rel


def ledger_day(rel: str) -> int | None:
    """Proleptic ordinal of a ledger's date (``memory/2026-11-30.md``), else ``None``."""
    match = _DAY.search(rel)
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3])).toordinal()
    except ValueError:
        return None


def digest(data: bytes) -> bytes:
    """Content hash recorded for a file (also of a prefix, to recognise appends)."""
    return _digest(data)


def _digest(data: bytes) -> bytes:
    return content_digest(data)  # chained: an append is checked from the last chunk on


def snapshot_of_text(text: str) -> FileSnapshot:
    """A snapshot of text given by the caller; its stat is unknown (``-1``)."""
    data = text.encode("utf-8", errors="replace")
    return FileSnapshot(text=text, data=data, digest=_digest(data), mtime_ns=-1, size=-1)


def is_plain_file(root: Path, rel: str) -> bool:
    """Whether ``root/rel`` is itself a regular file (not a symlink, FIFO, directory or missing).

    A stored file that the listing left out is dropped unless this holds: a file replaced by
    a symlink out of the memory files must lose its rows, although the link's target exists.
    """
    try:
        return stat.S_ISREG((root / rel).lstat().st_mode)
    except OSError:
        return False


def load_snapshot(root: Path, rel: str) -> FileSnapshot | None:
    """Read memory file ``rel`` under a shared ``flock`` (appends hold it exclusively).

    The file is opened once from the workspace root (:func:`memdir.store._safeopen.open_regular`),
    so what is read is what was checked. ``None`` means there is nothing to index: the file
    is missing, or it may not be read (a symlink out of the memory files or a loop, a FIFO,
    socket or device; logged once as a warning), so rows indexed from it before are removed.

    The stat is taken under the same lock, before the read. When the file changed very
    recently the recorded mtime is ``-1``, so the next check compares hashes instead of
    trusting a timestamp that a same-size rewrite within one tick would not move.
    """
    try:
        with open_regular(root, rel, MEMORY_AREA) as (fd, _):
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_SH)
            st = os.fstat(fd)
            data = read_fd(fd, rel)
    except PathMissing:
        return None
    except PathRefused as exc:
        warn_skipped(logger, root, exc)
        return None
    text = data.decode("utf-8", errors="replace")
    settled = time.time_ns() - st.st_mtime_ns > RACY_NS and len(data) == st.st_size
    return FileSnapshot(
        text=text,
        digest=_digest(data),
        mtime_ns=st.st_mtime_ns if settled else -1,
        size=st.st_size,
        inode=st.st_ino,
        data=data,
    )
