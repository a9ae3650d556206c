"""A few open objects kept per key between calls (one index per workspace, say).

Opening an index runs schema checks, so the tools keep one per workspace and reuse it; the
least recently used beyond ``size`` are closed. After a fork the child starts empty: the
objects opened before it hold SQLite connections the child must neither use nor close
(closing could checkpoint or delete the parent's WAL), so it keeps them aside, untouched.
Every cache closes what it holds at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["OpenCache"]


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
