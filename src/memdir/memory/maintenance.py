"""Background maintenance: archive, consolidate, prune, reindex — off the reply path.

:class:`MemoryMaintenanceScheduler` runs a daemon thread with its own ``asyncio`` loop, so it
serves sync and async callers alike and never runs on the caller's thread or loop. Each tick
(every ``interval``) runs, in order, each step's failure logged without stopping the others:

1. archive ledgers older than ``daily_file_retention_days`` to ``memory/archive/`` (crash-safe);
2. consolidate new ledger entries into ``MEMORY.md``;
3. delete session logs, evicted tool results and flush cursors older than
   ``session_retention_days``;
4. bring the search index up to date (incremental);
5. when the workspace uses hybrid search (an embedder is set), compute the vectors of new
   lines, for at most ``embed_time_budget``.

:meth:`~MemoryMaintenanceScheduler.request_consolidation` (called after each flush) only sets
a flag; the worker serves it once ``consolidation_min_gap`` has passed since the last
consolidation by any process (the time is kept in ``memory/.maintenance.json``, see
:mod:`memdir.memory._schedule`). A request that arrives too early is remembered, not dropped;
one persisted by :func:`~memdir.memory.request_consolidation` (from any process) is served the
same way. Ticks too are claimed in that file, so a workspace shared by several processes is
maintained once per interval, and a lease makes sure two runs never overlap.
:meth:`~MemoryMaintenanceScheduler.arun_due` runs what is due once, without the thread (a
server sweeping many workspaces calls it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from memdir._sync import run_sync
from memdir.errors import ConfigError
from memdir.memory._checks import check_callable, check_duration, check_int
from memdir.memory._lease import Lease
from memdir.memory._remote import on_the_server
from memdir.memory._retention import PruneReport, expire_ledgers, prune_old_files
from memdir.memory._schedule import LAST_CONSOLIDATION, LAST_TICK, Schedule, elapsed_since
from memdir.memory.consolidate import ConsolidationResult, MemoryConsolidator
from memdir.store.workspace import Workspace

if TYPE_CHECKING:
    from memdir.index import EmbedStats, IndexStats, MemoryIndex, SearchIndex

__all__ = ["MaintenanceConfig", "MaintenanceReport", "MemoryMaintenanceScheduler"]

log = logging.getLogger("memdir.memory")

_T = TypeVar("_T")

_MAX_SLEEP = 60.0  # re-check at least this often (clock changes, other processes)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceConfig:
    """When and how much maintenance runs.

    Attributes:
        interval: time between full maintenance runs.
        daily_file_retention_days: ledgers older than this move to ``memory/archive/``.
        session_retention_days: session logs, evicted tool results and flush cursors older
            than this are deleted.
        consolidation_min_gap: minimum time between two consolidations requested by flushes.
        max_memory_tokens: the ``MEMORY.md`` budget (for consolidators built from this config).
        startup_delay: wait this long after :meth:`MemoryMaintenanceScheduler.start` before an
            overdue run, so that starting an agent stays fast.
        embed_time_budget: when the workspace uses hybrid search, the longest one run spends
            computing vectors of new lines (the rest waits for the next run).
    """

    interval: timedelta = timedelta(hours=6)
    daily_file_retention_days: int = 90
    session_retention_days: int = 180
    consolidation_min_gap: timedelta = timedelta(minutes=30)
    max_memory_tokens: int = 4000
    startup_delay: timedelta = timedelta(seconds=30)
    embed_time_budget: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        owner = "MaintenanceConfig"
        check_duration(owner, "interval", self.interval)
        for name in ("consolidation_min_gap", "startup_delay", "embed_time_budget"):
            check_duration(owner, name, getattr(self, name), allow_zero=True)
        for name in ("daily_file_retention_days", "session_retention_days"):
            check_int(owner, name, getattr(self, name), minimum=1)
        check_int(owner, "max_memory_tokens", self.max_memory_tokens, minimum=50)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceReport:
    """What one maintenance run did (or, with ``dry_run``, would do).

    Attributes:
        archived: ledger names moved to ``memory/archive/``.
        consolidation: the consolidation result, or ``None`` if that step failed.
        sessions_deleted: session log paths deleted.
        tool_results_deleted: evicted tool result paths deleted.
        cursors_deleted: flush cursor paths deleted.
        index: index statistics, or ``None`` if not reindexed.
        vectors: what computing vectors did, or ``None`` when the workspace does not use
            hybrid search (or the step failed).
        errors: one line per failed step (``"<step>: <error type>: <message>"``).
        skipped: ``"busy"`` when another process was running maintenance, else ``None``.
        dry_run: nothing was changed.
    """

    archived: tuple[str, ...] = ()
    consolidation: ConsolidationResult | None = None
    sessions_deleted: tuple[str, ...] = ()
    tool_results_deleted: tuple[str, ...] = ()
    cursors_deleted: tuple[str, ...] = ()
    index: IndexStats | None = None
    vectors: EmbedStats | None = None
    errors: tuple[str, ...] = ()
    skipped: str | None = None
    dry_run: bool = False


class MemoryMaintenanceScheduler:
    """Runs memory maintenance in the background (see the module docstring).

    Args:
        workspace: the workspace.
        consolidator: the consolidator used by step 2 and by consolidation requests.
        config: intervals and retention.
        index: the index to refresh in step 4 (it may be shared with other threads);
            ``None`` opens the workspace's index for the step.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. :meth:`run_once`
    runs one full pass on the calling thread (CLI, tests, cron).
    """

    def __init__(
        self,
        workspace: Workspace | str,
        consolidator: MemoryConsolidator,
        *,
        config: MaintenanceConfig | None = None,
        index: SearchIndex | None = None,
    ) -> None:
        owner = "MemoryMaintenanceScheduler"
        if consolidator is None:
            raise ConfigError(f"{owner} needs a MemoryConsolidator")
        check_callable(owner, "consolidator", consolidator, method="consolidate")
        if config is not None and not isinstance(config, MaintenanceConfig):
            raise ConfigError(
                f"{owner} config must be a MaintenanceConfig, not {type(config).__name__}"
            )
        self.workspace = Workspace.coerce(workspace)
        self.consolidator = consolidator
        self.config = config or MaintenanceConfig()
        self.index: SearchIndex | None = check_callable(owner, "index", index, method="refresh")
        self._requested = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[Any] | None = None
        self._schedule = Schedule(self.workspace)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the background worker (idempotent; none for a workspace on a ``memdir
        serve`` server, which maintains its memory itself)."""
        if on_the_server(self.workspace, "maintenance"):
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._thread_main, name="memdir-maintenance", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the worker, letting a run in progress finish for up to ``timeout`` seconds.

        A run still going after that is cancelled at its next model call (nothing half
        written: every write is atomic). Returns whether the worker ended.
        """
        thread = self._thread
        if thread is None:
            return True
        self._stopping.set()
        self._poke()
        thread.join(timeout)
        if thread.is_alive() and self._loop is not None and self._task is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._task.cancel)
            thread.join(min(timeout, 5.0))
        stopped = not thread.is_alive()
        if stopped:
            self._thread = None
        return stopped

    @property
    def running(self) -> bool:
        """Whether the background worker is alive."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> MemoryMaintenanceScheduler:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def request_consolidation(self) -> None:
        """Ask for a consolidation. Never blocks; served once the minimum gap has passed.

        The request lives in this scheduler; :func:`memdir.memory.request_consolidation`
        persists one that any process's scheduler serves.
        """
        self._requested.set()
        self._poke()

    @property
    def consolidation_pending(self) -> bool:
        """Whether a consolidation requested of this scheduler has not been served yet."""
        return self._requested.is_set()

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop just closed
                loop.call_soon_threadsafe(wake.set)

    # -- one pass -------------------------------------------------------------------------

    def run_once(self, *, dry_run: bool = False) -> MaintenanceReport:
        """Run archive → consolidate → prune → reindex now, on this thread.

        Raises:
            ConfigError: called inside a running event loop; use ``await`` :meth:`arun_once`
                there (or ``await asyncio.to_thread(scheduler.run_once)``).
        """
        return run_sync(
            self.arun_once(dry_run=dry_run),
            name="run_once",
            instead="use `await scheduler.arun_once()` there "
            "(or `await asyncio.to_thread(scheduler.run_once)`)",
        )

    async def arun_once(self, *, dry_run: bool = False) -> MaintenanceReport:
        """Async form of :meth:`run_once` (on a ``memdir serve`` server, the server runs the
        pass: an ``admin`` key's request)."""
        if on_the_server(self.workspace, "maintenance"):
            assert self.workspace.remote is not None
            remote = self.workspace.remote
            return await asyncio.to_thread(remote.run_maintenance, dry_run=dry_run)
        lease = Lease(self.workspace, "maintenance", ttl=timedelta(hours=1))
        if not dry_run and not lease.try_acquire():
            return MaintenanceReport(skipped="busy")
        try:
            return await self._steps(dry_run)
        finally:
            lease.release()

    async def _steps(self, dry_run: bool) -> MaintenanceReport:
        cfg = self.config
        errors: list[str] = []
        archived: list[str] = []
        consolidation: ConsolidationResult | None = None
        pruned = PruneReport(sessions=(), tool_results=(), cursors=())
        stats: IndexStats | None = None
        try:
            archived = expire_ledgers(
                self.workspace, retention_days=cfg.daily_file_retention_days, dry_run=dry_run
            )
        except Exception as exc:
            errors.append(_failure("archive", exc))
        try:
            if dry_run:
                consolidation = await self.consolidator.consolidate(dry_run=True)
            else:
                self._schedule.record(LAST_CONSOLIDATION)
                consolidation = await self._consolidate_requested()
        except Exception as exc:
            errors.append(_failure("consolidate", exc))
        try:
            pruned = prune_old_files(
                self.workspace, retention_days=cfg.session_retention_days, dry_run=dry_run
            )
        except Exception as exc:
            errors.append(_failure("prune", exc))
        vectors: EmbedStats | None = None
        if not dry_run:
            try:
                stats = self._reindex()
            except Exception as exc:
                errors.append(_failure("reindex", exc))
            try:
                vectors = self._embed()
            except Exception as exc:
                errors.append(_failure("embed", exc))
        return MaintenanceReport(
            archived=tuple(archived),
            consolidation=consolidation,
            sessions_deleted=pruned.sessions,
            tool_results_deleted=pruned.tool_results,
            cursors_deleted=pruned.cursors,
            index=stats,
            vectors=vectors,
            errors=tuple(errors),
            dry_run=dry_run,
        )

    def _reindex(self) -> IndexStats:
        # Not refresh(): on a read-only workspace or a full disk it falls back to an index in
        # memory with a warning, which would report this step as done when nothing was saved.
        if self.index is not None:
            full = getattr(self.index, "index_all_from_workspace", None)
            stats: IndexStats = full() if callable(full) else self.index.refresh()
            merge = getattr(self.index, "optimize", None)
            if callable(merge):
                merge()
            return stats

        def reindex(index: MemoryIndex) -> IndexStats:
            found = index.index_all_from_workspace()
            index.optimize()
            return found

        return self._with_own_index(reindex)

    def _embed(self) -> EmbedStats | None:
        from memdir.index import MemoryIndex

        budget = self.config.embed_time_budget.total_seconds()

        def embed(index: MemoryIndex) -> EmbedStats | None:
            if index.embedder is None:
                return None
            return index.embed_pending(max_seconds=budget)

        if isinstance(self.index, MemoryIndex):
            return embed(self.index)
        return self._with_own_index(embed)

    def _with_own_index(self, step: Callable[[MemoryIndex], _T]) -> _T:
        """Run ``step`` on the workspace's index, opened for it and closed after."""
        from memdir.index import MemoryIndex

        with MemoryIndex(self.workspace) as index:
            return step(index)

    # -- the worker ---------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._worker())
        except Exception:
            log.exception("memory maintenance worker stopped on an unexpected error")
        finally:
            self._loop = None
            self._wake = None

    async def _worker(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self._requested.is_set():
            self._wake.set()
        first = True
        while not self._stopping.is_set():
            wait = self._next_wait(startup=first)
            first = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait)
            self._wake.clear()
            if self._stopping.is_set():
                break
            await self._guarded(self.arun_due())

    async def arun_due(self) -> MaintenanceReport | ConsolidationResult | None:
        """Run what is due, once, on the calling task (no background thread).

        A full pass when ``interval`` has passed since the last one by any process (its slot
        is claimed first); else a consolidation when one was requested (of this scheduler,
        or persisted by :func:`memdir.memory.request_consolidation`) and
        ``consolidation_min_gap`` has passed since the last one. A server maintaining many
        workspaces calls this for each in turn; the claims and leases keep replicas from
        running a job twice. The store is read and written on the calling thread.

        Returns:
            The pass's report, the consolidation's result, or ``None`` when nothing was due.
        """
        cfg = self.config
        if on_the_server(self.workspace, "maintenance"):
            return None
        if self._schedule.claim(LAST_TICK, cfg.interval) == timedelta(0):
            return await self.arun_once()
        if not self._requested.is_set() and self._schedule.pending_request() is None:
            return None
        if self._schedule.claim(LAST_CONSOLIDATION, cfg.consolidation_min_gap) != timedelta(0):
            return None
        return await self._consolidate_requested()

    def _next_wait(self, *, startup: bool) -> float:
        cfg = self.config
        now = self.workspace.utc_now()
        data = self._schedule.load()
        waits = [_MAX_SLEEP]
        since_tick = elapsed_since(self._schedule.last(LAST_TICK, data), now)
        tick_due = cfg.interval - since_tick if since_tick is not None else timedelta(0)
        if startup:
            tick_due = max(tick_due, cfg.startup_delay)
        waits.append(tick_due.total_seconds())
        if self._requested.is_set() or self._schedule.pending_request(data) is not None:
            since = elapsed_since(self._schedule.last(LAST_CONSOLIDATION, data), now)
            due = cfg.consolidation_min_gap - since if since is not None else timedelta(0)
            waits.append(due.total_seconds())
        return max(0.0, min(waits))

    async def _guarded(self, job: Any) -> None:
        self._task = asyncio.ensure_future(job)
        try:
            await self._task
        except asyncio.CancelledError:
            log.warning("memory maintenance: a run was cancelled by stop()")
        except Exception:
            log.exception("memory maintenance: a run failed")
        finally:
            self._task = None

    async def _consolidate_requested(self) -> ConsolidationResult:
        # Clear first: a request arriving during the run must survive it (a persisted one
        # has a token of its own, which a later request replaces).
        was_requested = self._requested.is_set()
        self._requested.clear()
        persisted = self._schedule.pending_request()
        retry = True
        try:
            result = await self.consolidator.consolidate()
            retry = result.skipped in _RETRY
            return result
        finally:
            if retry and was_requested:
                self._requested.set()
            if not retry and persisted is not None:
                self._schedule.settle(persisted)


# Consolidation outcomes worth retrying after the gap; anything else serves the request.
_RETRY = frozenset(
    {
        "busy",
        "model_error",
        "timeout",
        "blank_answer",
        "unusable_answer",
        "lease_lost",
        "memory_changed",
        "erased",
    }
)


def _failure(step: str, exc: Exception) -> str:
    log.warning("memory maintenance: step %s failed (%s)", step, type(exc).__name__)
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{step}: {type(exc).__name__}: {first}"[:300]
