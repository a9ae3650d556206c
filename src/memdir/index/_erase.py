"""After an erasure: the index holds none of the erased bytes, live or freed.

The index is derived from the files, so an erasure first rewrites the files and then asks the
index to catch up (the changed files' rows are replaced, the session index re-reads the logs
that were rewritten). What that leaves behind is removed here:

- SQLite (``.index/*.db``): the full-text tables are merged into one segment (FTS5 keeps a
  deleted row's terms in old segments until a merge), the vectors of units no longer in the
  index are pruned, the database is rebuilt by ``VACUUM`` with ``secure_delete`` on (freed
  pages would otherwise keep the old bytes) and its WAL checkpointed and truncated;
- PostgreSQL: the vectors no longer in the index are pruned and every table that held a row
  of the namespace is vacuumed, so dead row versions are gone (``VACUUM`` makes their space
  free; it does not rewrite the table: see ``docs/forget.md``).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from memdir.store.workspace import Workspace

if TYPE_CHECKING:
    from memdir.index import MemoryIndex
    from memdir.index._engine import Engine

__all__ = ["PG_TABLES", "ns_tables", "scrub_index", "vacuum_postgres", "vacuum_sqlite"]

log = logging.getLogger("memdir.index")

PG_TABLES: Final = (
    "files",
    "chunks",
    "write_keys",
    "index_files",
    "index_units",
    "index_postings",
    "index_headings",
    "index_vectors",
)
"""The tables of a PostgreSQL store whose rows hold a namespace's text or its traces."""


def scrub_index(ws: Workspace) -> None:
    """Bring the memory and session indexes in line with the files, then clear what they
    freed (see the module notes)."""
    from memdir.index import MemoryIndex
    from memdir.sessions._search import shared_session_index
    from memdir.tools._core import close_shared_index

    close_shared_index(ws)  # a cached connection must not hold the old rows in a snapshot
    with MemoryIndex(ws) as index:
        index.refresh()
        _prune_vectors(index)
    sessions = shared_session_index(ws)
    sessions.refresh()
    if not ws.is_local:
        assert ws.url is not None
        vacuum_postgres(ws, PG_TABLES)
        return
    sessions.close()
    for path in sorted(ws.index_dir.glob("*.db")):
        vacuum_sqlite(path)


def _prune_vectors(index: MemoryIndex) -> None:
    """Drop the vectors of units that are gone (an erased line's embedding is its trace)."""
    vectors = index._vectors
    if not vectors.exists() or vectors.count() == 0:
        return
    embedder = index.embedder
    if embedder is None:  # no model to name the live units' keys by: drop every vector
        vectors.prune(set())
        return
    from memdir.index._vectors import file_texts

    def collect(engine: Engine) -> set[bytes]:
        return {
            key
            for info in engine.files_by_id().values()
            for _, key, _ in file_texts(embedder, engine, info)
        }

    vectors.prune(index._run(collect, writes=False))


def vacuum_sqlite(path: Path) -> None:
    """Merge the FTS5 tables, ``VACUUM`` with ``secure_delete`` and truncate the WAL."""
    con = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        con.execute("PRAGMA secure_delete=ON")
        tables = {
            row[0]
            for row in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND sql LIKE '%USING fts5%'"
            )
        }
        for table in sorted(tables):
            con.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'optimize\')')
        con.execute("VACUUM")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError as exc:
        log.warning("could not vacuum %s after an erasure: %s", path, exc)
    finally:
        con.close()


def ns_tables(ws: Workspace) -> list[str]:
    """The tables of the workspace's PostgreSQL schema that have an ``ns`` column."""
    from memdir.store.postgres import PostgresStore

    store = ws.store
    assert isinstance(store, PostgresStore)

    def read(cur: Any) -> list[str]:
        cur.execute(
            "SELECT c.table_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = %s AND c.column_name = 'ns'"
            " AND t.table_type = 'BASE TABLE' ORDER BY 1",
            (store.db.schema,),
        )
        return [row[0] for row in cur.fetchall()]

    names: list[str] = store.db.transaction(read, read_only=True)
    return names


def vacuum_postgres(ws: Workspace, tables: tuple[str, ...]) -> None:
    """``VACUUM`` each of ``tables`` of the workspace's schema (and the ANN tables)."""
    from psycopg import sql  # the postgres extra: only a PostgreSQL store gets here

    from memdir.store.postgres import PostgresStore

    store = ws.store
    assert isinstance(store, PostgresStore)
    schema = store.db.schema

    names = list(dict.fromkeys([*tables, *ns_tables(ws)]))
    for name in names:
        statement = sql.SQL("VACUUM {}").format(sql.Identifier(schema, name))

        def vacuum(cur: Any, statement: sql.Composed = statement) -> None:
            cur.execute(statement)

        store.db.transaction(vacuum, autocommit=True)
