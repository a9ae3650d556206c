"""The writes of the PostgreSQL store, each with a key that makes running it again safe.

Each write is one transaction (an append: one statement) carrying a new key. When the
connection breaks after the commit went out, :meth:`Database.transaction
<memdir.store.postgres._connect.Database.transaction>` runs the write again on a fresh
connection, and the write first looks its key up (:mod:`memdir.store.postgres._keys`): found,
it answers as the first run did (a compare-and-swap that was made is reported made, even if
another writer has replaced the file since); not found, it is made now. When the server cannot
be reached again, the caller gets :class:`~memdir.errors.OutcomeUnknownError` with the key.

A rewrite or a delete locks the file row first, so an append to the same file waits until the
rewrite commits, and the appends' keys the rewrite moves to ``write_keys`` are all of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from psycopg import sql

from memdir.store._safeopen import shown_path
from memdir.store.postgres._connect import Database, Pending
from memdir.store.postgres._keys import WriteKeys

__all__ = ["Writes"]

_T = TypeVar("_T")


class Writes:
    """The writes to the files of one schema (the namespace is given to each call)."""

    def __init__(self, db: Database) -> None:
        s = db.schema
        self.db = db
        self.keys = WriteKeys(s)
        f = sql.Identifier(s, "files")
        c = sql.Identifier(s, "chunks")
        k = sql.Identifier(s, "write_keys")
        generations = sql.Literal(f"{s}.generations")
        recorded = sql.SQL("rec AS (INSERT INTO {} (key) SELECT %s FROM done)").format(k)
        self._upsert = sql.SQL(
            "WITH rec AS (INSERT INTO {k} (key) VALUES (%s)) "
            "INSERT INTO {f} (ns, path, size, last_byte, writer) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (ns, path) DO UPDATE SET "
            "size = EXCLUDED.size, last_byte = EXCLUDED.last_byte, "
            "writer = EXCLUDED.writer, version = {f}.version + 1, "
            "generation = nextval({g}), mtime = clock_timestamp()"
        ).format(k=k, f=f, g=generations)
        self._create = sql.SQL(
            "WITH done AS (INSERT INTO {f} (ns, path, size, last_byte, writer) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1), {rec} "
            "SELECT count(*) FROM done"
        ).format(f=f, rec=recorded)
        self._swap = sql.SQL(
            "WITH done AS (UPDATE {f} SET size = %s, last_byte = %s, writer = %s, "
            "version = version + 1, generation = nextval({g}), mtime = clock_timestamp() "
            "WHERE ns = %s AND path = %s AND version = %s RETURNING 1), {rec} "
            "SELECT count(*) FROM done"
        ).format(f=f, g=generations, rec=recorded)
        self._lock = sql.SQL("SELECT 1 FROM {} WHERE ns = %s AND path = %s FOR UPDATE").format(f)
        self._delete = sql.SQL(
            "WITH done AS (DELETE FROM {f} WHERE ns = %s AND path = %s RETURNING 1), {rec} "
            "SELECT count(*) FROM done"
        ).format(f=f, rec=recorded)
        self._chunk = sql.SQL(
            "INSERT INTO {} (ns, path, start, data) VALUES (%s, %s, 0, %s)"
        ).format(c)
        self._append = sql.SQL("SELECT first_byte, end_byte FROM {}(%s, %s, %s, %s)").format(
            sql.Identifier(s, "append_chunk")
        )

    def _keyed(self, what: str, fn: Callable[[Any, uuid.UUID], _T], found: _T) -> _T:
        """Run the write ``fn(cursor, key)`` with a new key; a run after a lost answer that
        finds the key recorded answers ``found``."""
        self.keys.prune(self.db)
        key = uuid.uuid4()
        runs = 0

        def run(cur: Any) -> _T:
            nonlocal runs
            runs += 1
            if runs > 1 and self.keys.recorded(cur, key):
                return found
            return fn(cur, key)

        return self.db.transaction(run, write=Pending(key, what))

    def _fill(self, cur: Any, ns: str, rel: str, data: bytes, *, fresh: bool = False) -> None:
        """Replace the chunks of a file (its row locked by this transaction) with ``data``."""
        if not fresh:
            self.keys.drop_chunks(cur, ns, rel)
        if data:
            cur.execute(self._chunk, (ns, rel, data))

    def write(self, ns: str, rel: str, data: bytes) -> None:
        """Replace (or create) a file."""

        def write(cur: Any, key: uuid.UUID) -> None:
            last = data[-1] if data else None
            cur.execute(self._upsert, (key, ns, rel, len(data), last, key))
            self._fill(cur, ns, rel, data)

        self._keyed(f"the write of {shown_path(rel)}", write, None)

    def create(self, ns: str, rel: str, data: bytes) -> bool:
        """Create a file unless it exists; whether this call created it."""

        def create(cur: Any, key: uuid.UUID) -> bool:
            last = data[-1] if data else None
            cur.execute(self._create, (ns, rel, len(data), last, key, key))
            if not _count(cur):
                return False
            self._fill(cur, ns, rel, data, fresh=True)
            return True

        return self._keyed(f"the creation of {shown_path(rel)}", create, True)

    def replace_if(self, ns: str, rel: str, data: bytes, expected: int) -> bool:
        """Replace a file if its version is still ``expected``; whether it was replaced."""

        def swap(cur: Any, key: uuid.UUID) -> bool:
            last = data[-1] if data else None
            cur.execute(self._swap, (len(data), last, key, ns, rel, expected, key))
            if not _count(cur):
                return False
            self._fill(cur, ns, rel, data)
            return True

        return self._keyed(f"the replacement of {shown_path(rel)}", swap, True)

    def delete(self, ns: str, rel: str) -> bool:
        """Remove a file; whether it existed."""

        def delete(cur: Any, key: uuid.UUID) -> bool:
            cur.execute(self._lock, (ns, rel))
            if cur.fetchone() is None:
                return False
            self.keys.drop_chunks(cur, ns, rel)
            cur.execute(self._delete, (ns, rel, key))
            return _count(cur) > 0

        return self._keyed(f"the deletion of {shown_path(rel)}", delete, True)

    def append(self, ns: str, rel: str, data: bytes) -> tuple[int, int]:
        """Append to a file (one statement; it looks its key up itself)."""
        key = uuid.uuid4()

        def append(cur: Any) -> tuple[int, int]:
            cur.execute(self._append, (ns, rel, data, key))
            row = cur.fetchone()
            return int(row[0]), int(row[1])

        what = f"the append to {shown_path(rel)}"
        return self.db.transaction(append, autocommit=True, write=Pending(key, what))


def _count(cur: Any) -> int:
    row = cur.fetchone()
    return int(row[0]) if row is not None else 0
