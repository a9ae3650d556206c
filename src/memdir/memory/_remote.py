"""The memory jobs of a workspace on a ``memdir serve`` server run on the server, with its
model: a flush, a consolidation and a maintenance pass are requests, and no thread of this
process maintains the memory. Said once per workspace and job, at INFO."""

from __future__ import annotations

import logging
import threading

from memdir.store.workspace import Workspace

__all__ = ["on_the_server"]

log = logging.getLogger("memdir.memory")
_SAID: set[tuple[str, str]] = set()
_LOCK = threading.Lock()


def on_the_server(ws: Workspace, job: str) -> bool:
    """Whether ``ws`` is on a server, so that ``job`` runs there (logged the first time)."""
    if ws.remote is None:
        return False
    key = (ws.describe(), job)
    with _LOCK:
        first = key not in _SAID
        _SAID.add(key)
    if first:
        log.info(
            "the %s of %s runs on the server, with the server's model (not this process's)",
            job,
            ws.describe(),
        )
    return True
