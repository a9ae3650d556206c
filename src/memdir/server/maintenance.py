"""Background maintenance: every server process runs a :class:`MaintenanceSweeper`.

A *pass* walks every namespace of the workspace that belongs to a tenant and runs what is due
in it: :meth:`~memdir.memory.MemoryMaintenanceScheduler.arun_due` (a full maintenance run when
``--maintenance-interval`` has passed since the last one, else a consolidation a flush asked
for once ``--consolidation-gap`` has passed since the last one). A pass starts every
``--sweep-interval``, and only in the process holding the *sweep lease*
(:class:`~memdir.memory._lease.Lease` ``server-sweep`` on the workspace root: a
compare-and-swap on the store, across hosts on PostgreSQL), so the replicas of a service do
not all walk every namespace; when the holder dies its lease goes stale (at once on the same
host, after ``--sweep-lease`` elsewhere) and another replica takes the passes over.

A flush through the API makes its namespace *soon*: the process that took the flush serves it
before going on with its pass, lease or not, so a consolidation does not wait for a pass to
reach it. Namespaces are taken in turns of tenants (one namespace of each tenant, then the
next of each), so a tenant with thousands of namespaces or a flood of flushes delays the others
by one job at a time, not by its whole backlog.

Running a job twice is ruled out below this module, whoever sweeps: the claims in each
namespace's ``memory/.maintenance.json`` and the ``maintenance`` and ``consolidation`` leases
(see :mod:`memdir.memory._schedule`). Jobs run one at a time per process, on a thread of the
:class:`~memdir.server.jobs.JobRunner` within ``--job-timeout``, without taking the tenant's
job slot (a tenant's own requests are never refused because of background work). On shutdown
the sweeper takes no new job, lets the running one finish for the grace period, then cancels
it at its next await (every library write is atomic: nothing is half-written), and gives the
sweep lease up so another replica takes over at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from memdir.errors import ConfigError
from memdir.memory import (
    MaintenanceConfig,
    MaintenanceSchedule,
    MemoryConsolidator,
    MemoryMaintenanceScheduler,
    read_schedule,
)
from memdir.memory._lease import Lease
from memdir.memory._schedule import elapsed_since
from memdir.models import ChatModel
from memdir.server.auth import check_tenant
from memdir.server.jobs import JobRunner
from memdir.server.models import ModelFactory
from memdir.server.settings import ServerSettings
from memdir.store.workspace import Workspace
from memdir.tools._core import shared_index

__all__ = [
    "SWEEP_LEASE",
    "MaintenanceSweeper",
    "consolidator",
    "fair_order",
    "tenant_of",
    "time_left",
]

SWEEP_LEASE: Final = "server-sweep"
"""The lease (on the workspace root) of the process that runs the passes."""
CANCEL_WAIT: Final = 10.0
"""Seconds a cancelled job gets to reach its next await before it is left behind."""

logger = logging.getLogger("memdir.server")
_T = TypeVar("_T")


def consolidator(ws: Workspace, settings: ServerSettings, model: ChatModel) -> MemoryConsolidator:
    """The consolidator of a server job in ``ws``.

    Its lease lasts the job timeout: a live job holds it no longer (it is cancelled then), so
    the namespace of a replica that died mid-consolidation is consolidated again by another
    one after that time, not after the library's default quarter of an hour.
    """
    return MemoryConsolidator(
        ws,
        model,
        max_memory_tokens=settings.max_memory_tokens,
        index=shared_index(ws),
        lease_ttl=timedelta(seconds=settings.job_timeout),
    )


def tenant_of(ns: str) -> str | None:
    """The tenant owning namespace ``ns`` (``"acme"`` of ``"acme.alice"``); ``None`` for a
    name no key can reach."""
    tenant, dot, rest = ns.partition(".")
    if not dot or not rest:
        return None
    try:
        return check_tenant(tenant)
    except ConfigError:
        return None


def fair_order(namespaces: Iterable[str], turn: int = 0) -> list[str]:
    """The tenants' namespaces in turns: the first of each tenant, then the second of each,
    and so on; ``turn`` rotates which tenant goes first. Names of no tenant are left out."""
    by_tenant: dict[str, list[str]] = {}
    for ns in namespaces:
        tenant = tenant_of(ns)
        if tenant is not None:
            by_tenant.setdefault(tenant, []).append(ns)
    tenants = sorted(by_tenant)
    if tenants:
        start = turn % len(tenants)
        tenants = tenants[start:] + tenants[:start]
    longest = max((len(names) for names in by_tenant.values()), default=0)
    return [
        by_tenant[tenant][i]
        for i in range(longest)
        for tenant in tenants
        if i < len(by_tenant[tenant])
    ]


def time_left(
    schedule: MaintenanceSchedule, config: MaintenanceConfig, now: datetime
) -> tuple[timedelta, timedelta | None]:
    """``(until the next maintenance run, until the requested consolidation)`` of a
    namespace, as :meth:`~memdir.memory.MemoryMaintenanceScheduler.arun_due` would judge
    them (zero or less: due now; ``None``: no consolidation was requested)."""
    since_tick = elapsed_since(schedule.last_tick_at, now)
    tick = config.interval - since_tick if since_tick is not None else timedelta(0)
    if schedule.consolidation_requested_at is None:
        return tick, None
    since = elapsed_since(schedule.last_consolidation_at, now)
    gap = config.consolidation_min_gap
    return tick, (gap - since if since is not None else timedelta(0))


class _Turns:
    """Namespaces waiting to be served, one tenant at a time in turn."""

    def __init__(self) -> None:
        self._waiting: dict[str, dict[str, None]] = {}
        self._turns: deque[str] = deque()

    def add(self, ns: str, tenant: str) -> None:
        waiting = self._waiting.get(tenant)
        if waiting is None:
            waiting = self._waiting[tenant] = {}
            self._turns.append(tenant)
        waiting[ns] = None

    def pop(self) -> str | None:
        if not self._turns:
            return None
        tenant = self._turns.popleft()
        waiting = self._waiting[tenant]
        ns = next(iter(waiting))
        del waiting[ns]
        if waiting:
            self._turns.append(tenant)
        else:
            del self._waiting[tenant]
        return ns

    @property
    def tenants(self) -> int:
        """How many tenants have a namespace waiting."""
        return len(self._turns)


class _Stopped(Exception):
    """The job was cancelled because the server stops."""


class _Stoppable:
    """Lets the server's event loop cancel a job running on a job thread's own loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self.stopped = False

    async def run(self, job: Callable[[], Awaitable[_T]]) -> _T:
        with self._lock:
            if self.stopped:
                raise _Stopped
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        try:
            return await job()
        except asyncio.CancelledError:
            if self.stopped:  # this cancel, not the job timeout's
                raise _Stopped from None
            raise

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # its loop has closed: the job is over


class MaintenanceSweeper:
    """Maintains the tenants' namespaces in the background (see the module docstring).

    Args:
        root: the workspace root.
        jobs: runs the jobs (on its threads, within its timeout).
        model: makes the model of each job.
        settings: the intervals, the lease, the maintenance configuration.
    """

    def __init__(
        self,
        *,
        root: Workspace,
        jobs: JobRunner,
        model: ModelFactory,
        settings: ServerSettings,
    ) -> None:
        self.root = root
        self.jobs = jobs
        self.settings = settings
        self.config = settings.maintenance_config
        self._model = model
        self._lease = Lease(root, SWEEP_LEASE, ttl=timedelta(seconds=settings.sweep_lease))
        self._lease_lock: anyio.Lock | None = None  # made in the event loop
        self._soon = _Turns()
        self._later: dict[str, float] = {}
        self._wake: anyio.Event | None = None
        self._stopping = False
        self._running: _Stoppable | None = None
        self._idle: anyio.Event | None = None
        self._turn = 0
        self._failing = False

    def soon(self, ns: str) -> None:
        """Serve ``ns`` before the rest of the pass (a flush just asked for a consolidation).

        Call it from the event loop.
        """
        tenant = tenant_of(ns)
        if tenant is None or self._stopping:
            return
        self._later.pop(ns, None)
        self._soon.add(ns, tenant)
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """Try the sweep lease once, before the server answers its first request."""
        await self._take_lease()

    async def run(self) -> None:
        """Sweep until :meth:`stop` (run it as a task of the application's lifespan)."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._keep_lease)
            next_pass = time.monotonic()
            while not self._stopping:
                self._wake = anyio.Event()
                await self._serve_soon()
                if time.monotonic() >= next_pass and not self._stopping:
                    next_pass = time.monotonic() + self.settings.sweep_interval
                    if await self._take_lease():
                        await self._pass()
                await self._sleep(next_pass)
            tasks.cancel_scope.cancel()

    async def stop(self, grace: float) -> None:
        """Take no new job; let the running one finish within ``grace`` seconds, then cancel
        it; give the sweep lease up."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        running, idle = self._running, self._idle
        if running is not None and idle is not None:
            with anyio.move_on_after(grace):
                await idle.wait()
            if not idle.is_set():
                logger.warning("stopping: a background maintenance job is cancelled")
                running.stop()
                with anyio.move_on_after(CANCEL_WAIT):
                    await idle.wait()
                if not idle.is_set():
                    logger.warning("stopping: a background maintenance job did not stop")
        async with self._lock():
            try:
                await anyio.to_thread.run_sync(self._lease.release)
            except Exception as exc:  # the lease runs out by itself
                logger.warning("cannot give the sweep lease up (%s)", type(exc).__name__)

    # -- the loop -----------------------------------------------------------------------

    async def _sleep(self, next_pass: float) -> None:
        until = min([next_pass, *self._later.values()])
        wake = self._wake
        if wake is None or self._stopping:
            return
        with anyio.move_on_after(max(0.0, until - time.monotonic())):
            await wake.wait()

    async def _serve_soon(self, *, one_round: bool = False) -> None:
        """Serve the soon namespaces; ``one_round``: one of each tenant waiting, so that
        during a pass a tenant flushing into many namespaces cannot hold the pass back."""
        now = time.monotonic()
        for waiting, due in list(self._later.items()):
            if due <= now:
                del self._later[waiting]
                self.soon(waiting)
        left = self._soon.tenants if one_round else None
        while not self._stopping and (left is None or left > 0):
            ns = self._soon.pop()
            if ns is None:
                return
            await self._maintain(ns, soon=True)
            if left is not None:
                left -= 1

    async def _pass(self) -> None:
        try:
            names = await anyio.to_thread.run_sync(self.root.namespaces)
        except Exception as exc:
            self._failed("cannot list the namespaces", exc)
            return
        self._turn += 1
        for ns in fair_order(names, self._turn):
            if self._stopping or not self._lease.held:
                return  # the lease went to another process: it sweeps now
            await self._serve_soon(one_round=True)
            await self._maintain(ns, soon=False)

    async def _maintain(self, ns: str, *, soon: bool) -> None:
        """Run what is due in ``ns``; a soon namespace whose consolidation is due later waits
        for then."""
        ws = self.root.namespaced(ns, create=False)
        try:
            schedule = await anyio.to_thread.run_sync(read_schedule, ws)
        except Exception as exc:
            self._failed("cannot read when a namespace was maintained", exc, ns)
            return
        tick, request = time_left(schedule, self.config, ws.utc_now())
        zero = timedelta(0)
        if tick > zero and (request is None or request > zero):
            if soon and request is not None:
                self._later[ns] = time.monotonic() + request.total_seconds()
            return
        if self._stopping:
            return
        await self._run_job(ns, ws)

    async def _run_job(self, ns: str, ws: Workspace) -> None:
        settings, config, make_model = self.settings, self.config, self._model

        async def job() -> object:
            model = make_model()
            scheduler = MemoryMaintenanceScheduler(
                ws, consolidator(ws, settings, model), config=config, index=shared_index(ws)
            )
            return await scheduler.arun_due()

        stoppable = _Stoppable()
        self._running, self._idle = stoppable, anyio.Event()
        try:
            await self.jobs.call("background maintenance", lambda: stoppable.run(job))
        except _Stopped:
            pass
        except Exception as exc:
            self._failed("background maintenance of a namespace failed", exc, ns)
        finally:
            self._idle.set()
            self._running = None

    # -- the lease ------------------------------------------------------------------------

    def _lock(self) -> anyio.Lock:
        """The lock of the sweep lease's changes (one at a time: they read, then swap)."""
        if self._lease_lock is None:
            self._lease_lock = anyio.Lock()
        return self._lease_lock

    async def _take_lease(self) -> bool:
        """Hold the sweep lease: keep it, or take it if it is free or stale."""
        async with self._lock():
            if self._stopping:
                return False
            try:
                held = await anyio.to_thread.run_sync(self._lease.try_acquire)
            except Exception as exc:
                self._failed("cannot take the sweep lease", exc)
                return False
            self._failing = False
            return held

    async def _keep_lease(self) -> None:
        """Renew the sweep lease while it is held (a third of its time each time), so a long
        job does not let it run out."""
        while True:
            await anyio.sleep(self.settings.sweep_lease / 3)
            async with self._lock():
                if not self._lease.held or self._stopping:
                    continue
                try:
                    await anyio.to_thread.run_sync(self._lease.verify)
                except Exception as exc:
                    self._failed("cannot renew the sweep lease", exc)

    def _failed(self, what: str, exc: Exception, ns: str | None = None) -> None:
        """Log a failure (the type only: a message could quote memory); one line per outage
        for the store's own failures."""
        if ns is not None:
            shown = ns if self.settings.log_namespaces else _ns_hash(ns)
            logger.warning("%s (%s): %s", what, shown, type(exc).__name__)
            return
        if not self._failing:
            logger.warning("%s: %s", what, type(exc).__name__)
        self._failing = True


def _ns_hash(ns: str) -> str:
    """The namespace as the access log names it (the first 12 hex digits of its SHA-256)."""
    return "ns " + hashlib.sha256(ns.encode("utf-8", "replace")).hexdigest()[:12]
