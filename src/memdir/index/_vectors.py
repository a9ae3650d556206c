"""Vectors of memory units for hybrid search: a derived store beside the full-text index.

Vectors live in their own database, ``<workspace>/.index/vectors.db``, keyed by a hash of the
embedder's name and the text embedded (a unit's, or one passage's of a long unit:
:mod:`memdir.index._passages`), not by row id: a line that moves (a line inserted above
it), a full re-index or a rebuilt full-text database keep their vectors, identical lines
share one, and a new embedder never meets the old one's vectors. Like the full-text index it
is derived data: a damaged file is replaced (with a warning) and the vectors computed again.

A store of an older memdir, which gave a long unit one vector of its whole text, upgrades by
itself: its passages have keys of their own, so they are pending, embedded by the next
:meth:`MemoryIndex.embed_pending`, and the whole-text vector is pruned with the other
vectors nobody holds.

:class:`DenseIndex` keeps each file's vectors as one numpy matrix in memory (a row per
passage), reloading only files whose content changed or that were waiting for vectors.
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from memdir.embeddings import document_text
from memdir.errors import IndexError_
from memdir.index._engine import Engine, FileInfo
from memdir.index._passages import passages_of
from memdir.index._schema import (
    begin_immediate,
    connect,
    connect_readonly,
    immediate,
    is_corruption,
    is_unwritable,
    remove_database,
)
from memdir.index._turns import embedded_texts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memdir.embeddings import Embedder
    from memdir.index._pg_vectors import PgVectors

__all__ = [
    "PASSAGE_PENALTY",
    "VECTORS_DB",
    "DenseIndex",
    "VectorStore",
    "unit_key",
    "unit_similarity",
]

logger = logging.getLogger("memdir.index")

VECTORS_DB = "vectors.db"
APPLICATION_ID = 0x6D647663  # "mdvc"
SCHEMA_VERSION = 1
_CHUNK = 500
_T = TypeVar("_T")


def unit_key(model: str, text: str) -> bytes:
    """The store key of ``text`` embedded by ``model``."""
    return hashlib.blake2b(f"{model}\0{text}".encode(), digest_size=16).digest()


class VectorStore:
    """``vectors.db``: unit vectors by key (the embedder setting is in ``settings.json``).

    In a workspace that cannot be written an existing store is opened read-only: searches
    use its vectors, and adding vectors fails with :class:`IndexError_`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._con: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._opened = 0  # connections made: a replaced file may reuse the inode number
        self._lock = threading.RLock()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def exists(self) -> bool:
        """Whether the database file exists (nothing was ever stored if not).

        A connection to a file that was deleted or replaced since (``memdir index
        --embedder off`` in another process) is closed, so the next use opens the new one.
        """
        try:
            st = self.path.stat()
        except FileNotFoundError:
            identity = None
        else:
            identity = (st.st_dev, st.st_ino)
        with self._lock:
            if self._con is not None and identity != self._identity:
                self.close()
        return identity is not None

    def _connect(self) -> sqlite3.Connection:
        if self._con is None:
            try:
                self._con = self._open()
            except (sqlite3.DatabaseError, OSError) as exc:
                self._con = self._recover(exc)
            self._opened += 1
            try:
                st = self.path.stat()
            except OSError as exc:
                self.close()
                raise IndexError_(f"cannot open {self.path}: {exc.strerror or exc}") from exc
            self._identity = (st.st_dev, st.st_ino)
        return self._con

    def _recover(self, exc: BaseException) -> sqlite3.Connection:
        """A connection after opening failed: a fresh store, or a read-only one."""
        if is_corruption(exc):
            try:
                return self._replace(f"it is damaged ({exc})")
            except (sqlite3.DatabaseError, OSError) as again:
                raise IndexError_(f"cannot replace the damaged {self.path}: {again}") from again
        if is_unwritable(exc) and self.path.is_file():
            try:  # a read-only workspace: search with the vectors there are
                return connect_readonly(self.path)
            except sqlite3.Error as again:
                raise IndexError_(f"cannot open {self.path}: {again}") from again
        raise IndexError_(f"cannot open {self.path}: {exc}") from exc

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = connect(self.path)
        try:
            app = con.execute("PRAGMA application_id").fetchone()[0]
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if (app, version) == (APPLICATION_ID, SCHEMA_VERSION):
                return con
            names = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app != 0 or version != 0 or names:
                con.close()
                return self._replace("it is not a memdir vector store of this version")
            begin_immediate(con)
            con.execute(
                "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                " WITHOUT ROWID"
            )
            con.execute(
                # a rowid table: WITHOUT ROWID stores 1.5 kB rows badly (3x the size)
                "CREATE TABLE IF NOT EXISTS vectors(key BLOB PRIMARY KEY, vec BLOB NOT NULL)"
            )
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            con.execute("COMMIT")
        except BaseException:
            con.close()
            raise
        return con

    def _replace(self, problem: str) -> sqlite3.Connection:
        message = f"memdir vector store {self.path} was reset: {problem}; vectors are recomputed"
        warnings.warn(message, RuntimeWarning, stacklevel=5)
        logger.warning("%s", message)
        remove_database(self.path)
        return self._open()

    def delete(self) -> None:
        """Close and delete the store (its vectors).

        Raises:
            IndexError_: the files cannot be removed.
        """
        with self._lock:
            self.close()
            try:
                remove_database(self.path)
            except OSError as exc:
                raise IndexError_(f"cannot remove {self.path}: {exc.strerror or exc}") from exc

    def _healing(self, use: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``use`` on the connection; a store found damaged meanwhile is reset, once."""
        with self._lock:
            try:
                return use(self._connect())
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                self.close()
                self._con = self._recover(exc)
                self._opened += 1
                st = self.path.stat()
                self._identity = (st.st_dev, st.st_ino)
            return use(self._con)

    def _write(self, change: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``change`` in a write transaction.

        Raises:
            IndexError_: the store cannot be written (a read-only workspace, a full disk).
        """

        def attempt(con: sqlite3.Connection) -> _T:
            with immediate(con):
                return change(con)

        try:
            return self._healing(attempt)
        except sqlite3.Error as exc:
            if not is_unwritable(exc):
                raise
            raise IndexError_(f"cannot write {self.path}: {exc}") from exc

    def _get(self, key: str) -> str | None:
        found = self._healing(
            lambda con: con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        )
        return None if found is None else str(found[0])

    def legacy_embedder_name(self) -> str | None:
        """The embedder setting an older memdir kept here (now in ``settings.json``), if any.

        Never raises: a store that cannot be read has no setting to give.
        """
        if not self.exists():
            return None
        try:
            return self._get("embedder")
        except (IndexError_, sqlite3.Error):
            return None

    def version(self) -> tuple[int, int]:
        """What changes whenever vectors are added, or the store is reopened or replaced."""
        generation = self.generation()
        return self._opened, generation

    def generation(self) -> int:
        """A number that grows whenever vectors are added (it restarts with a new store)."""
        if not self.exists():
            return 0
        value = self._get("generation")
        return int(value) if value else 0

    def _by_keys(self, columns: str, keys: Sequence[bytes]) -> list[tuple[bytes, ...]]:
        """``SELECT columns`` of the rows whose key is in ``keys`` (blobs as ``bytes``)."""

        def read(con: sqlite3.Connection) -> list[tuple[bytes, ...]]:
            out: list[tuple[bytes, ...]] = []
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i : i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT {columns} FROM vectors WHERE key IN ({marks})"
                out.extend(tuple(bytes(value) for value in row) for row in con.execute(sql, chunk))
            return out

        return self._healing(read)

    def missing(self, keys: Iterable[bytes]) -> set[bytes]:
        """The keys among ``keys`` that have no vector yet (reads keys, not vectors)."""
        wanted = list(dict.fromkeys(keys))
        return set(wanted) - {row[0] for row in self._by_keys("key", wanted)}

    def load(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Stored vectors (raw float32 bytes) for ``keys``; absent keys are left out."""
        out: dict[bytes, bytes] = {}
        for key, vec in self._by_keys("key, vec", keys):
            out[key] = vec
        return out

    def add(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        """Store vectors (one transaction); keys already present are kept."""
        if not items:
            return

        def change(con: sqlite3.Connection) -> None:
            con.executemany("INSERT OR IGNORE INTO vectors(key, vec) VALUES (?, ?)", items)
            row = con.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            con.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?)",
                (str(int(row[0]) + 1 if row else 1),),
            )

        self._write(change)

    def prune(self, keep: set[bytes]) -> int:
        """Delete every vector whose key is not in ``keep``; returns how many went."""

        def change(con: sqlite3.Connection) -> int:
            con.execute("CREATE TEMP TABLE IF NOT EXISTS keep(key BLOB PRIMARY KEY) WITHOUT ROWID")
            con.execute("DELETE FROM temp.keep")
            con.executemany("INSERT OR IGNORE INTO temp.keep(key) VALUES (?)", ((k,) for k in keep))
            cursor = con.execute("DELETE FROM vectors WHERE key NOT IN (SELECT key FROM temp.keep)")
            con.execute("DELETE FROM temp.keep")
            return cursor.rowcount

        return self._write(change)

    def count(self) -> int:
        """Number of stored vectors."""
        if not self.exists():
            return 0
        return int(
            self._healing(lambda con: con.execute("SELECT count(*) FROM vectors").fetchone()[0])
        )


@dataclass(slots=True)
class _FileVectors:
    digest: bytes
    version: tuple[int, int]
    complete: bool
    rowids: npt.NDArray[np.int64]  # one per unit that has a vector
    matrix: npt.NDArray[np.float32]  # one row per passage, a unit's rows next to each other
    starts: npt.NDArray[np.intp] | None  # each unit's first row; None: one row per unit

    def scores(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Each unit's similarity to ``query``: its best passage's."""
        import numpy as np

        # einsum, not ``@``: BLAS threads wait badly for a busy core (at 100k lines,
        # p90 400 ms on a loaded two-core machine, against 7 ms on one thread)
        rows: npt.NDArray[np.float32] = np.einsum("ij,j->i", self.matrix, query)
        if self.starts is None:
            return rows
        best: npt.NDArray[np.float32] = np.maximum.reduceat(rows, self.starts)
        return best

    def penalties(self) -> npt.NDArray[np.float32]:
        """What each unit's similarity loses in the ranking for its number of passages
        (:func:`unit_similarity`)."""
        import numpy as np

        if self.starts is None:
            return np.zeros(len(self.rowids), dtype=np.float32)
        counts = np.diff(np.append(self.starts, len(self.matrix)))
        penalty: npt.NDArray[np.float32] = (PASSAGE_PENALTY * np.log2(counts)).astype(np.float32)
        return penalty


PASSAGE_PENALTY: Final = 0.03
"""A unit cut into ``n`` passages is ranked by its best passage's similarity less
``PASSAGE_PENALTY * log2(n)``: the best of many passages is high by chance far more often than
one text is, so without it long messages crowd the vector ranking (docs/benchmarks.md, "Hybrid
search on long messages"). The similarity floor reads the best passage's similarity itself:
whether any passage is close to the query."""


def unit_similarity(best: float, passages: int) -> float:
    """The ranking score of a unit whose best of ``passages`` passages has similarity
    ``best``."""
    return best - PASSAGE_PENALTY * math.log2(passages) if passages > 1 else best


def file_texts(embedder: Embedder, engine: Engine, info: FileInfo) -> list[tuple[int, bytes, str]]:
    """``(row id, key, text)`` of each passage of each unit of a file that has text to embed,
    in unit order (a unit's passages next to each other). The text is the unit's, after the
    turn it answers for a dialogue turn (:mod:`memdir.index._turns`), cut into passages when
    it is longer than the embedder reads (:mod:`memdir.index._passages`)."""
    model = embedder.name
    units = engine.units_of(info.id)
    texts = embedded_texts([(head, document_text(content)) for _, head, content in units])
    return [
        (rowid, unit_key(model, passage), passage)
        for (rowid, _, _), text in zip(units, texts, strict=True)
        for passage in passages_of(embedder, text)
    ]


class DenseIndex:
    """Nearest units to a query vector, over per-file matrices cached in memory.

    A file's matrix is reloaded when its content changed, or when it was waiting for vectors
    and new ones were stored since. Units without a vector yet are simply not candidates.
    """

    def __init__(self, store: VectorStore | PgVectors, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._files: dict[int, _FileVectors] = {}

    def _load(self, engine: Engine, info: FileInfo, version: tuple[int, int]) -> _FileVectors:
        import numpy as np

        passages = file_texts(self.embedder, engine, info)
        found = self.store.load([key for _, key, _ in passages])
        dim = self.embedder.dim
        rowids: list[int] = []
        starts: list[int] = []
        vectors: list[bytes] = []
        for rowid, key, _ in passages:
            vec = found.get(key)
            if vec is not None and len(vec) == 4 * dim:
                if not rowids or rowids[-1] != rowid:
                    rowids.append(rowid)
                    starts.append(len(vectors))
                vectors.append(vec)
        matrix = np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(vectors), dim)
        return _FileVectors(
            digest=info.digest,
            version=version,
            complete=len(vectors) == len(passages),
            rowids=np.asarray(rowids, dtype=np.int64),
            matrix=matrix,
            starts=None if len(starts) == len(vectors) else np.asarray(starts, dtype=np.intp),
        )

    def search(
        self, engine: Engine, query: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        """The ``k`` units most similar to ``query`` (cosine > 0), as ``(row id, similarity)``:
        a unit's similarity is its best passage's; they are ranked by :func:`unit_similarity`."""
        import numpy as np

        files = engine.files_by_id()
        version = self.store.version()
        for file_id in self._files.keys() - files.keys():
            del self._files[file_id]
        scores: list[npt.NDArray[np.float32]] = []
        penalties: list[npt.NDArray[np.float32]] = []
        ids: list[npt.NDArray[np.int64]] = []
        for file_id, info in files.items():
            entry = self._files.get(file_id)
            if (
                entry is None
                or entry.digest != info.digest
                or (not entry.complete and entry.version != version)
            ):
                entry = self._files[file_id] = self._load(engine, info, version)
            if len(entry.rowids):
                scores.append(entry.scores(query))
                penalties.append(entry.penalties())
                ids.append(entry.rowids)
        if not scores:
            return []
        every = np.concatenate(scores)
        ranked = every - np.concatenate(penalties)
        rowids = np.concatenate(ids)
        k = min(k, len(every))
        top = np.argpartition(-ranked, k - 1)[:k]
        top = top[np.lexsort((-rowids[top], -ranked[top]))]  # ties: the newer line first
        # A vector orthogonal to the query (or a zero vector) shares nothing with it.
        return [(int(rowids[i]), float(every[i])) for i in top if every[i] > 0]


def normalized(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length (zero rows stay zero), as contiguous float32."""
    import numpy as np

    array = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    out: npt.NDArray[np.float32] = (array / norms).astype(np.float32, copy=False)
    return out
