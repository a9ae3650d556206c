"""Running a coroutine for synchronous callers: the thin sync wrappers of async APIs.

``asyncio.run`` inside a running event loop fails with a bare ``RuntimeError``; the wrappers
raise :class:`~memdir.errors.ConfigError` instead, naming what to call there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from memdir.errors import ConfigError

__all__ = ["run_sync"]

_T = TypeVar("_T")


def run_sync(coro: Coroutine[Any, Any, _T], *, name: str, instead: str) -> _T:
    """Run ``coro`` on a new event loop and return its result.

    Args:
        coro: the coroutine; closed unrun when it cannot be run.
        name: the sync function the caller called, for the message (``"ingest_sync"``).
        instead: what to do from async code (``"use `await ingest(...)`"``).

    Raises:
        ConfigError: called from inside a running event loop (a notebook, an async app).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise ConfigError(f"{name}() cannot run inside a running event loop: {instead}")
