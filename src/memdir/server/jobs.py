"""Long jobs (flush, compaction, consolidation, maintenance runs, import and export), off the
event loop, one at a time per tenant, each bounded by the job timeout.

A job runs on a thread of the :class:`JobRunner`'s own pool (``job_threads``; jobs queue for a
thread when all are busy), with an event loop of its own, so the store and model I/O inside the
library's async calls never stalls the server's loop, and the server keeps answering searches
while a consolidation runs. Each tenant has one job slot per server process: a second job of the
same tenant while one runs is answered at once with ``429 job-running`` (``Retry-After``), so
one tenant's flood of flushes cannot take every thread from the others. A job that runs past
the timeout is cancelled at its next await (a model call, a lock); every library write is
atomic, so what it wrote is whole, and the flush cursor and the consolidation watermark make a
retry pick up where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from memdir.server.problems import ProblemError

__all__ = ["JobRunner", "JobRunning", "JobTimeout"]

_T = TypeVar("_T")
RETRY_AFTER: Final = 5
"""Seconds a tenant whose job slot is taken is told to wait."""


class JobRunning(ProblemError):
    """429: the tenant runs a job already on this server process."""

    def __init__(self, kind: str) -> None:
        super().__init__(
            429,
            "job-running",
            f"another job of this tenant runs now; send the {kind} again in a few seconds "
            "(Retry-After)",
            headers={"Retry-After": str(RETRY_AFTER)},
        )


class JobTimeout(ProblemError):
    """503: the job ran past the server's job timeout and was stopped."""

    def __init__(self, kind: str, timeout: float) -> None:
        super().__init__(
            503,
            "job-timeout",
            f"the {kind} ran longer than this server's job timeout ({timeout:g} s) and was "
            "stopped; what it wrote is kept, and sending it again goes on from there",
        )


class _Expired(Exception):
    """The job's own timeout ran out (not a timeout raised inside the job)."""


class JobRunner:
    """Runs jobs on threads of their own, one per tenant at a time.

    Args:
        threads: jobs running at once (more wait for a thread).
        timeout: seconds an async job may run before it is cancelled.
    """

    def __init__(self, *, threads: int, timeout: float) -> None:
        self.threads = threads
        self.timeout = timeout
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self._limiter: anyio.CapacityLimiter | None = None

    def take(self, tenant: str, kind: str) -> Callable[[], None]:
        """Take ``tenant``'s job slot; the function that gives it back (from any thread, once).

        Raises:
            JobRunning: the slot is taken.
        """
        with self._lock:
            if tenant in self._busy:
                raise JobRunning(kind)
            self._busy.add(tenant)
        given_back = threading.Event()

        def give_back() -> None:
            with self._lock:
                if not given_back.is_set():
                    given_back.set()
                    self._busy.discard(tenant)

        return give_back

    @contextlib.contextmanager
    def slot(self, tenant: str, kind: str) -> Iterator[None]:
        """``tenant``'s job slot, held for the block.

        Raises:
            JobRunning: the slot is taken.
        """
        give_back = self.take(tenant, kind)
        try:
            yield
        finally:
            give_back()

    async def run(self, tenant: str, kind: str, job: Callable[[], Awaitable[_T]]) -> _T:
        """Run the async ``job()`` in ``tenant``'s slot, on a job thread, within the timeout.

        Raises:
            JobRunning: the tenant runs a job already.
            JobTimeout: the job ran past the timeout (it was cancelled).
        """
        with self.slot(tenant, kind):
            return await self.call(kind, job)

    async def call(self, kind: str, job: Callable[[], Awaitable[_T]]) -> _T:
        """Run the async ``job()`` on a job thread with its own event loop, within the
        timeout (the caller holds the slot).

        Raises:
            JobTimeout: the job ran past the timeout (it was cancelled).
        """

        async def bounded() -> _T:
            try:
                async with asyncio.timeout(self.timeout) as limit:
                    return await job()
            except TimeoutError:
                if limit.expired():
                    raise _Expired from None
                raise

        try:
            return await self.call_sync(lambda: asyncio.run(bounded()))
        except _Expired:
            raise JobTimeout(kind, self.timeout) from None

    async def call_sync(self, job: Callable[[], _T]) -> _T:
        """Run the blocking ``job()`` on a job thread (the caller holds the slot). The job
        finishes even if the request is cancelled meanwhile: its slot is held until then."""
        if self._limiter is None:  # made in the event loop, at the first job
            self._limiter = anyio.CapacityLimiter(self.threads)
        return await anyio.to_thread.run_sync(job, limiter=self._limiter)
