"""``MemoryIndex``: the workspace's search index (public API)."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from memdir.embeddings import Embedder, embedder_from_string
from memdir.errors import ConfigError, IndexCorruptError, IndexError_, ModelError, ToolInputError
from memdir.index._engine import Engine, FileSnapshot
from memdir.index._paths import (
    check_memory_path,
    is_plain_file,
    ledger_day,
    load_snapshot,
    snapshot_of_text,
)
from memdir.index._query import analyze_query
from memdir.index._schema import LINE_BITS, is_corruption, remove_database
from memdir.index._search import hit_of, run_search
from memdir.index._sqlite import SqliteEngine
from memdir.index._types import EmbedStats, IndexStats, SearchHit
from memdir.index._vectors import VECTORS_DB, DenseIndex, VectorStore, file_texts, normalized
from memdir.ledger import normalize_bullet
from memdir.workspace import Workspace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["DB_NAME", "DENSE_WEIGHT", "FUSION_DEPTH", "MAX_LIMIT", "RRF_K", "MemoryIndex"]

logger = logging.getLogger("memdir.index")

DB_NAME = "memory_index.db"
MAX_LIMIT = 1_000
"""The most hits one search returns."""
FUSION_DEPTH = 50
"""Hybrid search fuses at least this many lexical and this many vector results."""
RRF_K = 10
"""Reciprocal rank fusion: a lexical result at rank r (1-based) adds ``1 / (RRF_K + r)``."""
DENSE_WEIGHT = 0.7
"""A vector result at rank r adds ``DENSE_WEIGHT / (RRF_K + r)``: the lexical ranking is the
stronger one wherever the query shares words with the memory (docs/benchmarks.md)."""

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

    Hybrid search (optional): with an embedder, :meth:`search` also ranks memory lines by
    vector similarity to the query and fuses both rankings (reciprocal rank fusion), which
    finds memories that share no words with the query. Vectors are computed by
    :meth:`embed_pending` (``memdir index --embed``, or the maintenance scheduler), never by a
    search; lines without a vector yet are found by the lexical ranking alone.

    Args:
        workspace: a :class:`Workspace` or its directory (``None``: the default workspace).
        embedder: ``None`` (default): the embedder the workspace is set to use
            (:meth:`set_default_embedder`, ``memdir index --embed NAME``), else lexical only;
            ``False``: lexical only; a name such as ``"e5"``; or any
            :class:`~memdir.embeddings.Embedder`.

    Raises:
        ConfigError: ``embedder`` is not one of those, or names an unknown embedder.
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | str | bool | None = None,
    ) -> None:
        self.workspace = Workspace.coerce(workspace)
        self.path: Path = self.workspace.index_dir / DB_NAME
        self._engine: Engine | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._lock = threading.RLock()
        if embedder is True:
            raise ConfigError("embedder=True is ambiguous: pass a name such as 'e5'")
        if isinstance(embedder, str):
            embedder = embedder_from_string(embedder)
        elif embedder is not None and embedder is not False and not isinstance(embedder, Embedder):
            raise ConfigError(
                "embedder must be None, False, a name such as 'e5', or an Embedder "
                f"(with name, dim, embed_documents and embed_query), not {type(embedder).__name__}"
            )
        self._embedder_arg: Embedder | bool | None = embedder
        self._vectors = VectorStore(self.workspace.index_dir / VECTORS_DB)
        self._dense: DenseIndex | None = None
        self._dense_name: str | None = None  # the workspace setting ``_dense`` was made for
        self._warned: set[str] = set()

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
            self._vectors.close()

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
                try:
                    remove_database(self.path)
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
            result = engine.sync_file(
                rel, functools.partial(load_snapshot, self.workspace.root, rel)
            )
            if result.changed:
                indexed += 1
                lines += result.inserted
            else:
                unchanged += 1
            if progress is not None:
                progress(done, total)
        for rel in sorted(set(stored) - set(on_disk)):
            if not is_plain_file(self.workspace.root, rel) and engine.remove_file(rel):
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
        root = self.workspace.root
        return self._run(
            lambda e: e.sync_file(rel, lambda: load_snapshot(root, rel)).units, writes=True
        )

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
        with self._lock:
            dense = self._dense_index()
        query_vector = None
        if dense is not None and self._vectors.generation() > 0 and analyze_query(query):
            try:
                query_vector = self._embed_query(dense, query)
            except ModelError as exc:  # an embedding service is down: still answer
                logger.warning("memdir search is lexical only for this query: %s", exc)

        def go(engine: Engine) -> list[SearchHit]:
            with engine.snapshot():
                if dense is None or query_vector is None:
                    return run_search(engine, query, limit)
                depth = max(limit, FUSION_DEPTH)
                lexical = run_search(engine, query, depth)
                near = dense.search(engine, query_vector, depth)
                if not near:
                    return lexical[:limit]
                return _fuse(engine, lexical, near, limit)

        return self._run(go, writes=False)

    # -- vectors (hybrid search) --------------------------------------------------------

    def _dense_index(self, *, required: bool = False) -> DenseIndex | None:
        """The vector side of search, or ``None`` for lexical only."""
        arg = self._embedder_arg
        if arg is False:
            if required:
                raise ConfigError("this index was opened with embedder=False")
            return None
        if arg is not None and not isinstance(arg, bool):
            if self._dense is None:
                self._dense = DenseIndex(self._vectors, arg)
            return self._dense
        name = self._vectors.embedder_name()
        if name is None:
            if required:
                raise ConfigError(
                    "no embedder is set for this workspace: run `memdir index --embedder e5` "
                    "or pass embedder= to MemoryIndex"
                )
            self._dense = self._dense_name = None
            return None
        if self._dense is None or name != self._dense_name:
            try:
                embedder = embedder_from_string(name)
            except ConfigError as exc:
                if required:
                    raise
                if name not in self._warned:
                    self._warned.add(name)
                    message = f"memdir search is lexical only: embedder {name!r}: {exc}"
                    warnings.warn(message, RuntimeWarning, stacklevel=4)
                    logger.warning("%s", message)
                return None
            self._dense, self._dense_name = DenseIndex(self._vectors, embedder), name
        return self._dense

    @staticmethod
    def _embed_query(dense: DenseIndex, query: str) -> npt.NDArray[np.float32]:
        vector = normalized(dense.embedder.embed_query(query))
        if vector.shape != (dense.embedder.dim,):
            raise ConfigError(
                f"embedder {dense.embedder.name!r} returned a vector of shape {vector.shape} "
                f"for a query, expected ({dense.embedder.dim},)"
            )
        return vector

    @property
    def embedder(self) -> Embedder | None:
        """The embedder searches use, or ``None`` when search is lexical only."""
        with self._lock:
            dense = self._dense_index()
        return None if dense is None else dense.embedder

    def set_default_embedder(self, name: str | None) -> None:
        """Set the embedder this workspace's searches use by default (``None``: none).

        The setting lives in ``.index/vectors.db``, so every process and tool that opens the
        workspace's index with the default ``embedder=None`` uses it. ``None`` also deletes
        the stored vectors (they are derived data).

        Raises:
            ConfigError: unknown name, or its package is not installed.
        """
        with self._lock:
            if name is None:
                self._vectors.delete()
                self._dense = self._dense_name = None
                return
            embedder = embedder_from_string(name)  # fails early on a bad name
            canonical = name.strip().lower()
            self.workspace.init()
            self._vectors.set_embedder_name(canonical)
            if self._embedder_arg is None:
                self._dense = DenseIndex(self._vectors, embedder)
                self._dense_name = canonical

    def embed_pending(
        self,
        *,
        max_seconds: float | None = None,
        batch_size: int = 32,
        progress: Callable[[int, int], None] | None = None,
    ) -> EmbedStats:
        """Compute the vectors that memory lines are missing (newest files first).

        Slow (the bundled e5 embedder does about 27 lines per second on two cores), so it
        belongs in the background; it may run while other processes search and index.
        Vectors of lines that no longer exist are dropped once every line has one.

        Args:
            max_seconds: stop after about this long (``0``: only count what is pending).
            batch_size: lines per embedder call (and per write transaction).
            progress: called as ``progress(done, pending)`` after each batch.

        Raises:
            ConfigError: no embedder (see the constructor), bad arguments, or an embedder
                that returns vectors of the wrong shape.
        """
        if max_seconds is not None and (
            isinstance(max_seconds, bool)
            or not isinstance(max_seconds, int | float)
            or max_seconds < 0
        ):
            raise ConfigError("max_seconds must be a number >= 0 or None")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size must be a positive integer")
        with self._lock:
            dense = self._dense_index(required=True)
        assert dense is not None
        embedder = dense.embedder
        started = time.perf_counter()

        def collect(engine: Engine) -> dict[bytes, str]:
            with engine.snapshot():
                files = sorted(
                    engine.files_by_id().values(),
                    key=lambda info: (not info.curated, -(info.day or 0), -info.id),
                )
                return {
                    key: text
                    for info in files
                    for _, key, text in file_texts(embedder.name, engine, info)
                }

        texts = self._run(collect, writes=False)
        missing = self._vectors.missing(texts)
        pending = [(key, text) for key, text in texts.items() if key in missing]
        done = 0
        for i in range(0, len(pending), batch_size):
            if max_seconds is not None and time.perf_counter() - started >= max_seconds:
                break
            batch = pending[i : i + batch_size]
            vectors = normalized(embedder.embed_documents([text for _, text in batch]))
            if vectors.shape != (len(batch), embedder.dim):
                raise ConfigError(
                    f"embedder {embedder.name!r} returned vectors of shape {vectors.shape} "
                    f"for {len(batch)} texts, expected ({len(batch)}, {embedder.dim})"
                )
            self._vectors.add(
                [(key, row.tobytes()) for (key, _), row in zip(batch, vectors, strict=True)]
            )
            done += len(batch)
            if progress is not None:
                progress(done, len(pending))
        left = len(pending) - done
        pruned = 0
        if left == 0 and self._vectors.count() != len(texts):
            pruned = self._vectors.prune(set(texts))
        return EmbedStats(
            embedded=done,
            pending=left,
            total=len(texts),
            removed=pruned,
            seconds=time.perf_counter() - started,
        )


def _fuse(
    engine: Engine, lexical: list[SearchHit], near: list[tuple[int, float]], limit: int
) -> list[SearchHit]:
    """Reciprocal rank fusion of the lexical hits and the nearest vectors."""
    ids = {info.path: file_id for file_id, info in engine.files_by_id().items()}
    scores: dict[int, float] = {}
    hits: dict[int, SearchHit] = {}
    for rank, hit in enumerate(lexical, start=1):
        rowid = ids[hit.path] << LINE_BITS | hit.line_number
        hits[rowid] = hit
        scores[rowid] = 1.0 / (RRF_K + rank)
    for rank, (rowid, _) in enumerate(near, start=1):
        scores[rowid] = scores.get(rowid, 0.0) + DENSE_WEIGHT / (RRF_K + rank)
    order = sorted(scores, key=lambda rowid: (-scores[rowid], -rowid))
    missing = [rowid for rowid in order if rowid not in hits]
    for row in engine.fetch(missing):
        hits[row.rowid] = hit_of(row, 0.0)
    out: list[SearchHit] = []
    seen: set[str] = set()
    for rowid in order:
        if rowid not in hits:
            continue  # a row deleted meanwhile
        hit = hits[rowid]
        text = normalize_bullet(hit.content)
        if text in seen:
            continue  # an identical line, compared as the lexical ranking compares them
        seen.add(text)
        out.append(replace(hit, score=round(scores[rowid], 6)))
        if len(out) == limit:
            break
    return out
