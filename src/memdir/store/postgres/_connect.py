"""Connections to PostgreSQL: one pool per database URL in a process, and retried transactions.

Every store operation is one short transaction. A connection that breaks (the server
restarted, a proxy dropped it, the network failed) is discarded and the transaction is run
again on a fresh one, a few times with back-off: the operations are written to be safe to run
again (an append carries a key, a rewrite a writer id, so a commit whose answer was lost is
recognised instead of repeated). Nothing is prepared on the server and no session state is
kept between transactions, so a transaction-pooling proxy (pgbouncer) may sit in between.

The pool is opened by one plain connection first (:func:`~._diagnose.why_not`): a server that
cannot be reached is one line saying why (connection refused, unknown host, authentication
failed...), at once or within ``connect_timeout``, instead of the pool's retries and logs.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from memdir.errors import WorkspaceError
from memdir.store._urls import is_postgres_url, redact_url
from memdir.store.postgres._diagnose import why_not
from memdir.store.postgres._url import read_url

__all__ = ["INSTALL_HINT", "Database", "database", "is_postgres_url", "redact_url"]

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
                    reconnect_timeout=300.0,
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
        self, fn: Callable[[Any], _T], *, read_only: bool = False, autocommit: bool = False
    ) -> _T:
        """Run ``fn(cursor)`` in one transaction; retried on a broken connection.

        With ``autocommit``, ``fn`` runs a single statement, which is its own transaction: no
        ``BEGIN`` and ``COMMIT`` round trips, and no lock held while the client is between
        statements.

        Raises:
            WorkspaceError: the database cannot be reached, or keeps failing.
        """
        psycopg = self._psycopg
        pool = self._ensure_open()
        delay = 0.1
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with pool.connection() as conn:
                    if conn.autocommit != autocommit:  # idle: no round trip
                        conn.autocommit = autocommit
                    if autocommit:
                        with conn.cursor() as cur:
                            return fn(cur)
                    conn.read_only = read_only
                    with conn.transaction(), conn.cursor() as cur:
                        return fn(cur)
            except self._pools.PoolTimeout as exc:
                cause = why_not(psycopg, self.conninfo, self.connect_timeout)
                raise WorkspaceError(
                    f"no connection to PostgreSQL at {self.shown} within {self._wait:g} s: "
                    f"{cause or _first_line(exc)}"
                ) from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if attempt == _ATTEMPTS or not _transient(exc):
                    raise WorkspaceError(
                        f"PostgreSQL at {self.shown} failed: {_first_line(exc)}"
                    ) from exc
                logger.warning(
                    "PostgreSQL connection failed (%s); retrying (%d of %d)",
                    _first_line(exc),
                    attempt,
                    _ATTEMPTS - 1,
                )
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every connection of the pool (a later transaction opens a new one)."""
        with self._open_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


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
