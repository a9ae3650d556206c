"""A few open objects kept per key between calls (one index per workspace, say).

Opening an index runs schema checks, so the tools keep one per workspace and reuse it; the
least recently used beyond ``size`` are closed. After a fork the child starts empty: the
objects opened before it hold SQLite connections the child must neither use nor close
(closing could checkpoint or delete the parent's WAL), so it keeps them aside, untouched.
Every cache closes what it holds at interpreter exit.

The shared index caches (the tools' search indexes, the session indexes) keep
:data:`DEFAULT_INDEX_LIMIT` each; a process serving many workspaces raises that with
:func:`set_open_index_limit`. An index closed by the cache while a caller still holds it
opens again on that caller's next use.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from memdir.errors import ConfigError

__all__ = ["DEFAULT_INDEX_LIMIT", "OpenCache", "index_cache", "set_open_index_limit"]

DEFAULT_INDEX_LIMIT = 8
"""Search indexes (and, apart, session indexes) kept open per process by default."""


class _Closable(Protocol):
    def close(self) -> None: ...


_T = TypeVar("_T", bound=_Closable)


class OpenCache(Generic[_T]):
    """Open objects by key, at most ``size`` of them (safe to use from several threads)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: OrderedDict[str, _T] = OrderedDict()
        self._lock = threading.Lock()
        self._inherited: list[_T] = []  # opened before a fork: never used or closed here
        atexit.register(self.close_all)
        os.register_at_fork(after_in_child=self._forget)

    def get(self, key: str, make: Callable[[], _T]) -> _T:
        """The object kept for ``key``, made by ``make()`` if there is none yet."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = make()
            self._items.move_to_end(key)
            evicted = [self._items.popitem(last=False)[1] for _ in range(len(self) - self.size)]
        for old in evicted:
            old.close()
        return item

    def __len__(self) -> int:
        return len(self._items)

    def resize(self, size: int) -> None:
        """Keep at most ``size`` objects from now on; the least recently used beyond are closed."""
        with self._lock:
            self.size = size
            evicted = [self._items.popitem(last=False)[1] for _ in range(len(self) - size)]
        for old in evicted:
            old.close()

    def close(self, key: str) -> None:
        """Close the object kept for ``key``, if any (it is made again on next use)."""
        with self._lock:
            item = self._items.pop(key, None)
        if item is not None:
            item.close()

    def close_all(self) -> None:
        """Close every object kept (they are made again on next use)."""
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        for item in items:
            item.close()

    def _forget(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._inherited.extend(self._items.values())
        self._items.clear()


_INDEX_CACHES: list[OpenCache[Any]] = []
_index_limit = DEFAULT_INDEX_LIMIT


def index_cache() -> OpenCache[Any]:
    """A new cache of open indexes, sized by :func:`set_open_index_limit`."""
    cache: OpenCache[Any] = OpenCache(_index_limit)
    _INDEX_CACHES.append(cache)
    return cache


def set_open_index_limit(limit: int) -> None:
    """How many workspaces' indexes this process keeps open between calls.

    Applies to each shared cache (the search indexes of the memory tools and
    :func:`~memdir.tools.shared_index`, and the session indexes), now and later; lowering it
    closes the least recently used at once. A server answering for many namespaces raises it
    so that a busy namespace's index is not closed and reopened between two requests; each
    open index holds a database connection (and, for a session index of a PostgreSQL
    workspace, an index in memory).

    Raises:
        ConfigError: ``limit`` is not an integer of at least 1.
    """
    global _index_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"the open index limit must be an integer >= 1, not {limit!r}")
    _index_limit = limit
    for cache in _INDEX_CACHES:
        cache.resize(limit)
