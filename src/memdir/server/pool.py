"""The namespaces a server process has opened: one :class:`Workspace` each, reused.

Opening a namespace is cheap (no file is read), but knowing that it exists costs a look at
the store, so existence is remembered for ``recheck`` seconds, or until
:meth:`NamespacePool.forget` (a namespace deleted through this process): a namespace deleted
through another replica is found missing at most that long after. A write creates its
namespace the way ``memdir init`` does; a read of a missing one finds none.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Final

from memdir.store.workspace import MEMORY_MD, Workspace

__all__ = ["EMPTY_MEMORY_MD", "NamespacePool"]

_SIZE: Final = 1024
"""Workspaces kept open (each is a few objects; the indexes have their own limit)."""
EMPTY_MEMORY_MD: Final = "# Memory\n"
"""The ``MEMORY.md`` a new namespace starts with (as ``memdir init``): no memory yet."""


class NamespacePool:
    """Namespaces of ``root``, opened on demand.

    Args:
        root: the workspace root.
        size: how many opened namespaces to keep.
        recheck: seconds a namespace found is known to exist without a look at the store.
    """

    def __init__(self, root: Workspace, *, size: int = _SIZE, recheck: float = 1.0) -> None:
        self.root = root
        self._size = size
        self._recheck = recheck
        self._open: OrderedDict[str, Workspace] = OrderedDict()
        self._exists: dict[str, float] = {}  # when it was last found (time.monotonic)
        self._lock = threading.Lock()

    def _known(self, ns: str) -> bool:
        found = self._exists.get(ns)
        return found is not None and time.monotonic() - found <= self._recheck

    def opened(self, ns: str) -> Workspace | None:
        """The workspace of ``ns`` if this pool has opened it and found it within the last
        ``recheck`` seconds, else ``None``. The store is not asked."""
        with self._lock:
            if not self._known(ns):
                return None
            ws = self._open.get(ns)
            if ws is not None:
                self._open.move_to_end(ns)
            return ws

    def unopened(self, ns: str) -> Workspace:
        """The workspace of ``ns``, which does not exist yet: :meth:`get` with ``create``
        makes it (the same object)."""
        return self._kept(ns)

    def _kept(self, ns: str) -> Workspace:
        """The workspace object of ``ns`` (made outside the lock when new), kept as the most
        recently used."""
        with self._lock:
            ws = self._open.get(ns)
            if ws is not None:
                self._open.move_to_end(ns)
                return ws
        fresh = self.root.namespaced(ns, create=False)
        with self._lock:
            ws = self._open.setdefault(ns, fresh)
            self._open.move_to_end(ns)
            while len(self._open) > self._size:
                self._open.popitem(last=False)
            return ws

    def get(self, ns: str, *, create: bool) -> Workspace | None:
        """The workspace of namespace ``ns`` (a valid name), created if ``create``; ``None``
        when it does not exist and may not be created.

        Raises:
            WorkspaceError: the store cannot be reached or written.
        """
        ws = self._kept(ns)
        with self._lock:
            known = self._known(ns)
        if known:
            return ws
        if create:
            ws.init()
            ws.create_text(MEMORY_MD, EMPTY_MEMORY_MD)  # as `memdir init`; one made meanwhile stays
        elif not ws.exists():
            return None
        with self._lock:
            self._exists[ns] = time.monotonic()
        return ws

    def forget(self, ns: str) -> None:
        """Drop what is remembered of ``ns`` (it was deleted)."""
        with self._lock:
            self._open.pop(ns, None)
            self._exists.pop(ns, None)
