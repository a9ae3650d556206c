"""Vectors of a PostgreSQL workspace's memory units: rows of ``index_vectors``, per namespace.

The counterpart of ``vectors.db`` (:class:`memdir.index._vectors.VectorStore`), with the same
methods: vectors are keyed by a hash of the embedder's name and the unit's text, so they
survive a rebuilt index. A namespace's ``vectors_generation`` setting grows with every batch
added, which tells other processes' caches to reload.

Where the database has pgvector (:mod:`memdir.index._pg_ann`), each vector is also written to
``index_vector_ann`` in the same transaction and :meth:`PgVectors.nearest` ranks them with an
HNSW index; the ``vectors_ann`` setting equals ``vectors_generation`` while that copy is
complete. Otherwise (or while the copy is behind, until :meth:`PgVectors.mirror` catches up)
they are ranked in Python by :class:`~memdir.index._vectors.DenseIndex`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memdir.index import _pg_ann
from memdir.index._pg_ann import Ann, KeyMap, ann_of
from memdir.index._vectors import unit_similarity
from memdir.store.workspace import Workspace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memdir.embeddings import Embedder
    from memdir.index._engine import Engine

__all__ = ["PgVectors"]

logger = logging.getLogger("memdir.index")

_MIRROR_BATCH = 2_000
_MAX_FETCH = 10_000


class PgVectors:
    """A namespace's unit vectors in its database."""

    def __init__(self, workspace: Workspace) -> None:
        from memdir.store.postgres import PostgresStore

        store = workspace.store
        assert isinstance(store, PostgresStore)
        self._store = store
        self.ns = store.ns
        schema = f'"{store.db.schema}"'
        self._vectors = f"{schema}.index_vectors"
        self._settings = f"{schema}.index_settings"
        self._maps: dict[str, KeyMap] = {}

    def _run(self, fn: Any, *, read_only: bool = False) -> Any:
        return self._store._tx(fn, read_only=read_only)

    def ann(self) -> Ann | None:
        """pgvector in this database, or ``None``: vectors are ranked in Python."""
        return ann_of(self._store)

    def close(self) -> None:
        """Nothing to close: the store's pool is shared."""

    def exists(self) -> bool:
        """Whether any vector was ever stored for this namespace (since the last delete)."""
        return self.generation() > 0

    def legacy_embedder_name(self) -> str | None:
        """``None``: no older store kept the setting here."""
        return None

    def _counters(self, cur: Any, *, lock: bool = False) -> tuple[int, int]:
        """``(vectors_generation, vectors_ann)`` of the namespace (``0``: none)."""
        cur.execute(
            f"SELECT name, value FROM {self._settings} WHERE ns = %s"
            " AND name IN ('vectors_generation', 'vectors_ann')" + (" FOR UPDATE" if lock else ""),
            (self.ns,),
        )
        values = {name: int(value) for name, value in cur.fetchall()}
        return values.get("vectors_generation", 0), values.get("vectors_ann", 0)

    def generation(self) -> int:
        """A number that grows whenever vectors are added (``0``: none stored)."""
        found: int = self._run(lambda cur: self._counters(cur)[0], read_only=True)
        return found

    def version(self) -> tuple[int, int]:
        """What changes whenever vectors are added or deleted."""
        return 0, self.generation()

    def delete(self) -> None:
        """Delete every vector of the namespace."""
        ann = self.ann()

        def change(cur: Any) -> None:
            cur.execute(f"DELETE FROM {self._vectors} WHERE ns = %s", (self.ns,))
            if ann is not None:
                cur.execute(f"DELETE FROM {ann.table} WHERE ns = %s", (self.ns,))
            cur.execute(
                f"DELETE FROM {self._settings} WHERE ns = %s"
                " AND name IN ('vectors_generation', 'vectors_ann')",
                (self.ns,),
            )

        self._run(change)

    def _by_keys(self, keys: Sequence[bytes], *, data: bool) -> list[tuple[bytes, bytes | None]]:
        columns = "key, data" if data else "key, NULL"

        def read(cur: Any) -> list[tuple[bytes, bytes | None]]:
            cur.execute(
                f"SELECT {columns} FROM {self._vectors} WHERE ns = %s AND key = ANY(%s)",
                (self.ns, list(keys)),
            )
            return [(bytes(k), None if v is None else bytes(v)) for k, v in cur.fetchall()]

        if not keys:
            return []
        found: list[tuple[bytes, bytes | None]] = self._run(read, read_only=True)
        return found

    def missing(self, keys: Iterable[bytes]) -> set[bytes]:
        """The keys among ``keys`` that have no vector yet."""
        wanted = list(dict.fromkeys(keys))
        return set(wanted) - {key for key, _ in self._by_keys(wanted, data=False)}

    def load(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Stored vectors (raw float32 bytes) for ``keys``; absent keys are left out."""
        return {key: vec for key, vec in self._by_keys(keys, data=True) if vec is not None}

    def add(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        """Store vectors (one transaction); keys already present are kept.

        With pgvector they are written to ``index_vector_ann`` as well; should that fail (the
        extension was dropped), they are still stored and ranked in Python from then on.
        """
        if not items:
            return
        ann = self.ann()
        if ann is not None:
            ann.ensure_dims(self._store, {len(data) // 4 for _, data in items})

        def change(cur: Any) -> None:
            cur.execute(
                f"INSERT INTO {self._vectors} (ns, key, data) SELECT %s, * FROM"
                " unnest(%s::bytea[], %s::bytea[]) ON CONFLICT DO NOTHING",
                (self.ns, [k for k, _ in items], [v for _, v in items]),
            )
            cur.execute(
                f"INSERT INTO {self._settings} (ns, name, value) VALUES"
                " (%s, 'vectors_generation', '1') ON CONFLICT (ns, name) DO UPDATE SET"
                f" value = ({self._settings}.value::bigint + 1)::text RETURNING value",
                (self.ns,),
            )
            new = int(cur.fetchone()[0])
            if ann is not None and self._mirrored(cur, ann, items):
                self._mark(cur, new, previous=new - 1)

        self._run(change)

    def _mirrored(self, cur: Any, ann: Ann, items: Sequence[tuple[bytes, bytes]]) -> bool:
        """Write ``items`` to the pgvector table (in a savepoint); whether that worked."""
        import psycopg

        try:
            with cur.connection.transaction():
                ann.write(cur, self.ns, items)
        except psycopg.Error as exc:
            ann.broken = True
            logger.warning("pgvector failed, vectors are ranked in Python from now on: %s", exc)
            return False
        return True

    def _mark(self, cur: Any, generation: int, *, previous: int | None) -> None:
        """Record that the pgvector copy holds every vector up to ``generation``.

        With ``previous``, only if it held every vector up to ``previous`` (one batch ago).
        """
        if previous is None or previous == 0:
            cur.execute(
                f"INSERT INTO {self._settings} (ns, name, value) VALUES (%s, 'vectors_ann', %s)"
                " ON CONFLICT (ns, name) DO UPDATE SET value = EXCLUDED.value"
                + ("" if previous is None else f" WHERE {self._settings}.value = '0'"),
                (self.ns, str(generation)),
            )
        else:
            cur.execute(
                f"UPDATE {self._settings} SET value = %s WHERE ns = %s AND name = 'vectors_ann'"
                " AND value = %s",
                (str(generation), self.ns, str(previous)),
            )

    def mirror(self) -> int:
        """Copy to pgvector the vectors stored without it (by an older memdir, or before the
        extension was installed); returns how many. Nothing to do without pgvector.
        """
        ann = self.ann()
        if ann is None:
            return 0

        def behind(cur: Any) -> bool:
            generation, mirrored = self._counters(cur)
            return generation != mirrored

        if not self._run(behind, read_only=True):
            return 0

        def sizes(cur: Any) -> set[int]:
            cur.execute(
                f"SELECT DISTINCT length(data) / 4 FROM {self._vectors} WHERE ns = %s", (self.ns,)
            )
            return {int(row[0]) for row in cur.fetchall()}

        ann.ensure_dims(self._store, self._run(sizes, read_only=True))

        def copy(cur: Any) -> int:
            cur.execute(
                f"SELECT v.key, v.data FROM {self._vectors} v WHERE v.ns = %s AND NOT EXISTS"
                f" (SELECT 1 FROM {ann.table} a WHERE a.ns = v.ns AND a.key = v.key) LIMIT %s",
                (self.ns, _MIRROR_BATCH),
            )
            rows = [(bytes(key), bytes(data)) for key, data in cur.fetchall()]
            ann.write(cur, self.ns, rows)
            return len(rows)

        copied = 0
        while done := self._run(copy):  # in batches, without holding up other writers
            copied += done

        def finish(cur: Any) -> int:
            # Adds wait here: every vector up to this generation is in the copy afterwards.
            generation, _ = self._counters(cur, lock=True)
            total = 0
            while done := copy(cur):
                total += done
            self._mark(cur, generation, previous=None)
            return total

        last: int = self._run(finish)
        return copied + last

    def nearest(
        self, embedder: Embedder, engine: Engine, query: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]] | None:
        """The ``k`` units nearest to ``query`` ranked by pgvector, as ``(row id, similarity)``,
        like :meth:`DenseIndex.search` (a unit's similarity is its best passage's, ranked by
        :func:`~memdir.index._vectors.unit_similarity`); ``None``
        where pgvector cannot answer (rank in Python).
        """
        import psycopg

        ann = self.ann()
        if ann is None:
            return None
        keys = self._maps.get(embedder.name)
        if keys is None:
            keys = self._maps[embedder.name] = KeyMap(embedder)
        keys.refresh(engine)

        def read(cur: Any) -> list[tuple[int, float]] | None:
            generation, mirrored = self._counters(cur)
            if generation != mirrored:
                return None  # the copy is behind: the Python ranking sees every vector
            exact = len(keys) <= _pg_ann.EXACT_BELOW
            limit = min(_MAX_FETCH, 2 * k)
            while True:
                found = ann.nearest(cur, self.ns, query, limit, exact=exact)
                if len(found) < limit and not exact:
                    # The walk of the graph ended (hnsw.max_scan_tuples) before it met `limit`
                    # of this namespace's vectors, so it may have passed nearer ones: compare
                    # them all instead, at the cost of their number.
                    exact = True
                    continue
                best: dict[int, float] = {}  # a unit's passages: its best one counts
                for key, score in found:
                    for rowid in keys.rows(key):
                        best[rowid] = max(score, best.get(rowid, score))
                if len(best) >= k or len(found) < limit:
                    break
                if found[-1][1] <= 0 or limit >= _MAX_FETCH:
                    break
                # keys no unit holds now, or more passages of units already found, took the
                # places
                limit = min(_MAX_FETCH, 4 * limit)
            ranked = sorted(
                best.items(),
                # ties: the newer line first
                key=lambda row: (-unit_similarity(row[1], keys.passages(row[0])), -row[0]),
            )
            return [row for row in ranked if row[1] > 0][:k]

        try:
            near: list[tuple[int, float]] | None = self._run(read, read_only=True)
        except psycopg.Error as exc:
            ann.broken = True
            logger.warning("pgvector failed, vectors are ranked in Python from now on: %s", exc)
            return None
        return near

    def prune(self, keep: set[bytes]) -> int:
        """Delete every vector whose key is not in ``keep``; returns how many went."""
        ann = self.ann()

        def change(cur: Any) -> int:
            cur.execute(
                f"DELETE FROM {self._vectors} WHERE ns = %s AND NOT (key = ANY(%s))",
                (self.ns, list(keep)),
            )
            removed = int(cur.rowcount)
            if ann is not None:
                cur.execute(
                    f"DELETE FROM {ann.table} WHERE ns = %s AND NOT (key = ANY(%s))",
                    (self.ns, list(keep)),
                )
            return removed

        removed: int = self._run(change)
        return removed

    def count(self) -> int:
        """Number of stored vectors."""

        def read(cur: Any) -> int:
            cur.execute(f"SELECT count(*) FROM {self._vectors} WHERE ns = %s", (self.ns,))
            return int(cur.fetchone()[0])

        found: int = self._run(read, read_only=True)
        return found
