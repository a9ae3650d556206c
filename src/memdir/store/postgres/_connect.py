"""Connections to PostgreSQL: one pool per database URL in a process, and retried transactions.

Every store operation is one short transaction. A connection that breaks (the server
restarted, a proxy dropped it, the network failed) is discarded and the transaction is run
again on a fresh one, a few times with back-off. A write carries a key, kept with it when it is
made (:mod:`memdir.store.postgres._keys`), so the run after a lost answer finds a write that was
made instead of making it twice. When the answer is lost and the server cannot be reached
again to look, the write is neither reported done nor failed: :class:`OutcomeUnknownError`
names its key. Nothing is prepared on the server and no session state is kept between
transactions, so a transaction-pooling proxy (pgbouncer) may sit in between.

The pool is opened by one plain connection first (:func:`~._diagnose.why_not`): a server that
cannot be reached is one line saying why (connection refused, unknown host, authentication
failed...), at once or within ``connect_timeout``, instead of the pool's retries and logs.
"""

from __future__ import annotations

import logging
import os
import random
import select
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from memdir.errors import OutcomeUnknownError, WorkspaceError
from memdir.store._urls import is_postgres_url, redact_url
from memdir.store.postgres._diagnose import why_not
from memdir.store.postgres._url import read_url

__all__ = ["INSTALL_HINT", "Database", "Pending", "database", "is_postgres_url", "redact_url"]

INSTALL_HINT: Final = (
    "a PostgreSQL workspace needs psycopg 3, which is not installed: pip install 'memdir[postgres]'"
)
logger = logging.getLogger("memdir.store")
# The pool logs each failed connection attempt; memdir reports the failure itself, in one
# line. A handler of memdir's keeps those records off stderr when the application configured
# no logging (Python's last-resort handler); an application's own handlers still get them.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
_T = TypeVar("_T")
_ATTEMPTS: Final = 5


@dataclass(frozen=True, slots=True)
class Pending:
    """A write, for the message when its outcome cannot be known.

    Attributes:
        key: the key the write carries (kept with it when it is made).
        what: the write (``"the append to memory/2026-01-02.md"``).
    """

    key: uuid.UUID
    what: str


class Database:
    """A pool of connections to one database, and the memdir schema in it.

    Args:
        url: ``postgresql://user:password@host:port/dbname``; memdir's own query parameters
            are ``schema`` (default ``memdir``) and ``pool_size`` (default 4); the others go to
            libpq (``sslmode``, ``connect_timeout`` (default 10 s)...).

    Raises:
        WorkspaceError: psycopg is not installed, or the URL is malformed.
    """

    def __init__(self, url: str) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise WorkspaceError(INSTALL_HINT) from exc
        settings = read_url(url, psycopg)
        self.url = url
        self.shown = redact_url(url)
        self.schema = settings.schema
        self.conninfo = settings.conninfo
        """The libpq connection string (memdir's own parameters removed)."""
        self._size = settings.pool_size
        self.connect_timeout = settings.connect_timeout
        """Seconds a connection may take (the URL's ``connect_timeout``, default 10)."""
        self._wait = settings.connect_timeout + 5.0  # for a connection of the pool
        self._psycopg = psycopg
        self._pools = psycopg_pool
        self._pool: Any = None
        self._pid = os.getpid()
        self._open_lock = threading.Lock()
        self.migrated = False
        self.pruned_at: float | None = None
        """When this process last pruned old write keys (``time.monotonic()``)."""

    def _ensure_open(self) -> Any:
        pool = self._pool
        if pool is not None:
            return pool
        with self._open_lock:
            if self._pool is None:
                cause = why_not(self._psycopg, self.conninfo, self.connect_timeout)
                if cause is not None:
                    raise WorkspaceError(f"cannot connect to PostgreSQL at {self.shown}: {cause}")
                pool = self._pools.ConnectionPool(
                    self.conninfo,
                    min_size=1,
                    max_size=self._size,
                    open=False,
                    kwargs={"autocommit": False, "prepare_threshold": None},
                    timeout=self._wait,
                    # The pool backs off between attempts up to half this: a short window
                    # (then a request starts a new one) reconnects soon after an outage.
                    reconnect_timeout=self._wait,
                    name="memdir",
                )
                try:
                    pool.open(wait=True, timeout=self.connect_timeout)
                except self._pools.PoolTimeout as exc:  # the server went away meanwhile
                    pool.close()
                    raise WorkspaceError(
                        f"cannot connect to PostgreSQL at {self.shown}: {_first_line(exc)}"
                    ) from exc
                self._pool = pool
            return self._pool

    def transaction(
        self,
        fn: Callable[[Any], _T],
        *,
        read_only: bool = False,
        autocommit: bool = False,
        write: Pending | None = None,
    ) -> _T:
        """Run ``fn(cursor)`` in one transaction; retried on a broken connection.

        With ``autocommit``, ``fn`` runs a single statement, which is its own transaction: no
        ``BEGIN`` and ``COMMIT`` round trips, and no lock held while the client is between
        statements. A retried ``fn`` must recognise its own earlier run if it was committed.

        Args:
            fn: the work, given a cursor.
            read_only: ``fn`` only reads.
            autocommit: ``fn`` runs one statement.
            write: the write ``fn`` makes and its key, for the error when its outcome cannot
                be known.

        Raises:
            OutcomeUnknownError: ``write`` was sent and the connection broke before its answer;
                the server could not be reached again to find out whether it was made.
            WorkspaceError: the database cannot be reached, or keeps failing (nothing was
                written).
        """
        psycopg = self._psycopg
        pool = self._ensure_open()
        delay = 0.1
        sent = False  # a commit went out and its answer never came back
        attempt = stale = 0
        while True:
            attempt += 1
            committing = False
            try:
                with pool.connection() as conn:
                    if stale < self._size and _stale(conn):
                        # Closed by the server while idle (a restart): another, nothing sent.
                        conn.close()
                        attempt, stale = attempt - 1, stale + 1
                        continue
                    if conn.autocommit != autocommit:  # idle: no round trip
                        conn.autocommit = autocommit
                    if autocommit:
                        with conn.cursor() as cur:
                            committing = not read_only  # the statement commits itself
                            return fn(cur)
                    conn.read_only = read_only
                    with conn.transaction(), conn.cursor() as cur:
                        result = fn(cur)
                        committing = not read_only  # COMMIT goes out as the block ends
                    return result
            except self._pools.PoolTimeout as exc:
                # The server is away; if it came back meanwhile, one more run settles it.
                cause = why_not(psycopg, self.conninfo, self.connect_timeout)
                if cause is None and attempt < _ATTEMPTS:
                    continue
                raise self._failure(
                    write, sent, f"no connection within {self._wait:g} s: {cause or exc}"
                ) from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                sent = sent or committing
                if attempt >= _ATTEMPTS or not _transient(exc):
                    raise self._failure(write, sent, _first_line(exc)) from exc
                logger.warning(
                    "PostgreSQL connection failed (%s); retrying (%d of %d)",
                    _first_line(exc),
                    attempt,
                    _ATTEMPTS - 1,
                )
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    def _failure(self, write: Pending | None, sent: bool, cause: str) -> WorkspaceError:
        if write is None:
            return WorkspaceError(f"PostgreSQL at {self.shown} failed: {cause}")
        if not sent:
            return WorkspaceError(
                f"PostgreSQL at {self.shown} failed: {cause}; {write.what} was not written"
            )
        return OutcomeUnknownError(
            f"outcome unknown: {write.what} (key {write.key}) was sent to PostgreSQL at "
            f"{self.shown}, which went away before answering: {cause}. It may have been "
            "written: check (PostgresStore.was_written(key), or a search) before writing it "
            "again",
            key=str(write.key),
            what=write.what,
        )

    def close(self) -> None:
        """Close every connection of the pool (a later transaction opens a new one)."""
        with self._open_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _stale(conn: Any) -> bool:
    """Whether an idle connection has input: the server closed it (or said it would).

    An idle connection gets nothing unasked (memdir listens to no channel), so input means a
    shutdown notice or the end of the stream. One ``poll``, no round trip.
    """
    try:
        fd = conn.pgconn.socket
    except conn.OperationalError:  # closed already
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):  # cannot tell: the statement will find out
        return False


def _transient(exc: Exception) -> bool:
    # Authentication failures, unknown databases and the like are not worth another try.
    text = str(exc).lower()
    permanent = ("password authentication", "does not exist", "no pg_hba.conf", "permission")
    return not any(p in text for p in permanent)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


_DATABASES: dict[str, Database] = {}
_DATABASES_LOCK = threading.Lock()


def database(url: str) -> Database:
    """The process's :class:`Database` for ``url`` (one pool per URL, shared by namespaces)."""
    with _DATABASES_LOCK:
        found = _DATABASES.get(url)
        if found is None or found._pid != os.getpid():
            found = Database(url)
            _DATABASES[url] = found
        return found


def _forget_after_fork() -> None:
    # A child must not use its parent's connections: the pools are rebuilt on first use.
    _DATABASES.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
