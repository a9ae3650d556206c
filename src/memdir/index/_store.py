"""The database behind :class:`~memdir.index.MemoryIndex`: opened, healed, or stood in for.

* A database that is damaged or foreign, whether found on opening, by a search (``database
  disk image is malformed``, ``Could not decode to UTF-8``...) or by an integrity check, is
  replaced by a fresh one built from the files, with a warning; another process that was
  first is trusted.
* A database that cannot be written (a read-only workspace, a full disk) or opened at all
  gives way to a fallback for reads (:mod:`memdir.index._fallback`); writes raise
  :class:`~memdir.index._fallback.Unwritable`.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memdir.errors import IndexError_, MemdirError
from memdir.index._engine import Engine
from memdir.index._fallback import Fallback, Unwritable
from memdir.index._indexing import Damaged, sync_workspace
from memdir.index._schema import is_busy, is_corruption, is_unwritable, remove_database
from memdir.index._sqlite import SqliteEngine
from memdir.index._types import IndexStats
from memdir.store.workspace import Workspace

__all__ = ["IndexStore"]

logger = logging.getLogger("memdir.index")

_T = TypeVar("_T")
# Errors a damaged database can cause in the code reading it; an integrity check decides.
_MAYBE_DAMAGE = (sqlite3.Error, ValueError, TypeError, KeyError, IndexError, AttributeError)


class IndexStore:
    """One workspace's index database, shared by the threads of one :class:`MemoryIndex`."""

    def __init__(self, workspace: Workspace, path: Path) -> None:
        self.workspace = workspace
        self.path = path
        self.lock = threading.RLock()
        self.engine: SqliteEngine | None = None  # the database file, writable
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self.fallback = Fallback(workspace, path)  # for reads while it cannot be written

    def open(self) -> None:
        """Open the database, or set up the fallback when it cannot be written."""
        with self.lock:
            if self.engine is None and self.fallback.engine is None:
                try:
                    self.engine = self._open_engine()
                except Unwritable as exc:
                    self._degrade(exc)

    def close(self) -> None:
        """Close the database and drop the fallback (idempotent)."""
        with self.lock:
            self._close_engine()
            self.fallback.close()

    def _close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    # -- opening and rebuilding -----------------------------------------------------------

    def _try_open(self) -> tuple[SqliteEngine | None, str | None]:
        """``SqliteEngine.open``, with its errors sorted: damage comes back as the reason."""
        try:
            return SqliteEngine.open(self.path)
        except Exception as exc:
            if is_corruption(exc):
                return None, f"it is damaged ({exc})"
            if is_unwritable(exc):
                raise Unwritable(f"cannot open the index {self.path}: {exc}") from exc
            raise IndexError_(f"cannot open the index {self.path}: {exc}") from exc

    def _open_engine(self) -> SqliteEngine:
        try:
            self.workspace.init()
        except MemdirError as exc:
            if is_unwritable(exc.__cause__ or exc):
                raise Unwritable(f"cannot create {self.workspace.index_dir}: {exc}") from exc
            raise
        engine, problem = self._try_open()
        if engine is not None:
            self._identity = self._file_identity()
            return engine
        return self._rebuild(problem or "it is unusable", damaged=None)

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _rebuild(self, problem: str, *, damaged: tuple[int, int] | None) -> SqliteEngine:
        """Replace an unusable database file with a fresh one and index every file.

        ``damaged`` is the identity of a file found damaged while in use: if the file at the
        path is still that one, it is replaced even though it opens cleanly.

        Raises:
            Unwritable: the file cannot be replaced or written (a read-only workspace).
        """
        try:
            with self.workspace.lock("index-rebuild"):
                return self._rebuild_locked(problem, damaged=damaged)
        except MemdirError as exc:
            if isinstance(exc, Unwritable) or not is_unwritable(exc.__cause__ or exc):
                raise
            raise Unwritable(f"cannot rebuild the index {self.path}: {exc}") from exc

    def _rebuild_locked(self, problem: str, *, damaged: tuple[int, int] | None) -> SqliteEngine:
        engine: SqliteEngine | None = None
        if damaged is None or self._file_identity() != damaged:
            engine, _ = self._try_open()  # another process may have rebuilt it meanwhile
        if engine is None:
            message = f"memdir index {self.path} was rebuilt from the files: {problem}"
            warnings.warn(message, RuntimeWarning, stacklevel=6)
            logger.warning("%s", message)
            try:
                remove_database(self.path)
            except OSError as exc:
                if is_unwritable(exc):
                    raise Unwritable(f"cannot replace the damaged index: {exc}") from exc
                raise IndexError_(f"cannot replace the damaged index: {exc}") from exc
            fresh, still = self._try_open()
            if fresh is None:
                raise IndexError_(f"cannot create the index {self.path}: {still}")
            engine = fresh
        self.engine = engine
        self._identity = self._file_identity()
        self.write(lambda: sync_workspace(self.workspace, engine))
        return engine

    def write(self, action: Callable[[], _T]) -> _T:
        """Run a write; a database that cannot be written raises :class:`Unwritable`."""
        try:
            return action()
        except (sqlite3.Error, OSError) as exc:
            if is_corruption(exc) or not is_unwritable(exc):
                raise
            raise Unwritable(f"cannot write the index {self.path}: {exc}") from exc

    # -- running ------------------------------------------------------------------------

    def _damage_of(self, engine: Engine, exc: BaseException) -> str | None:
        """Why ``exc`` shows the database is damaged, or ``None`` when it does not."""
        if isinstance(exc, Damaged):
            return str(exc)
        if is_corruption(exc):
            return f"it is damaged ({exc})"
        if is_busy(exc) or is_unwritable(exc) or not isinstance(exc, _MAYBE_DAMAGE):
            return None
        try:  # an error that damage could cause: is it damaged?
            found = engine.damage()
        except Exception as check:
            found = str(check) or type(check).__name__
        return None if found is None else f"it is damaged ({exc}; {found})"

    def _degrade(self, exc: Unwritable, *, damaged: bool = False) -> Engine:
        """Switch reads to the fallback index (see :mod:`memdir.index._fallback`)."""
        self.fallback.warn(str(exc.__cause__ or exc))
        return self.fallback.ensure(self.engine, self._sync_fallback, damaged=damaged)

    def _sync_fallback(self, engine: Engine) -> IndexStats:
        return sync_workspace(self.workspace, engine)

    def run(self, action: Callable[[Engine], _T], *, writes: bool) -> _T:
        """Run ``action`` on the index; a damaged database is rebuilt once.

        Reads fall back to a read-only or in-memory index when the database cannot be
        written (or opened); writes raise :class:`Unwritable` then.
        """
        with self.lock:
            if not writes and self.fallback.engine is not None:
                return self._on_fallback(action)
            try:
                engine = self.engine or self._open_engine()
            except Unwritable as exc:
                if writes:
                    raise
                self._degrade(exc)
                return self._on_fallback(action)
            self.engine = engine
            try:
                return action(engine)
            except Exception as exc:
                problem = self._damage_of(engine, exc)
                if problem is None:
                    if writes or not is_unwritable(exc):
                        raise
                    self._degrade(Unwritable(f"cannot read the index: {exc}"))
                    return self._on_fallback(action)
            damaged = self._identity
            self._close_engine()
            try:
                rebuilt = self._rebuild(problem, damaged=damaged)
            except Unwritable as exc:
                if writes:
                    raise
                self._degrade(exc, damaged=True)
                return self._on_fallback(action)
            return action(rebuilt)

    def _on_fallback(self, action: Callable[[Engine], _T]) -> _T:
        engine = self.fallback.engine
        assert engine is not None
        try:
            return action(engine)
        except Exception as exc:
            if not self.fallback.on_disk or self._damage_of(engine, exc) is None:
                raise
            return action(self.fallback.rebuild(self._sync_fallback))

    def refresh_fallback(self, exc: Unwritable) -> IndexStats:
        """Bring the fallback index in line with the files (the database cannot be written)."""
        with self.lock:
            self._degrade(exc)
            return self.fallback.refresh(self._sync_fallback)

    def written(self) -> None:
        """The database took a write: drop the fallback, searches use it again."""
        with self.lock:
            self.fallback.close()
