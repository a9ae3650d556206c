"""Nearest unit vectors ranked in PostgreSQL by pgvector, where the ``vector`` extension is there.

Whether the database has pgvector is found out once per database (and memdir schema) in a
process: the extension is used if installed, created (``CREATE EXTENSION IF NOT EXISTS
vector``, in a transaction of its own) if the server offers it and the role may, and otherwise
vectors stay ranked in Python (:class:`~memdir.index._vectors.DenseIndex`). Nothing here is in
a migration: a server without pgvector never meets a statement that needs it.

With pgvector, every vector of ``index_vectors`` is also a row of ``index_vector_ann`` (namespace,
key, dimension, ``vector``), written in the same transaction. The column has no fixed size,
because embedders differ; each dimension gets its own partial HNSW index over the column cast
to that size (``index_vector_ann_384``: ``((embedding::vector(384)) vector_ip_ops) WHERE dim =
384``), created when the first vector of that size is stored. Vectors are stored at unit length,
so the inner product is the cosine similarity :class:`DenseIndex` computes: both paths give
the same scores. A search filters by namespace and dimension (iterative index scans keep
walking the graph until enough rows of the namespace are found) and maps the keys back to the
units that hold that text now, so a deleted or changed line is never returned; a long unit's
passages are several keys of one unit, which counts once, with its best passage's score. The
graph holds every namespace: a namespace of at most :data:`EXACT_BELOW` vectors, or one whose
walk ended before it met enough of its rows, is ranked exactly instead (every vector of the
namespace compared, in SQL, found by the primary key).
"""

from __future__ import annotations

import logging
import struct
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdir.index._engine import Engine, FileInfo
from memdir.index._vectors import file_texts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memdir.embeddings import Embedder
    from memdir.store.postgres import PostgresStore
    from memdir.store.postgres._connect import Database

__all__ = ["EF_SEARCH", "EXACT_BELOW", "Ann", "KeyMap", "ann_of"]

logger = logging.getLogger("memdir.index")

EXACT_BELOW = 10_000
"""A namespace with at most this many vectors (lines, or passages of long ones) is ranked
exactly, in SQL, without the HNSW index: the graph holds every namespace's vectors, and a walk
of it finds few of a small one's."""
EF_SEARCH = 200
"""Candidates the HNSW search keeps (``hnsw.ef_search``, set per transaction): at least this,
or twice the results asked for, up to pgvector's limit of 1000."""
_MAX_EF = 1000
_MAX_SCAN = 20_000
"""Index rows an iterative scan may visit looking for the namespace's (``hnsw.max_scan_tuples``)."""


@dataclass(slots=True)
class Ann:
    """pgvector in one database: where its type lives and which dimensions have an index."""

    types: str  # the extension's schema, quoted
    oid: int  # of the ``vector`` type
    iterative: bool  # pgvector >= 0.8: iterative index scans
    table: str
    schema: str
    dims: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    broken: bool = False  # a statement failed (the extension was dropped): Python from now on

    def vector(self, data: bytes) -> Any:
        """``data`` (float32, little-endian) as a parameter of type ``vector`` (binary)."""
        import numpy as np

        values = np.frombuffer(data, dtype="<f4")
        return _Vector(struct.pack(">HH", len(values), 0) + values.astype(">f4").tobytes())

    def adapt(self, cur: Any) -> None:
        """Let ``cur`` send :class:`_Vector` parameters as binary ``vector`` values."""
        cur.adapters.register_dumper(_Vector, _dumper(self.oid))

    def ensure_dims(self, store: PostgresStore, dims: set[int]) -> None:
        """Create the HNSW index of each dimension in ``dims`` that has none yet."""
        missing = dims - self.dims
        if not missing:
            return

        def create(cur: Any) -> None:
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._key(),))
            for dim in sorted(missing):
                cur.execute(
                    f"CREATE INDEX IF NOT EXISTS index_vector_ann_{int(dim)} ON {self.table}"
                    f" USING hnsw ((embedding::{self.types}.vector({int(dim)}))"
                    f" {self.types}.vector_ip_ops) WHERE dim = {int(dim)}"
                )

        store._tx(create)
        with self.lock:
            self.dims |= missing

    def write(self, cur: Any, ns: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        """Insert the vectors ``items`` of ``ns`` (keys already there are kept)."""
        self.adapt(cur)
        cur.executemany(
            f"INSERT INTO {self.table} (ns, key, dim, embedding) VALUES (%s, %s, %s, %b)"
            " ON CONFLICT DO NOTHING",
            [(ns, key, len(data) // 4, self.vector(data)) for key, data in items],
        )

    def nearest(
        self, cur: Any, ns: str, query: npt.NDArray[np.float32], limit: int, *, exact: bool
    ) -> list[tuple[bytes, float]]:
        """The ``limit`` keys of ``ns`` nearest to the unit vector ``query``, with similarity.

        ``exact``: every vector of the namespace compared (its rows found by the primary key),
        not a walk of the HNSW index, which is shared by every namespace.
        """
        dim = int(query.shape[0])
        self.adapt(cur)
        if exact:  # the column as it is: an expression the HNSW index does not cover
            cur.execute(
                f"SELECT key, embedding OPERATOR({self.types}.<#>) %b AS distance"
                f" FROM {self.table} WHERE ns = %s AND dim = {dim} ORDER BY distance LIMIT %s",
                (self.vector(query.astype("<f4").tobytes()), ns, limit),
            )
            return [(bytes(key), -float(distance)) for key, distance in cur.fetchall()]
        ef = min(_MAX_EF, max(EF_SEARCH, 2 * limit))
        # The walk of the graph, not the planner's choice by statistics that may be stale: the
        # namespace test is no index condition, and a sequential scan is ruled out.
        settings = (
            "set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true)"
        )
        if self.iterative:
            settings += (
                ", set_config('hnsw.iterative_scan', 'strict_order', true),"
                " set_config('hnsw.max_scan_tuples', %s, true)"
            )
        cur.execute(f"SELECT {settings}", (str(ef), str(_MAX_SCAN))[: 2 if self.iterative else 1])
        cast = f"embedding::{self.types}.vector({dim})"
        cur.execute(
            f"SELECT key, {cast} OPERATOR({self.types}.<#>) %b AS distance FROM {self.table}"
            f" WHERE (ns || '') = %s AND dim = {dim} ORDER BY distance LIMIT %s",
            (self.vector(query.astype("<f4").tobytes()), ns, limit),
        )
        return [(bytes(key), -float(distance)) for key, distance in cur.fetchall()]

    def _key(self) -> str:
        return f"memdir:{self.schema}:vector_ann"


class _Vector(bytes):
    """A vector in pgvector's binary form (dimension, unused, float4 values, big-endian)."""


_DUMPERS: dict[int, type] = {}


def _dumper(oid: int) -> type:
    found = _DUMPERS.get(oid)
    if found is None:
        from psycopg.adapt import Dumper
        from psycopg.pq import Format

        class VectorDumper(Dumper):
            format = Format.BINARY

            def dump(self, obj: Any) -> bytes:
                return bytes(obj)

        VectorDumper.oid = oid
        found = _DUMPERS[oid] = VectorDumper
    return found


_UNKNOWN = object()
_FOUND: weakref.WeakKeyDictionary[Database, Ann | None] = weakref.WeakKeyDictionary()
_FOUND_LOCK = threading.Lock()


def ann_of(store: PostgresStore) -> Ann | None:
    """pgvector in the store's database, or ``None`` (looked up once per database)."""
    found = _FOUND.get(store.db, _UNKNOWN)
    if found is _UNKNOWN:
        with _FOUND_LOCK:
            found = _FOUND.get(store.db, _UNKNOWN)
            if found is _UNKNOWN:
                found = _FOUND[store.db] = _detect(store)
    assert found is None or isinstance(found, Ann)
    return None if found is None or found.broken else found


def _detect(store: PostgresStore) -> Ann | None:
    import psycopg

    schema = store.db.schema
    table = f'"{schema}".index_vector_ann'

    def offered(cur: Any) -> bool:
        cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return cur.fetchone() is not None

    def install(cur: Any) -> None:
        cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        if cur.fetchone() is None:
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended('memdir:vector', 0))")
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")

    def prepare(cur: Any) -> Ann:
        cur.execute(
            "SELECT n.nspname, t.oid, e.extversion FROM pg_extension e"
            " JOIN pg_namespace n ON n.oid = e.extnamespace"
            " JOIN pg_type t ON t.typname = 'vector' AND t.typnamespace = e.extnamespace"
            " WHERE e.extname = 'vector'"
        )
        where, oid, version = cur.fetchone()
        types = '"' + str(where).replace('"', '""') + '"'
        major_minor = tuple(int(part) for part in str(version).split(".")[:2])
        ann = Ann(types=types, oid=int(oid), iterative=major_minor >= (0, 8), table=table,
                  schema=schema)  # fmt: skip
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (ann._key(),))
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (ns text NOT NULL, key bytea NOT NULL,"
            f" dim int NOT NULL, embedding {types}.vector NOT NULL, PRIMARY KEY (ns, key))"
        )
        cur.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
            " AND tablename = 'index_vector_ann' AND indexname ~ '^index_vector_ann_[0-9]+$'",
            (schema,),
        )
        ann.dims = {int(name.rsplit("_", 1)[1]) for (name,) in cur.fetchall()}
        return ann

    try:
        if not store._tx(offered, read_only=True):
            logger.debug("pgvector is not available: vectors are ranked in Python")
            return None
        store._tx(install)
        ann: Ann = store._tx(prepare)
    except psycopg.Error as exc:  # the role may not create it, or the files are missing
        logger.info("pgvector is not used (vectors are ranked in Python): %s", exc)
        return None
    return ann


class KeyMap:
    """Which units hold the text of each vector key now (a unit's text, or one of its
    passages'), per file, refreshed by content."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._files: dict[int, tuple[bytes, list[tuple[int, bytes]]]] = {}
        self._rows: dict[bytes, list[int]] = {}
        self._passages: dict[int, int] = {}  # row id -> how many vectors (passages) it has

    def refresh(self, engine: Engine) -> None:
        """Bring the map up to date with the index (files whose content changed are reread)."""
        files = engine.files_by_id()
        for file_id in self._files.keys() - files.keys():
            self._drop(file_id)
        for file_id, info in files.items():
            known = self._files.get(file_id)
            if known is None or known[0] != info.digest:
                self._drop(file_id)
                self._add(engine, info)

    def _drop(self, file_id: int) -> None:
        known = self._files.pop(file_id, None)
        for rowid, key in known[1] if known else ():
            self._passages.pop(rowid, None)
            rows = self._rows[key]
            rows.remove(rowid)
            if not rows:
                del self._rows[key]

    def _add(self, engine: Engine, info: FileInfo) -> None:
        units = [(rowid, key) for rowid, key, _ in file_texts(self.embedder, engine, info)]
        self._files[info.id] = (info.digest, units)
        for rowid, key in units:
            self._rows.setdefault(key, []).append(rowid)
            self._passages[rowid] = self._passages.get(rowid, 0) + 1

    def __len__(self) -> int:
        """How many vectors the units have (a long unit has one per passage)."""
        return sum(len(units) for _, units in self._files.values())

    def passages(self, rowid: int) -> int:
        """How many vectors (passages) the unit of ``rowid`` has (1 for a short one)."""
        return self._passages.get(rowid, 1)

    def rows(self, key: bytes) -> list[int]:
        """The row ids whose text has this key (none: no unit holds it now)."""
        return self._rows.get(key, [])
