"""Write keys: a write whose answer was lost is found by its key, never made twice.

Every write of the PostgreSQL store carries a key (a UUID made for the call). An append keeps
its key on its chunk (``chunks.append_key``); a rewrite, a compare-and-swap, a create or a
delete records its key in ``write_keys`` in the transaction that makes it, and a rewrite or
delete of a file moves the keys of the appends it removes there too (with where each ended).
A write run again after a lost answer looks its key up first and answers as the first run did;
a caller told "outcome unknown" looks it up with :func:`was_written`. Keys in ``write_keys``
are kept :data:`KEEP_SECONDS` and then pruned.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Final

from psycopg import sql

from memdir.errors import MemdirError
from memdir.store.postgres._connect import Database

__all__ = ["KEEP_SECONDS", "WriteKeys"]

logger = logging.getLogger("memdir.store")

KEEP_SECONDS: Final = 86_400
"""How long a key in ``write_keys`` can be looked up (appends' keys stay on their chunks)."""
_PRUNE_EVERY: Final = 3_600.0  # seconds between a process's prunings


class WriteKeys:
    """The statements on the write keys of one schema."""

    def __init__(self, schema: str) -> None:
        keys = sql.Identifier(schema, "write_keys")
        chunks = sql.Identifier(schema, "chunks")
        self._recorded = sql.SQL("SELECT 1 FROM {} WHERE key = %s").format(keys)
        self._written = sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE append_key = %s) "
            "OR EXISTS (SELECT 1 FROM {} WHERE key = %s)"
        ).format(chunks, keys)
        self._drop_chunks = sql.SQL(
            "WITH gone AS (DELETE FROM {c} WHERE ns = %s AND path = %s "
            "RETURNING append_key, start + length(data) AS end_byte) "
            "INSERT INTO {k} (key, end_byte) SELECT append_key, end_byte FROM gone "
            "WHERE append_key IS NOT NULL ON CONFLICT DO NOTHING"
        ).format(c=chunks, k=keys)
        self._prune = sql.SQL(
            "DELETE FROM {k} WHERE key IN (SELECT key FROM {k} "
            "WHERE made_at < clock_timestamp() - make_interval(secs => %s) "
            "FOR UPDATE SKIP LOCKED)"
        ).format(k=keys)

    def recorded(self, cur: Any, key: uuid.UUID) -> bool:
        """Whether a rewrite, swap, create or delete with ``key`` was made."""
        cur.execute(self._recorded, (key,))
        return cur.fetchone() is not None

    def drop_chunks(self, cur: Any, ns: str, rel: str) -> None:
        """Delete a file's chunks, keeping their append keys (the file row must be locked)."""
        cur.execute(self._drop_chunks, (ns, rel))

    def was_written(self, db: Database, key: uuid.UUID) -> bool:
        """Whether the write with ``key`` was made (an append, or a write of the last day)."""

        def read(cur: Any) -> bool:
            cur.execute(self._written, (key, key))
            row = cur.fetchone()
            return bool(row[0])

        return db.transaction(read, read_only=True)

    def prune(self, db: Database) -> None:
        """Drop keys older than :data:`KEEP_SECONDS`, at most once an hour per process."""
        now = time.monotonic()
        if db.pruned_at is not None and now - db.pruned_at < _PRUNE_EVERY:
            return
        db.pruned_at = now
        try:
            db.transaction(lambda cur: cur.execute(self._prune, (KEEP_SECONDS,)), autocommit=True)
        except MemdirError as exc:  # the next write's process tries again
            logger.warning("could not prune old write keys: %s", exc)
