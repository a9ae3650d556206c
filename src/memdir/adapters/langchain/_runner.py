"""One private event loop, on its own thread, for memdir's async work behind LangChain hooks.

LangChain calls a middleware's sync hooks from ``invoke`` and its async hooks from ``ainvoke``,
on whatever thread and event loop it runs. memdir's compactor and memory flush are async; they
always run here, on one loop, so the sync hooks need no loop of their own and the flush after a
reply can go on after the caller's loop has ended.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Runner"]

log = logging.getLogger("memdir.adapters.langchain")
_T = TypeVar("_T")


class Runner:
    """Runs coroutines on a private event loop thread (started on first use)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._background: set[concurrent.futures.Future[Any]] = set()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Start ``coro`` on the loop; its future."""
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the loop and wait for its result (call it from another thread)."""
        return self.submit(coro).result()

    async def arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the loop and await its result from another event loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str, *, delay: float = 0.0) -> None:
        """Start ``coro`` in the background, after ``delay`` seconds; a failure is logged.

        The delay lets the caller's thread finish what it is doing first (both threads share
        the interpreter lock), so background work runs while the agent waits for its model.
        """
        future = self.submit(_after(delay, coro))
        self._background.add(future)

        def done(fut: concurrent.futures.Future[Any]) -> None:
            self._background.discard(fut)
            if not fut.cancelled() and fut.exception() is not None:
                exc = fut.exception()
                log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)

        future.add_done_callback(done)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the background work; whether it all finished within ``timeout`` seconds."""
        pending = list(self._background)
        if not pending:
            return True
        _, not_done = concurrent.futures.wait(pending, timeout=timeout)
        return not not_done

    def close(self, timeout: float | None = None) -> bool:
        """Drain, cancel what is left, and stop the loop; whether everything had finished."""
        finished = self.drain(timeout)
        for future in list(self._background):
            future.cancel()
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()
        return finished


async def _after(delay: float, coro: Coroutine[Any, Any, _T]) -> _T:
    if delay > 0:
        try:
            await asyncio.sleep(delay)
        except BaseException:
            coro.close()
            raise
    return await coro
