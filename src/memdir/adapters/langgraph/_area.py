"""The store files of one memdir namespace: its items and the index of their search text."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from memdir.adapters.langgraph._layout import SEARCH_DIR, STORE_DIR, search_namespace
from memdir.embeddings import Embedder
from memdir.errors import MemdirError, WorkspaceError
from memdir.index import MemoryIndex
from memdir.store.workspace import Workspace

__all__ = ["Area"]

log = logging.getLogger("memdir.adapters.langgraph")


@dataclass(slots=True)
class Area:
    """The store files of one memdir namespace (``None``: the workspace itself)."""

    name: str | None
    ws: Workspace
    embedder: Embedder | str | bool | None
    _index: MemoryIndex | None = None
    _search: Workspace | None = None
    _registered: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def exists(self) -> bool:
        """Whether the area holds store files at all."""
        try:
            return bool(self.ws.listdir(STORE_DIR))
        except WorkspaceError as exc:
            log.warning("store of %s skipped: %s", self.ws.describe(), exc)
            return False

    def registered(self) -> None:
        """Make sure the area's namespace is listed among the workspace's namespaces (a
        PostgreSQL namespace is listed once set up; a directory, once it exists)."""
        with self._lock:
            if not self._registered:
                self.ws.store.init()
                self._registered = True

    @property
    def search(self) -> Workspace:
        """The derived workspace whose ``memory/`` holds the items' searchable text.

        On disk, the workspace ``store/.search`` inside the area; in PostgreSQL, the
        namespace :func:`search_namespace` names (set up unlisted: nobody's memory).
        """
        with self._lock:
            if self._search is None:
                if self.ws.is_local:
                    self._search = self._nested()
                else:
                    assert self.ws.url is not None
                    self._search = Workspace(
                        self.ws.url,
                        namespace=search_namespace(self.ws.namespace),
                        tz=self.ws.tz,
                        create=False,
                    )
            return self._search

    def _nested(self) -> Workspace:
        rel = self.ws.relpath(f"{STORE_DIR}/{SEARCH_DIR}")  # refuses a link out
        search = Workspace(self.ws.root / rel, tz=self.ws.tz, create=False)
        for sub in ("memory", ".index"):
            try:
                (search.root / sub).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WorkspaceError(f"cannot create {search.root / sub}: {exc}") from exc
        return search

    @property
    def index(self) -> MemoryIndex:
        search = self.search
        with self._lock:
            if self._index is None:
                index = MemoryIndex(search, embedder=self.embedder)
                try:
                    index.refresh()  # files changed while no store had it open
                except MemdirError as exc:
                    log.warning("store search index not refreshed: %s", exc)
                self._index = index
            return self._index

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None
