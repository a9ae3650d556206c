"""Connections to PostgreSQL: one pool per database URL in a process, and retried transactions.

Every store operation is one short transaction. A connection that breaks (the server
restarted, a proxy dropped it, the network failed) is discarded and the transaction is run
again on a fresh one, a few times with back-off: the operations are written to be safe to run
again (an append carries a key, a rewrite a writer id, so a commit whose answer was lost is
recognised instead of repeated). Nothing is prepared on the server and no session state is
kept between transactions, so a transaction-pooling proxy (pgbouncer) may sit in between.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from memdir.errors import ConfigError, WorkspaceError
from memdir.store._urls import is_postgres_url, redact_url

__all__ = ["INSTALL_HINT", "Database", "database", "is_postgres_url", "redact_url"]

INSTALL_HINT: Final = "a PostgreSQL workspace needs psycopg 3: pip install 'memdir[postgres]'"
logger = logging.getLogger("memdir.store")
_T = TypeVar("_T")
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ATTEMPTS: Final = 5
_OWN_PARAMS: Final = ("schema", "pool_size")


class Database:
    """A pool of connections to one database, and the memdir schema in it.

    Args:
        url: ``postgresql://user:password@host:port/dbname``; memdir's own query parameters
            are ``schema`` (default ``memdir``) and ``pool_size`` (default 4); the others go to
            libpq (``sslmode``, ``connect_timeout``...).
    """

    def __init__(self, url: str) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        self._pool_timeout = PoolTimeout
        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query))
        self.schema = params.pop("schema", "memdir")
        if not _SCHEMA.fullmatch(self.schema):
            raise ConfigError(
                f"invalid schema {self.schema!r} in the workspace URL: use lowercase letters, "
                "digits and _"
            )
        try:
            size = int(params.pop("pool_size", "4"))
        except ValueError:
            raise ConfigError("pool_size in the workspace URL must be a whole number") from None
        if not 1 <= size <= 64:
            raise ConfigError("pool_size in the workspace URL must be between 1 and 64")
        params.setdefault("connect_timeout", "10")
        try:
            self._connect_timeout = max(1.0, float(params["connect_timeout"]))
        except ValueError:
            raise ConfigError("connect_timeout in the workspace URL must be a number") from None
        params.setdefault("application_name", "memdir")
        self.url = url
        self.shown = redact_url(url)
        self._psycopg = psycopg
        conninfo = urlunsplit(parts._replace(query=urlencode(params)))
        self.conninfo = conninfo
        """The libpq connection string (memdir's own parameters removed)."""
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=size,
            open=False,
            kwargs={"autocommit": False, "prepare_threshold": None},
            timeout=self._connect_timeout + 5.0,
            reconnect_timeout=300.0,
            name="memdir",
        )
        self._pid = os.getpid()
        self._opened = False
        self._open_lock = threading.Lock()
        self.migrated = False

    def _ensure_open(self) -> None:
        if self._opened:
            return
        with self._open_lock:
            if not self._opened:
                try:
                    # The first connection is awaited here, so an unreachable server is an
                    # error within connect_timeout instead of a long wait later.
                    self._pool.open(wait=True, timeout=self._connect_timeout)
                except Exception as exc:
                    with contextlib.suppress(Exception):
                        self._pool.close()
                    raise WorkspaceError(
                        f"cannot connect to PostgreSQL at {self.shown}: {_first_line(exc)}"
                    ) from exc
                self._opened = True

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
        self._ensure_open()
        delay = 0.1
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self._pool.connection() as conn:
                    if conn.autocommit != autocommit:  # idle: no round trip
                        conn.autocommit = autocommit
                    if autocommit:
                        with conn.cursor() as cur:
                            return fn(cur)
                    conn.read_only = read_only
                    with conn.transaction(), conn.cursor() as cur:
                        return fn(cur)
            except self._pool_timeout as exc:
                raise WorkspaceError(
                    f"no connection to PostgreSQL at {self.shown} within "
                    f"{self._connect_timeout + 5:g} s: {_first_line(exc)}"
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
        """Close every connection of the pool."""
        if self._opened:
            self._pool.close()
            self._opened = False


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
