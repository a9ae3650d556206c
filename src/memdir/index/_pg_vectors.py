"""Vectors of a PostgreSQL workspace's memory units: rows of ``index_vectors``, per namespace.

The counterpart of ``vectors.db`` (:class:`memdir.index._vectors.VectorStore`), with the same
methods: vectors are keyed by a hash of the embedder's name and the unit's text, so they
survive a rebuilt index, and are ranked in Python by :class:`~memdir.index._vectors.DenseIndex`
(per-file matrices cached in memory). A namespace's ``vectors_generation`` setting grows with
every batch added, which tells other processes' caches to reload.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memdir.store.workspace import Workspace

__all__ = ["PgVectors"]


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

    def _run(self, fn: Any, *, read_only: bool = False) -> Any:
        return self._store._tx(fn, read_only=read_only)

    def close(self) -> None:
        """Nothing to close: the store's pool is shared."""

    def exists(self) -> bool:
        """Whether any vector was ever stored for this namespace (since the last delete)."""
        return self.generation() > 0

    def legacy_embedder_name(self) -> str | None:
        """``None``: no older store kept the setting here."""
        return None

    def generation(self) -> int:
        """A number that grows whenever vectors are added (``0``: none stored)."""

        def read(cur: Any) -> int:
            cur.execute(
                f"SELECT value FROM {self._settings} WHERE ns = %s AND name = 'vectors_generation'",
                (self.ns,),
            )
            row = cur.fetchone()
            return int(row[0]) if row is not None else 0

        found: int = self._run(read, read_only=True)
        return found

    def version(self) -> tuple[int, int]:
        """What changes whenever vectors are added or deleted."""
        return 0, self.generation()

    def delete(self) -> None:
        """Delete every vector of the namespace."""

        def change(cur: Any) -> None:
            cur.execute(f"DELETE FROM {self._vectors} WHERE ns = %s", (self.ns,))
            cur.execute(
                f"DELETE FROM {self._settings} WHERE ns = %s AND name = 'vectors_generation'",
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
        """Store vectors (one transaction); keys already present are kept."""
        if not items:
            return

        def change(cur: Any) -> None:
            cur.execute(
                f"INSERT INTO {self._vectors} (ns, key, data) SELECT %s, * FROM"
                " unnest(%s::bytea[], %s::bytea[]) ON CONFLICT DO NOTHING",
                (self.ns, [k for k, _ in items], [v for _, v in items]),
            )
            cur.execute(
                f"INSERT INTO {self._settings} (ns, name, value) VALUES"
                " (%s, 'vectors_generation', '1') ON CONFLICT (ns, name) DO UPDATE SET"
                f" value = ({self._settings}.value::bigint + 1)::text",
                (self.ns,),
            )

        self._run(change)

    def prune(self, keep: set[bytes]) -> int:
        """Delete every vector whose key is not in ``keep``; returns how many went."""

        def change(cur: Any) -> int:
            cur.execute(
                f"DELETE FROM {self._vectors} WHERE ns = %s AND NOT (key = ANY(%s))",
                (self.ns, list(keep)),
            )
            return int(cur.rowcount)

        removed: int = self._run(change)
        return removed

    def count(self) -> int:
        """Number of stored vectors."""

        def read(cur: Any) -> int:
            cur.execute(f"SELECT count(*) FROM {self._vectors} WHERE ns = %s", (self.ns,))
            return int(cur.fetchone()[0])

        found: int = self._run(read, read_only=True)
        return found
