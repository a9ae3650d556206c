"""Searching a workspace whose index cannot be written, or cannot be opened at all.

A read-only workspace (a read-only mount, files of another user) or a full disk leaves the
database as it is, and search still answers, with one warning per cause:

* when the database can be read (opened read-only) and every memory file is as it was
  indexed, it is searched as it is;
* otherwise a copy of it in memory (or, when it cannot be read, an index built in memory
  from the files) is brought in line with the files and searched: the same analysis and
  ranking as ever. It is kept, and updated by each refresh, until the database can be
  written again.

Writes that must reach the disk (``memdir index``, :meth:`MemoryIndex.index_file`) fail with
:class:`Unwritable` meanwhile; nothing in the memory files is touched.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from memdir.errors import IndexError_, MemdirError
from memdir.index._engine import Engine
from memdir.index._paths import load_snapshot
from memdir.index._sqlite import SqliteEngine
from memdir.index._types import IndexStats
from memdir.store.workspace import Workspace

__all__ = ["Fallback", "Unwritable", "is_stale"]

logger = logging.getLogger("memdir.index")


class Unwritable(IndexError_):
    """The index database cannot be written or created here (read-only, full disk...)."""


def is_stale(workspace: Workspace, engine: Engine) -> bool:
    """Whether any memory file differs from what ``engine`` holds (reads, never writes)."""
    stored = {info.path: info for info in engine.files_by_id().values()}
    on_disk = workspace.memory_files()
    if set(on_disk) != set(stored):
        return True
    root = workspace.root
    for rel in on_disk:
        info = stored[rel]
        try:
            st = os.stat(f"{root}/{rel}")  # noqa: PTH116 - hot loop
        except OSError:
            return True
        if (info.mtime_ns, info.size) == (st.st_mtime_ns, st.st_size):
            continue
        try:
            snap = load_snapshot(root, rel)
        except MemdirError:
            return True
        if snap is None or snap.digest != info.digest:
            return True
    return False


class Fallback:
    """The index searches use while the database cannot be written (see the module notes)."""

    def __init__(self, workspace: Workspace, path: Path) -> None:
        self.workspace = workspace
        self.path = path
        self.engine: SqliteEngine | None = None
        self.on_disk = False  # ``engine`` is the database file itself, opened read-only
        self._warned: set[str] = set()

    def close(self) -> None:
        """Drop the fallback index (the database can be written again)."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None
            self.on_disk = False

    def warn(self, reason: str) -> None:
        """Say, once per distinct reason, that searches are answered from the files."""
        if reason in self._warned:
            return
        self._warned.add(reason)
        message = (
            f"memdir search reads the memory files directly: the index {self.path} cannot be "
            f"updated ({reason}); it is used again once it can be written"
        )
        warnings.warn(message, RuntimeWarning, stacklevel=5)
        logger.warning("%s", message)

    def ensure(
        self,
        disk: SqliteEngine | None,
        sync: Callable[[Engine], IndexStats],
        *,
        damaged: bool = False,
    ) -> SqliteEngine:
        """The fallback index, made if there is none yet.

        ``disk`` is the open (writable but not writable now) database, if any: it is copied
        into memory. Otherwise the file is opened read-only, unless ``damaged``; failing
        that, an index is built in memory from the files with ``sync``.
        """
        if self.engine is not None:
            return self.engine
        if not damaged and disk is not None:
            try:
                self.engine = SqliteEngine.in_memory(disk)
            except sqlite3.Error as exc:
                logger.warning("cannot copy the index %s: %s", self.path, exc)
        if not damaged and self.engine is None:
            try:
                self.engine, self.on_disk = SqliteEngine.open_readonly(self.path), True
            except (sqlite3.Error, OSError):
                self.engine = None
        if self.engine is None:
            self.engine = SqliteEngine.in_memory()
            sync(self.engine)
        return self.engine

    def rebuild(self, sync: Callable[[Engine], IndexStats]) -> SqliteEngine:
        """Replace a fallback found damaged (the read-only file) by one built from the files."""
        self.close()
        return self.ensure(None, sync, damaged=True)

    def refresh(self, sync: Callable[[Engine], IndexStats]) -> IndexStats:
        """Bring the fallback index in line with the files (``sync`` on a copy in memory)."""
        engine = self.engine
        assert engine is not None
        if self.on_disk:
            started = time.perf_counter()
            if not is_stale(self.workspace, engine):
                files = len(engine.files_by_id())
                return IndexStats(
                    files_indexed=0,
                    files_unchanged=files,
                    files_removed=0,
                    lines_indexed=0,
                    seconds=time.perf_counter() - started,
                )
            copy = SqliteEngine.in_memory(engine)
            engine.close()
            self.engine, self.on_disk = copy, False
            engine = copy
        return sync(engine)
