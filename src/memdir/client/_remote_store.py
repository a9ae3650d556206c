"""``RemoteStore``: the ``Store`` of a workspace on a ``memdir serve`` server, one namespace's
files and locks over its store routes.

Every operation is one request (a listing, one per thousand entries), atomic on the server as
the server's own store makes it. A lock is lent by the server: taken by token (polled with
back-off while another holder has it), renewed from a thread every third of its time to live,
released on exit; it excludes the server's own users of the same lock, as they exclude it.
Errors become the store's: a missing file :class:`PathMissing`, a refused path
:class:`PathRefused`, anything else a :class:`WorkspaceError` saying what the server said.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, ClassVar, Final, TypeVar

from memdir.client import _ops, _ops_store
from memdir.client._errors import NotFound, RemoteError
from memdir.client._wire import Call
from memdir.errors import WorkspaceError
from memdir.store._base import Entry, FileStat, Store, Versioned, held_too_long
from memdir.store._files import lock_name
from memdir.store._safeopen import Area, PathMissing, PathRefused
from memdir.store.workspace import MEMORY_AREA

if TYPE_CHECKING:
    from memdir.client._sync import MemdirClient

__all__ = ["RemoteStore"]

logger = logging.getLogger("memdir.client")
_T = TypeVar("_T")
_POLL: Final = (0.02, 0.5)  # seconds between tries of a held lock: first, longest
_REASONS: Final = frozenset({"outside", "area", "loop", "directory", "special"})


class RemoteStore(Store):
    """The files of namespace ``namespace`` on the server ``client`` reaches.

    Args:
        client: the server's client (shared: closing the store leaves it open).
        namespace: the namespace.
    """

    kind: ClassVar[str] = "remote"

    def __init__(self, client: MemdirClient, namespace: str) -> None:
        self.client = client
        self.ns = namespace
        self._known = False  # the namespace exists (it is never deleted through the server)

    def describe(self) -> str:
        return f"{self.client.url} (namespace {self.ns!r})"

    def _call(self, call: Call[_T], rel: str = "") -> _T:
        try:
            return self.client._run(call)
        except RemoteError as exc:
            raise self._error(exc, rel) from exc

    def _error(self, exc: RemoteError, rel: str) -> WorkspaceError:
        if exc.code == "path-refused":
            reason = exc.refused if exc.refused in _REASONS else "area"
            return PathRefused(exc.detail, reason=reason)  # type: ignore[arg-type]
        if isinstance(exc, NotFound) and exc.code == "not-found" and rel:
            return PathMissing(f"no such file: {rel}")
        return WorkspaceError(f"{self.describe()}: {exc}")

    def init(self) -> None:
        if not self._known:
            if not self._call(_ops_store.store_exists(self.ns)):
                self._call(_ops_store.create_store(self.ns))
            self._known = True

    # -- reading ----------------------------------------------------------------------------

    def read(self, rel: str, area: Area) -> bytes:
        found = self.read_versioned(rel, area)
        if found is None:
            raise PathMissing(f"no such file: {rel}")
        return found.data

    def read_versioned(self, rel: str, area: Area) -> Versioned | None:
        return self._call(_ops_store.read_file(self.ns, rel, _area(area)), rel)

    def read_from(self, rel: str, offset: int, area: Area) -> bytes:
        found = self._call(_ops_store.read_from(self.ns, rel, offset, _area(area)), rel)
        if found is None:
            raise PathMissing(f"no such file: {rel}")
        return found

    def stat(self, rel: str, area: Area) -> FileStat | None:
        return self._call(_ops_store.stat_file(self.ns, rel, _area(area)), rel)

    def listdir(self, rel_dir: str, area: Area) -> list[Entry]:
        return self._call(_ops_store.list_dir(self.ns, rel_dir), rel_dir)

    # -- writing ----------------------------------------------------------------------------

    def write(self, rel: str, data: bytes, area: Area) -> None:
        self._call(_ops_store.write_file(self.ns, rel, data, False), rel)
        self._known = True

    def create(self, rel: str, data: bytes, area: Area) -> bool:
        return self.replace_if(rel, data, None, area)

    def replace_if(self, rel: str, data: bytes, version: str | None, area: Area) -> bool:
        done = self._call(_ops_store.write_file(self.ns, rel, data, version), rel)
        self._known = True
        return done

    def append(self, rel: str, data: bytes, area: Area, *, fsync: bool = True) -> tuple[int, int]:
        span = self._call(_ops_store.append_file(self.ns, rel, data, fsync=fsync), rel)
        self._known = True
        return span

    def delete(self, rel: str, area: Area) -> bool:
        return self._call(_ops_store.delete_file(self.ns, rel), rel)

    # -- coordination -----------------------------------------------------------------------

    def _take(self, name: str, token: uuid.UUID) -> float | None:
        return self._call(_ops_store.take_lock(self.ns, name, token))

    def _release(self, name: str, token: uuid.UUID) -> None:
        try:
            self._call(_ops_store.release_lock(self.ns, name, token))
        except WorkspaceError as exc:  # it ends by itself when its time is up
            logger.warning("cannot release lock %s of %s: %s", name, self.describe(), exc)

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        name, token = lock_name(name), uuid.uuid4()
        wait = _POLL[0]
        while (ttl := self._take(name, token)) is None:
            time.sleep(wait)
            wait = min(wait * 2, _POLL[1])
        renewing = _Renewing(self, name, token, ttl)
        try:
            yield
        finally:
            renewing.stop()
            self._release(name, token)

    @contextlib.asynccontextmanager
    async def async_lock(self, name: str, *, timeout: float) -> AsyncIterator[None]:
        name, token = lock_name(name), uuid.uuid4()
        deadline = time.monotonic() + timeout
        wait = _POLL[0]
        while (ttl := await self._take_async(name, token)) is None:
            if time.monotonic() >= deadline:
                raise held_too_long(name, timeout)
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL[1])
        renewing = _Renewing(self, name, token, ttl)
        try:
            yield
        finally:
            await asyncio.to_thread(renewing.stop)
            await asyncio.to_thread(self._release, name, token)

    async def _take_async(self, name: str, token: uuid.UUID) -> float | None:
        attempt = asyncio.ensure_future(asyncio.to_thread(self._take, name, token))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # The take goes on in its thread: if it wins, give the lock straight back.
            def undo(done: asyncio.Future[float | None]) -> None:
                if not done.cancelled() and done.exception() is None and done.result():
                    threading.Thread(target=self._release, args=(name, token), daemon=True).start()

            attempt.add_done_callback(undo)
            raise

    def exists(self) -> bool:
        if not self._known:
            self._known = self._call(_ops_store.store_exists(self.ns))
        return self._known

    def namespaces(self) -> list[str]:
        return self._call(_ops.namespaces())


def _area(area: Area) -> _ops_store.AreaName:
    return "memory" if area == MEMORY_AREA else None


class _Renewing:
    """Renews a lent lock from a thread every third of its time to live, from now until
    :meth:`stop`."""

    def __init__(self, store: RemoteStore, name: str, token: uuid.UUID, ttl: float) -> None:
        self._store, self._name, self._token = store, name, token
        self._every = max(ttl / 3, 0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"memdir-lock-{name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing (waits for a renewal under way, within a time to live)."""
        self._stop.set()
        self._thread.join(timeout=self._every * 3)

    def _loop(self) -> None:
        store = self._store
        while not self._stop.wait(self._every):
            try:
                kept = store._call(_ops_store.renew_lock(store.ns, self._name, self._token))
            except WorkspaceError as exc:
                if self._stop.is_set():
                    return
                logger.warning("cannot renew lock %s of %s: %s", self._name, store.describe(), exc)
                continue
            if not kept and not self._stop.is_set():
                logger.error(
                    "lock %s of %s expired while it was held (the holder was stalled for "
                    "longer than its time to live); another process may have taken it",
                    self._name,
                    store.describe(),
                )
                return
