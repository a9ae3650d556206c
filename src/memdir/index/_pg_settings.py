"""The search settings of a PostgreSQL workspace: rows of ``index_settings``, per namespace.

The counterpart of ``.index/settings.json`` (:mod:`memdir.index._settings`): the embedder a
namespace's searches use, kept apart from the derived index rows so a rebuild keeps it.
"""

from __future__ import annotations

from typing import Any

from memdir.store.workspace import Workspace

__all__ = ["StoreSettings"]


class StoreSettings:
    """Read and write a namespace's settings in its database."""

    def __init__(self, workspace: Workspace) -> None:
        from memdir.store.postgres import PostgresStore

        store = workspace.store
        assert isinstance(store, PostgresStore)
        self._store = store
        self._table = f'"{store.db.schema}".index_settings'

    def _get(self, name: str) -> str | None:
        table = self._table

        def read(cur: Any) -> str | None:
            cur.execute(
                f"SELECT value FROM {table} WHERE ns = %s AND name = %s", (self._store.ns, name)
            )
            row = cur.fetchone()
            return None if row is None else str(row[0])

        found: str | None = self._store._tx(read, read_only=True)
        return found

    def embedder(self, legacy: object = None) -> str | None:
        """The embedder searches use by default, if one is set."""
        return self._get("embedder") or None

    def set_embedder(self, name: str | None) -> None:
        """Record (``None``: remove) the namespace's embedder."""
        table, ns = self._table, self._store.ns

        def write(cur: Any) -> None:
            if name is None:
                cur.execute(f"DELETE FROM {table} WHERE ns = %s AND name = 'embedder'", (ns,))
            else:
                cur.execute(
                    f"INSERT INTO {table} (ns, name, value) VALUES (%s, 'embedder', %s)"
                    " ON CONFLICT (ns, name) DO UPDATE SET value = EXCLUDED.value",
                    (ns, name),
                )

        self._store._tx(write)
