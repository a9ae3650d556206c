"""Named locks that hold across hosts: a row with an expiry, renewed while it is held.

A session advisory lock would be simpler, but it lives as long as a connection, which a
transaction-pooling proxy does not give, and a host that dies with it would hold it until the
server noticed. A lock here is a row of ``locks``: taken by an ``INSERT … ON CONFLICT … WHERE
expires_at < clock_timestamp()`` (one statement, so two hosts never both win), renewed by a
thread of the holder every third of its time to live, removed on release. A holder killed with
``kill -9`` stops renewing, and another host takes the lock over when it expires. Expiry uses
the server's clock, so the hosts' clocks do not matter.

A holder elsewhere (a client of ``memdir serve``, whose calls any replica may answer) uses
:meth:`RowLock.take`, :meth:`RowLock.renew` and :meth:`RowLock.drop` with a token of its own:
no thread renews for it, it renews itself within each time to live. It excludes the local
users of the same name, as they exclude it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

from psycopg import sql

from memdir.errors import MemdirError, WorkspaceError
from memdir.store._base import held_too_long
from memdir.store.postgres._connect import Database

__all__ = ["LOCK_TTL_SECONDS", "RowLock"]

logger = logging.getLogger("memdir.store")

LOCK_TTL_SECONDS: Final = 30.0
"""How long a lock lasts after its holder's last renewal (a dead holder's, at most)."""
_POLL_SECONDS: Final = (0.02, 0.5)


class RowLock:
    """The lock ``name`` of namespace ``ns``."""

    def __init__(self, db: Database, ns: str, name: str, *, ttl: float = LOCK_TTL_SECONDS):
        self.db = db
        self.ns = ns
        self.name = name
        self.ttl = ttl
        self.token = uuid.uuid4()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        t = sql.Identifier(db.schema, "locks")
        self._take = sql.SQL(
            "INSERT INTO {t} (ns, name, token, expires_at) "
            "VALUES (%s, %s, %s, clock_timestamp() + make_interval(secs => %s)) "
            "ON CONFLICT (ns, name) DO UPDATE SET token = EXCLUDED.token, "
            "expires_at = EXCLUDED.expires_at "
            # Ours too: a take run again after its answer was lost finds its own row.
            "WHERE {t}.expires_at < clock_timestamp() OR {t}.token = EXCLUDED.token "
            "RETURNING token"
        ).format(t=t)
        self._renew = sql.SQL(
            "UPDATE {t} SET expires_at = clock_timestamp() + make_interval(secs => %s) "
            "WHERE ns = %s AND name = %s AND token = %s"
        ).format(t=t)
        self._drop = sql.SQL("DELETE FROM {t} WHERE ns = %s AND name = %s AND token = %s").format(
            t=t
        )

    def take(self, token: uuid.UUID | str) -> bool:
        """Take the lock for the holder ``token`` if it is free or expired; never waits.

        Nothing renews it: the holder calls :meth:`renew` within each ``ttl``, and
        :meth:`drop` when done. Taking it again with the same token (a retry after a lost
        answer) succeeds and renews it.

        Raises:
            WorkspaceError: ``token`` is not a UUID, or the database cannot be reached.
        """
        held = _token(token)

        def take(cur: Any) -> bool:
            cur.execute(self._take, (self.ns, self.name, held, self.ttl))
            return cur.fetchone() is not None

        got: bool = self.db.transaction(take)
        return got

    def renew(self, token: uuid.UUID | str) -> bool:
        """Hold the lock ``ttl`` more seconds; whether ``token`` still held it.

        ``False`` means another holder took it over after it expired: stop what it guarded.
        (A lock that expired and that nobody took is still ``token``'s, and renewed.)

        Raises:
            WorkspaceError: ``token`` is not a UUID, or the database cannot be reached.
        """
        held = _token(token)

        def renew(cur: Any) -> bool:
            cur.execute(self._renew, (self.ttl, self.ns, self.name, held))
            return bool(cur.rowcount == 1)

        kept: bool = self.db.transaction(renew)
        return kept

    def drop(self, token: uuid.UUID | str) -> bool:
        """Give the lock up if ``token`` holds it; whether it did.

        Raises:
            WorkspaceError: ``token`` is not a UUID, or the database cannot be reached.
        """
        held = _token(token)

        def drop(cur: Any) -> bool:
            cur.execute(self._drop, (self.ns, self.name, held))
            return bool(cur.rowcount == 1)

        dropped: bool = self.db.transaction(drop)
        return dropped

    def try_take(self) -> bool:
        """Take the lock if it is free or expired, and renew it from a thread; never waits."""
        got = self.take(self.token)
        if got:
            self._start_renewing()
        return got

    def _start_renewing(self) -> None:
        self._stop.clear()
        self._renewer = threading.Thread(
            target=self._renew_loop, name=f"memdir-lock-{self.name}", daemon=True
        )
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                kept = self.renew(self.token)
            except MemdirError as exc:
                logger.warning("cannot renew lock %s: %s", self.name, exc)
                continue
            if not kept:
                logger.error(
                    "lock %s of namespace %r expired while it was held (the holder was "
                    "stalled for over %g s); another process may have taken it",
                    self.name,
                    self.ns,
                    self.ttl,
                )
                return

    def release(self) -> None:
        """Give the lock up (only if this holder still has it)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=self.ttl)
            self._renewer = None
        with contextlib.suppress(MemdirError):
            self.drop(self.token)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Wait for the lock (polling with back-off), hold it for the block, release it."""
        wait = _POLL_SECONDS[0]
        while not self.try_take():
            time.sleep(wait)
            wait = min(wait * 2, _POLL_SECONDS[1])
        try:
            yield
        finally:
            self.release()

    async def _try_take_async(self) -> bool:
        attempt = asyncio.ensure_future(asyncio.to_thread(self.try_take))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # The take goes on in its thread: if it wins, give the lock straight back.
            def undo(done: asyncio.Future[bool]) -> None:
                if not done.cancelled() and done.exception() is None and done.result():
                    threading.Thread(target=self.release, daemon=True).start()

            attempt.add_done_callback(undo)
            raise

    @contextlib.asynccontextmanager
    async def held_async(self, *, timeout: float) -> AsyncIterator[None]:
        """:meth:`held` without blocking the event loop, given up after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        wait = _POLL_SECONDS[0]
        while not await self._try_take_async():
            if time.monotonic() >= deadline:
                raise held_too_long(self.name, timeout)
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL_SECONDS[1])
        try:
            yield
        finally:
            await asyncio.to_thread(self.release)


def _token(token: object) -> uuid.UUID:
    if isinstance(token, uuid.UUID):
        return token
    try:
        return uuid.UUID(str(token))
    except ValueError:
        raise WorkspaceError(f"not a lock token (a UUID): {str(token)[:80]!r}") from None
