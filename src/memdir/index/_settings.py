"""``.index/settings.json``: the workspace's search settings, kept apart from derived data.

The databases beside it (``memory_index.db``, ``vectors.db``) are derived from the memory
files and are replaced when damaged; a setting must survive that. It is a small JSON object
written atomically (a temp file renamed over it), so a reader sees the old or the new one::

    {"version": 1, "embedder": "e5"}

Workspaces set up before this file existed kept the embedder in ``vectors.db``; the first
open copies it here (:meth:`SearchSettings.embedder`, given the old value).
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memdir.errors import MemdirError
from memdir.store._fileio import atomic_write

__all__ = ["SETTINGS_NAME", "SearchSettings"]

logger = logging.getLogger("memdir.index")

SETTINGS_NAME = "settings.json"
_VERSION = 1


class SearchSettings:
    """Read and write ``settings.json`` (cached by the file's identity and time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int, int] | None = None
        self._values: dict[str, Any] = {}
        self._warned = False

    def _stamp(self) -> tuple[int, int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size

    def _load(self) -> dict[str, Any] | None:
        """The stored values, or ``None`` when there is no file yet."""
        stamp = self._stamp()
        if stamp is None:
            self._seen, self._values = None, {}
            return None
        if stamp == self._seen:
            return self._values
        try:
            data = json.loads(self.path.read_bytes())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            if not self._warned:  # a hand edit gone wrong: say so once, use no setting
                self._warned = True
                message = f"memdir ignores {self.path}: {exc}; set it again with `memdir index`"
                warnings.warn(message, RuntimeWarning, stacklevel=5)
                logger.warning("%s", message)
            data = {}
        self._seen, self._values = stamp, data
        return data

    def embedder(self, legacy: Callable[[], str | None] | None = None) -> str | None:
        """The embedder searches use by default, if one is set.

        ``legacy`` gives the setting an older memdir kept in ``vectors.db``; it is asked only
        while no settings file exists, and what it gives is written here (when the workspace
        can be written).
        """
        with self._lock:
            values = self._load()
        if values is None:
            name = legacy() if legacy is not None else None
            if name is not None and not self._warned:
                try:
                    self._write({"embedder": name})
                except MemdirError as exc:  # a read-only workspace: use it, uncopied
                    self._warned = True
                    logger.warning("cannot record the embedder setting in %s: %s", self.path, exc)
            return name
        name = values.get("embedder")
        return name if isinstance(name, str) and name else None

    def set_embedder(self, name: str | None) -> None:
        """Record (``None``: remove) the workspace's embedder.

        Raises:
            WorkspaceError: the file cannot be written.
        """
        with self._lock:
            values = dict(self._load() or {})
            if name is None:
                values.pop("embedder", None)
            else:
                values["embedder"] = name
            self._write(values)

    def _write(self, values: dict[str, Any]) -> None:
        record = {"version": _VERSION, **{k: v for k, v in values.items() if k != "version"}}
        data = (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()
        atomic_write(self.path, data)  # a new file: other readers see a new identity
        self._seen, self._values = None, {}
