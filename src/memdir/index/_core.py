"""``MemoryIndex``: the workspace's search index (public API)."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from memdir.embeddings import Embedder, check_min_similarity, embedder_from_string
from memdir.errors import ConfigError, IndexError_, ModelError, ToolInputError, WorkspaceError
from memdir.index import _rank
from memdir.index._clauses import question_clauses, without_answer_form
from memdir.index._default_embedder import AUTO, OFF, resolve
from memdir.index._engine import Engine, FileSnapshot
from memdir.index._fallback import Unwritable
from memdir.index._hybrid import (
    DENSE_WEIGHT,
    FUSION_DEPTH,
    RRF_K,
    dense_weight,
    embed_pending,
    fuse,
    lexical_rows,
    min_similarity,
    nearest,
    query_vector,
    vector_ranking,
)
from memdir.index._indexing import MAX_SEGMENTS, Damaged, sync_one, sync_workspace
from memdir.index._paths import check_memory_path, snapshot_of_text
from memdir.index._pg_settings import StoreSettings
from memdir.index._pg_store import PgIndexStore
from memdir.index._pg_vectors import PgVectors
from memdir.index._query import Term, analyze_query, is_conversation
from memdir.index._search import run_search
from memdir.index._settings import SETTINGS_NAME, SearchSettings
from memdir.index._source import source_of
from memdir.index._store import IndexStore
from memdir.index._types import EmbedStats, IndexStats, IndexStatus, SearchHit
from memdir.index._updates import with_updates
from memdir.index._vectors import VECTORS_DB, DenseIndex, VectorStore
from memdir.store.workspace import Workspace

__all__ = ["DB_NAME", "DENSE_WEIGHT", "FUSION_DEPTH", "MAX_LIMIT", "RRF_K", "MemoryIndex"]

logger = logging.getLogger("memdir.index")

DB_NAME = "memory_index.db"
MAX_LIMIT = 1_000
"""The most hits one search returns."""

_T = TypeVar("_T")


class MemoryIndex:
    """Full-text index over a workspace's memory files, one SQLite database per workspace.

    The database lives at ``<workspace>/.index/memory_index.db`` and holds ``MEMORY.md``,
    ``memory/*.md`` and ``memory/archive/*.md``. It is derived data: a damaged or foreign
    database, whether found on opening or while searching, is rebuilt from the files with a
    warning. Several processes may index and search the same workspace at once (WAL mode,
    short per-file write transactions, waits for the write lock of up to 15 s).

    Search keeps answering in a workspace whose index cannot be written (read-only, or a
    full disk): it reads the database read-only, or an index of the files kept in memory,
    with a warning; writes to the index raise :class:`~memdir.errors.IndexError_` meanwhile.

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
            (:meth:`set_default_embedder`, ``memdir index --embedder NAME``); when none is
            set, the bundled e5 if ``memdir[embeddings]`` is installed, else lexical only;
            ``False``: lexical only; a name such as ``"e5"``; or any
            :class:`~memdir.embeddings.Embedder`.

    Raises:
        ConfigError: ``embedder`` is not one of those, or names an unknown embedder; the
            workspace is on a ``memdir serve`` server (its index is the server's).
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | str | bool | None = None,
    ) -> None:
        self.workspace = Workspace.coerce(workspace)
        if self.workspace.remote is not None:
            raise ConfigError(
                f"the search index of {self.workspace.describe()} is the server's: search it "
                "with memory_search or memdir search (shared_index gives it); the server "
                "indexes what it stores"
            )
        self._store: IndexStore | PgIndexStore
        if self.workspace.is_local:
            self.path: Path | None = self.workspace.index_dir / DB_NAME
            """The SQLite database (``None``: the index is kept in PostgreSQL)."""
            self._store = IndexStore(self.workspace, self.workspace.index_dir / DB_NAME)
        else:  # the index is rows beside the files (memdir.index._postgres)
            self.path = None
            self._store = PgIndexStore(self.workspace)
        self._lock = self._store.lock
        if embedder is True:
            raise ConfigError("embedder=True is ambiguous: pass a name such as 'e5'")
        if isinstance(embedder, str):
            embedder = embedder_from_string(embedder)
        elif embedder is not None and embedder is not False and not isinstance(embedder, Embedder):
            raise ConfigError(
                "embedder must be None, False, a name such as 'e5', or an Embedder "
                f"(with name, dim, embed_documents and embed_query), not {type(embedder).__name__}"
            )
        if embedder is not None and embedder is not False:
            declared = getattr(embedder, "min_similarity", None)
            if declared is not None:
                check_min_similarity(declared, "the embedder's min_similarity")
        self._embedder_arg: Embedder | bool | None = embedder
        self._vectors: VectorStore | PgVectors
        self._settings: SearchSettings | StoreSettings
        if self.workspace.is_local:
            self._vectors = VectorStore(self.workspace.index_dir / VECTORS_DB)
            self._settings = SearchSettings(self.workspace.index_dir / SETTINGS_NAME)
        else:
            self._vectors = PgVectors(self.workspace)
            self._settings = StoreSettings(self.workspace)
        self._dense: DenseIndex | None = None
        self._dense_name: str | None = None  # the workspace setting ``_dense`` was made for
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        where = self.workspace.root if self.workspace.is_local else self.workspace.describe()
        return f"MemoryIndex({str(where)!r})"

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> MemoryIndex:
        """Open the database (creating, migrating or rebuilding it as needed); returns self.

        In a workspace where it cannot be written, searches use a read-only or in-memory
        index instead (with a warning).

        Raises:
            IndexError_: the database cannot be opened for another reason.
        """
        self._store.open()
        return self

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            self._store.close()
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

    def _run(self, action: Callable[[Engine], _T], *, writes: bool) -> _T:
        return self._store.run(action, writes=writes)

    def _write(self, action: Callable[[], _T]) -> _T:
        return self._store.write(action)

    # -- indexing -----------------------------------------------------------------------

    def index_all_from_workspace(
        self,
        *,
        full: bool = False,
        check: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> IndexStats:
        """Bring the index in line with every memory file.

        Unchanged files are skipped (same size and mtime, else same content hash); changed
        files are diffed, so only new or edited lines are written; rows of deleted files are
        removed. Each file is synced in its own short transaction.

        Args:
            full: drop everything and index every file again.
            check: also look for damage (an integrity check of the database, and every
                stored line against its file) and rebuild the database if there is any;
                ``memdir index`` does. About 0.3 s per 100k lines.
            progress: called as ``progress(done, total)`` after each file.

        Raises:
            IndexError_: the database cannot be written (a read-only workspace, a full
                disk); searches keep answering meanwhile.
        """

        def sync(engine: Engine) -> IndexStats:
            if check and (found := engine.damage()) is not None:
                raise Damaged(f"it is damaged ({found})")
            return self._write(
                lambda: sync_workspace(
                    self.workspace, engine, full=full, check=check, progress=progress
                )
            )

        stats = self._run(sync, writes=True)
        self._store.written()  # the database can be written (again): searches use it
        return stats

    def refresh(self) -> IndexStats:
        """Cheap staleness check: sync only files whose size or mtime changed, drop deleted ones.

        Call it before searching when the files may have changed; a search itself never
        indexes. When the database cannot be written (a read-only workspace, a full disk)
        the index searches use instead is brought up to date, with a warning.
        """
        try:
            return self.index_all_from_workspace()
        except Unwritable as exc:
            return self._store.refresh_fallback(exc)

    def optimize(self, *, above: int = MAX_SEGMENTS) -> bool:
        """Merge the search index's segments when it has more than ``above`` of them.

        Each write adds a segment and a search looks a term up in each one; merging them
        keeps searches fast on a long-lived index (results are unchanged). A build or an
        import that writes many lines merges by itself; maintenance calls this. Returns
        whether it merged (never on PostgreSQL, whose posting lists need no merging).

        Raises:
            ConfigError: ``above`` is below 1.
            IndexError_: the database cannot be written.
        """
        if isinstance(above, bool) or not isinstance(above, int) or above < 1:
            raise ConfigError(f"above must be a whole number of at least 1, got {above!r}")
        return self._run(lambda e: self._write(lambda: e.optimize(above=above)), writes=True)

    def index_file(self, rel: str) -> int:
        """Re-read one memory file from disk and index what changed; returns its unit count.

        A file that only grew is read from its old end on. A missing file has its rows
        removed (returns 0).

        Raises:
            WorkspaceError: ``rel`` leaves the workspace or is not a memory file.
            IndexError_: the database cannot be written.
        """
        rel = check_memory_path(self.workspace.relpath(rel))
        return self._run(
            lambda e: self._write(lambda: sync_one(self.workspace, e, rel, tail=True).units),
            writes=True,
        )

    def index_appended(self, rel: str, offset: int) -> int:
        """Index what was appended to memory file ``rel``; return the line starting at ``offset``.

        For an append (:meth:`Workspace.append_text` returns the offset where its text
        starts): when the file only grew since it was indexed, only its end is read, so the
        cost follows what was appended, not the size of the file. Otherwise it is read
        whole, like :meth:`index_file`.

        Returns:
            The 1-based number of the line that starts at byte ``offset``.

        Raises:
            WorkspaceError: ``rel`` is not a memory file, or it is gone.
            IndexError_: the database cannot be written.
        """
        rel = check_memory_path(self.workspace.relpath(rel))
        source = source_of(self.workspace)

        def go(engine: Engine) -> int:
            result = sync_one(source, engine, rel, tail=True, mark=offset)
            if result.line is not None:
                return result.line
            snap = source.load(rel)  # read whole anyway: count the lines before
            if snap is None:
                raise WorkspaceError(f"{rel} is gone")
            return 1 + snap.data.count(b"\n", 0, offset)

        return self._run(lambda e: self._write(lambda: go(e)), writes=True)

    def index_from_string(self, rel: str, text: str) -> int:
        """Index ``text`` as the content of memory file ``rel`` (e.g. just written by the caller).

        The next :meth:`refresh` re-reads the file and compares hashes, so the file on disk
        stays the truth. Returns the number of searchable units.

        Raises:
            WorkspaceError: ``rel`` is not a memory file path.
            ToolInputError: ``text`` is not a string.
            IndexError_: the database cannot be written.
        """
        if not isinstance(text, str):
            raise ToolInputError("text must be a string")
        rel = check_memory_path(self.workspace.relpath(rel))
        snap: FileSnapshot = snapshot_of_text(text)
        return self._run(
            lambda e: self._write(lambda: e.sync_file(rel, lambda: snap).units), writes=True
        )

    # -- search -------------------------------------------------------------------------

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Ranked hits for ``query`` (best first, at most ``limit``). Never indexes.

        Any string is safe: FTS5 syntax in it is treated as plain words. A blank query, or
        one made only of punctuation, returns ``[]``. A damaged database is rebuilt from the
        files (with a warning); one that cannot be written is searched read-only, or an
        index of the files is built in memory (see :meth:`refresh`).

        Raises:
            ToolInputError: ``query`` is not a string or ``limit`` is not 1..1000.
        """
        if not isinstance(query, str):
            raise ToolInputError("query must be a string")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ToolInputError(f"limit must be an integer from 1 to {MAX_LIMIT}")
        if not query.strip():
            return []
        query = without_answer_form(query)
        terms = analyze_query(query)
        questions = question_clauses(query, terms)
        dense, vectors = self._query_side([query, *(q.text for q in questions)], terms)
        floor = 0.0 if dense is None else min_similarity(dense.embedder, query)
        today = self.workspace.today()

        def lexical(engine: Engine, depth: int) -> list[SearchHit]:
            return run_search(engine, query, depth, today=today, terms=terms, questions=questions)

        def go(engine: Engine) -> list[SearchHit]:
            with engine.snapshot():
                if dense is None or not vectors:
                    return lexical(engine, limit)
                depth = max(limit, FUSION_DEPTH)
                words = lexical(engine, depth)
                try:
                    found = [nearest(dense, engine, vector, depth) for vector in vectors]
                except IndexError_ as exc:  # vectors.db cannot be read or replaced
                    self._warn_once(f"memdir search is lexical only: {exc}")
                    found = []
                rows = lexical_rows(engine, words)
                near, hidden = vector_ranking(found, set(rows), floor)
                if len(hidden) == len(near):  # nothing to add: the lexical ranking as it is
                    return words[:limit]
                return fuse(
                    engine,
                    words,
                    near[:depth],
                    limit,
                    weight=dense_weight(terms),
                    rows=rows,
                    hidden=hidden,
                    lead=not is_conversation(terms),
                )

        from memdir.provenance._why import with_sources  # reads the memory package: lazily

        hits = self._run(go, writes=False)
        if _rank.DEFAULT.updates:
            hits = with_updates(hits, query, terms, _rank.DEFAULT)
        return with_sources(self.workspace, hits)

    def _query_side(
        self, texts: Sequence[str], terms: Sequence[Term]
    ) -> tuple[DenseIndex | None, list[Any]]:
        """The vector side of a search and the vectors to search for, one per text of
        ``texts`` (the query, then each question of a compound question:
        :mod:`memdir.index._clauses`; ``terms``: the query analysed); none for lexical
        only."""
        with self._lock:
            dense = self._dense_index()
        if dense is None or not terms:
            return None, []
        try:
            if self._vectors.generation() == 0:
                return None, []
            return dense, [query_vector(dense, text) for text in texts]
        except ModelError as exc:  # an embedding service is down: still answer
            logger.warning("memdir search is lexical only for this query: %s", exc)
        except IndexError_ as exc:  # vectors.db cannot be read or replaced
            self._warn_once(f"memdir search is lexical only: {exc}")
        return None, []

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            logger.warning("%s", message)

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
        name, choice = resolve(self._settings.embedder(legacy=self._vectors.legacy_embedder_name))
        if name is None:
            if required:
                raise ConfigError(
                    "no embedder is set for this workspace (hybrid search is off): run "
                    "`memdir index --embedder e5` or pass embedder= to MemoryIndex"
                    if choice == "off"
                    else "no embedder is set for this workspace and none is installed: "
                    "pip install 'memdir[embeddings]' for the bundled e5, or run "
                    "`memdir index --embedder NAME`"
                )
            self._dense = self._dense_name = None
            return None
        if self._dense is None or name != self._dense_name:
            try:
                embedder = embedder_from_string(name)
            except ConfigError as exc:
                if required:
                    raise
                if choice == "automatic":  # the package imports but will not load: lexical
                    logger.debug("bundled embedder unavailable: %s", exc)
                    return None
                if name not in self._warned:
                    self._warned.add(name)
                    message = f"memdir search is lexical only: embedder {name!r}: {exc}"
                    warnings.warn(message, RuntimeWarning, stacklevel=4)
                    logger.warning("%s", message)
                return None
            self._dense, self._dense_name = DenseIndex(self._vectors, embedder), name
        return self._dense

    @property
    def embedder(self) -> Embedder | None:
        """The embedder searches use, or ``None`` when search is lexical only."""
        with self._lock:
            dense = self._dense_index()
        return None if dense is None else dense.embedder

    def status(self) -> IndexStatus:
        """What the index holds and how search runs, without indexing or embedding anything.

        Raises:
            IndexError_: the database cannot be read.
        """
        setting = self._settings.embedder(legacy=self._vectors.legacy_embedder_name)
        choice = resolve(setting)[1] if self._embedder_arg is None else "argument"
        if self._embedder_arg is False:
            choice = "off"
        files, units = self._run(lambda e: (len(e.files()), e.totals()[0]), writes=False)
        with self._lock:
            try:
                dense = self._dense_index()
            except ConfigError:
                dense = None
        if dense is None:
            return IndexStatus(files=files, lines=units, embedder=None, choice=choice)
        counted = self.embed_pending(max_seconds=0)
        return IndexStatus(
            files=files,
            lines=units,
            embedder=dense.embedder.name,
            choice=choice,
            vectors=counted.total - counted.pending,
            pending=counted.pending,
        )

    def set_default_embedder(self, name: str | None) -> None:
        """Set the embedder this workspace's searches use by default.

        ``None`` or ``"off"``: lexical only, whatever is installed (the stored vectors, derived
        data, are deleted); ``"auto"``: back to the automatic choice (the bundled e5 when
        ``memdir[embeddings]`` is installed, else lexical). The setting lives in
        ``.index/settings.json`` (a settings row in PostgreSQL), apart from the derived
        databases, so every process and tool that opens the workspace's index with the
        default ``embedder=None`` uses it, and it survives a damaged ``vectors.db``.

        Raises:
            ConfigError: unknown name, or its package is not installed.
            WorkspaceError: the setting cannot be written.
        """
        if name is not None and not isinstance(name, str):
            raise ConfigError(f"embedder name must be a string or None, not {type(name).__name__}")
        with self._lock:
            if name is None or name.strip().lower() == OFF:
                self._settings.set_embedder(OFF)
                self._vectors.delete()
                self._dense = self._dense_name = None
                return
            if name.strip().lower() == AUTO:
                self._settings.set_embedder(None)
                self._dense = self._dense_name = None
                return
            embedder = embedder_from_string(name)  # fails early on a bad name
            canonical = name.strip().lower()
            self.workspace.init()
            self._settings.set_embedder(canonical)
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
        """Compute the vectors that memory lines are missing: the lines that fit one passage
        first, newest files first, then the passages of longer lines.

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
            IndexError_: ``vectors.db`` cannot be written.
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
        return embed_pending(
            dense,
            self._vectors,
            lambda collect: self._run(collect, writes=False),
            max_seconds=max_seconds,
            batch_size=batch_size,
            progress=progress,
        )
