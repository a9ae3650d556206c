"""An ``asyncio``-friendly cross-process lock.

:meth:`Workspace.lock` blocks the thread, which would freeze an event loop while another
coroutine (or process) holds the lock across a model call. This lock polls ``flock`` with
``LOCK_NB`` and sleeps between tries, so waiting never blocks the loop and a cancelled waiter
leaves nothing behind. ``flock`` locks belong to an open file description, so two holders in
one process exclude each other just like two processes do; the kernel drops the lock when the
holder dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import time
from collections.abc import AsyncIterator

from memdir.errors import MemdirError, WorkspaceError
from memdir.workspace import Workspace

__all__ = ["async_lock"]

_POLL_SECONDS = 0.02


@contextlib.asynccontextmanager
async def async_lock(ws: Workspace, name: str, *, timeout: float) -> AsyncIterator[None]:
    """Hold the workspace lock ``name`` (same files as :meth:`Workspace.lock`).

    Raises:
        MemdirError: the lock was not free within ``timeout`` seconds.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", name):
        raise WorkspaceError(f"invalid lock name {name!r}")
    lock_dir = ws.index_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise MemdirError(
                        f"lock {name!r} is held by another writer for over {timeout:g} s; "
                        "try again later"
                    ) from None
                await asyncio.sleep(_POLL_SECONDS)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
