"""The index of a PostgreSQL workspace, as :class:`~memdir.index.MemoryIndex` runs it.

The counterpart of :class:`memdir.index._store.IndexStore` (the SQLite database): there is no
file to heal or stand in for, so this opens the engine, runs actions on it, reconnects once
when the connection broke (the server restarted, a proxy dropped it), and rebuilds the
namespace's rows from the files when ``memdir index`` finds them out of step.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

from memdir.errors import IndexError_
from memdir.index._engine import Engine
from memdir.index._fallback import Unwritable
from memdir.index._indexing import Damaged, sync_workspace
from memdir.index._postgres import PostgresEngine
from memdir.index._types import IndexStats
from memdir.store.workspace import Workspace

__all__ = ["PgIndexStore"]

logger = logging.getLogger("memdir.index")
_T = TypeVar("_T")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class PgIndexStore:
    """One namespace's index rows in PostgreSQL, shared by the threads of one index."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.lock = threading.RLock()
        self.engine: PostgresEngine | None = None

    def open(self) -> None:
        """Connect (the schema is migrated on first use)."""
        with self.lock:
            if self.engine is None:
                self.engine = PostgresEngine.open(self.workspace)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self.engine is not None:
                self.engine.close()
                self.engine = None

    def write(self, action: Callable[[], _T]) -> _T:
        """Run a write (a PostgreSQL index is always writable)."""
        return action()

    def written(self) -> None:
        """Nothing to do: there is no fallback to drop."""

    def refresh_fallback(self, exc: Unwritable) -> IndexStats:
        """Never reached: writes to a PostgreSQL index do not raise :class:`Unwritable`."""
        raise exc

    def run(self, action: Callable[[Engine], _T], *, writes: bool) -> _T:
        """Run ``action`` on the engine; a broken connection is replaced once.

        Raises:
            IndexError_: the database failed (one line saying how).
        """
        import psycopg

        with self.lock:
            for attempt in (1, 2):
                self.open()
                engine = self.engine
                assert engine is not None
                try:
                    return action(engine)
                except Damaged as exc:
                    return self._rebuild(engine, str(exc), action)
                except psycopg.Error as exc:
                    if engine.broken and attempt == 1:
                        self.close()
                        continue
                    raise IndexError_(
                        f"the search index in {self.workspace.describe()} failed: "
                        f"{_first_line(exc)}"
                    ) from exc
            raise AssertionError("unreachable")

    def _rebuild(self, engine: PostgresEngine, problem: str, action: Callable[[Engine], _T]) -> _T:
        message = (
            f"memdir index of {self.workspace.describe()} was rebuilt from the files: {problem}"
        )
        warnings.warn(message, RuntimeWarning, stacklevel=6)
        logger.warning("%s", message)
        with self.workspace.lock("index-rebuild"):
            sync_workspace(self.workspace, engine, full=True)
        return action(engine)
