"""``MemoryIndex``: the workspace's search index (public API)."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from memdir.errors import IndexCorruptError, IndexError_, ToolInputError
from memdir.index._engine import Engine, FileSnapshot
from memdir.index._paths import check_memory_path, ledger_day, load_snapshot, snapshot_of_text
from memdir.index._schema import is_corruption
from memdir.index._search import run_search
from memdir.index._sqlite import SqliteEngine
from memdir.index._types import IndexStats, SearchHit
from memdir.workspace import Workspace

__all__ = ["DB_NAME", "MAX_LIMIT", "MemoryIndex"]

logger = logging.getLogger("memdir.index")

DB_NAME = "memory_index.db"
MAX_LIMIT = 1_000
"""The most hits one search returns."""

_T = TypeVar("_T")


def _index_order(rel: str) -> tuple[bool, int, str]:
    # Oldest ledgers first (archive included), then other files: row ids then grow with time.
    day = ledger_day(rel)
    return (day is None, day or 0, rel)


class MemoryIndex:
    """Full-text index over a workspace's memory files, one SQLite database per workspace.

    The database lives at ``<workspace>/.index/memory_index.db`` and holds ``MEMORY.md``,
    ``memory/*.md`` and ``memory/archive/*.md``. It is derived data: a damaged or foreign
    database is rebuilt from the files with a warning. Several processes may index and search
    the same workspace at once (WAL mode, short per-file write transactions).

    Use it as a context manager, or call :meth:`open` / :meth:`close`; methods open it on
    first use. One instance may be shared between threads.

    Args:
        workspace: a :class:`Workspace` or its directory (``None``: the default workspace).
    """

    def __init__(self, workspace: Workspace | str | os.PathLike[str] | None = None) -> None:
        self.workspace = Workspace.coerce(workspace)
        self.path: Path = self.workspace.index_dir / DB_NAME
        self._engine: Engine | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MemoryIndex({str(self.workspace.root)!r})"

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> MemoryIndex:
        """Open the database (creating, migrating or rebuilding it as needed); returns self.

        Raises:
            IndexError_: the database cannot be opened or created.
        """
        with self._lock:
            if self._engine is None:
                self._engine = self._open_engine()
        return self

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None

    def __enter__(self) -> MemoryIndex:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _open_engine(self) -> Engine:
        self.workspace.init()
        problem: str | None
        try:
            engine, problem = SqliteEngine.open(self.path)
        except Exception as exc:
            if not is_corruption(exc):
                raise IndexError_(f"cannot open the index {self.path}: {exc}") from exc
            engine, problem = None, f"it is damaged ({exc})"
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

    def _rebuild(self, problem: str, *, damaged: tuple[int, int] | None) -> Engine:
        """Replace an unusable database file with a fresh one and index every file.

        ``damaged`` is the identity of a file found damaged while in use: if the file at the
        path is still that one, it is replaced even though it opens cleanly.
        """
        with self.workspace.lock("index-rebuild"):
            # Another process may have rebuilt it while we waited for the lock.
            engine: Engine | None = None
            if damaged is None or self._file_identity() != damaged:
                try:
                    engine, _ = SqliteEngine.open(self.path)
                except Exception as exc:
                    if not is_corruption(exc):
                        raise IndexError_(f"cannot open the index {self.path}: {exc}") from exc
            if engine is None:
                message = f"memdir index {self.path} was rebuilt from the files: {problem}"
                warnings.warn(message, RuntimeWarning, stacklevel=4)
                logger.warning("%s", message)
                for suffix in ("", "-wal", "-shm", "-journal"):
                    try:
                        Path(f"{self.path}{suffix}").unlink()
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        raise IndexError_(f"cannot remove the damaged index: {exc}") from exc
                fresh, still = SqliteEngine.open(self.path)
                if fresh is None:
                    raise IndexError_(f"cannot create the index {self.path}: {still}")
                engine = fresh
            self._engine = engine
            self._identity = self._file_identity()
            self._sync(full=False, progress=None)
            return engine

    def _run(self, action: Callable[[Engine], _T], *, writes: bool) -> _T:
        """Run ``action`` on the open engine; a damaged database is rebuilt once (writes)."""
        with self._lock:
            engine = self._engine or self.open()._engine
            assert engine is not None
            try:
                return action(engine)
            except Exception as exc:
                if not is_corruption(exc):
                    raise
                if not writes:
                    raise IndexCorruptError(
                        f"the index {self.path} is damaged; rebuild it with "
                        "`memdir index --full` (memory files are not affected)"
                    ) from exc
                damaged = self._identity
                self.close()
                rebuilt = self._rebuild(f"it is damaged ({exc})", damaged=damaged)
                return action(rebuilt)

    # -- indexing -----------------------------------------------------------------------

    def index_all_from_workspace(
        self, *, full: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> IndexStats:
        """Bring the index in line with every memory file.

        Unchanged files are skipped (same size and mtime, else same content hash); changed
        files are diffed, so only new or edited lines are written; rows of deleted files are
        removed. Each file is synced in its own short transaction.

        Args:
            full: drop everything and index every file again.
            progress: called as ``progress(done, total)`` after each file.
        """
        return self._run(lambda _engine: self._sync(full=full, progress=progress), writes=True)

    def refresh(self) -> IndexStats:
        """Cheap staleness check: sync only files whose size or mtime changed, drop deleted ones.

        Call it before searching when the files may have changed; a search itself never
        indexes.
        """
        return self.index_all_from_workspace()

    def _sync(self, *, full: bool, progress: Callable[[int, int], None] | None) -> IndexStats:
        engine = self._engine
        assert engine is not None
        started = time.perf_counter()
        if full:
            engine.reset()
        stored = {info.path: info for info in engine.files_by_id().values()}
        on_disk = self.workspace.memory_files()
        if full or len(on_disk) != len(stored) or any(rel not in stored for rel in on_disk):
            on_disk.sort(key=_index_order)  # new files get ids in date order
        indexed = unchanged = removed = lines = 0
        total = len(on_disk)
        root = str(self.workspace.root)
        for done, rel in enumerate(on_disk, start=1):
            path = f"{root}/{rel}"
            info = stored.get(rel)
            try:
                st: os.stat_result | None = os.stat(path)  # noqa: PTH116 - hot loop
            except OSError:
                st = None
            if (
                st is not None
                and info is not None
                and (info.mtime_ns, info.size) == (st.st_mtime_ns, st.st_size)
            ):
                unchanged += 1
                if progress is not None:
                    progress(done, total)
                continue
            result = engine.sync_file(rel, functools.partial(load_snapshot, Path(path)))
            if result.changed:
                indexed += 1
                lines += result.inserted
            else:
                unchanged += 1
            if progress is not None:
                progress(done, total)
        for rel in sorted(set(stored) - set(on_disk)):
            if not (self.workspace.root / rel).is_file() and engine.remove_file(rel):
                removed += 1
        return IndexStats(
            files_indexed=indexed,
            files_unchanged=unchanged,
            files_removed=removed,
            lines_indexed=lines,
            seconds=time.perf_counter() - started,
        )

    def index_file(self, rel: str) -> int:
        """Re-read one memory file from disk and index what changed; returns its unit count.

        A missing file has its rows removed (returns 0).

        Raises:
            WorkspaceError: ``rel`` leaves the workspace or is not a memory file.
        """
        rel = check_memory_path(self.workspace.relpath(rel))
        path = self.workspace.root / rel
        return self._run(lambda e: e.sync_file(rel, lambda: load_snapshot(path)).units, writes=True)

    def index_from_string(self, rel: str, text: str) -> int:
        """Index ``text`` as the content of memory file ``rel`` (e.g. just written by the caller).

        The next :meth:`refresh` re-reads the file and compares hashes, so the file on disk
        stays the truth. Returns the number of searchable units.

        Raises:
            WorkspaceError: ``rel`` is not a memory file path.
            ToolInputError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise ToolInputError("text must be a string")
        rel = check_memory_path(self.workspace.relpath(rel))
        snap: FileSnapshot = snapshot_of_text(text)
        return self._run(lambda e: e.sync_file(rel, lambda: snap).units, writes=True)

    # -- search -------------------------------------------------------------------------

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Ranked hits for ``query`` (best first, at most ``limit``). Never indexes.

        Any string is safe: FTS5 syntax in it is treated as plain words. A blank query, or
        one made only of punctuation, returns ``[]``.

        Raises:
            ToolInputError: ``query`` is not a string or ``limit`` is not 1..1000.
            IndexCorruptError: the database is damaged (rebuild with a full index).
        """
        if not isinstance(query, str):
            raise ToolInputError("query must be a string")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ToolInputError(f"limit must be an integer from 1 to {MAX_LIMIT}")
        if not query.strip():
            return []

        def go(engine: Engine) -> list[SearchHit]:
            with engine.snapshot():
                return run_search(engine, query, limit)

        return self._run(go, writes=False)
