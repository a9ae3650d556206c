"""Persisted consolidation requests and arun_due: maintenance any process or replica serves."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime, timedelta

from conftest import FixedClock
from memdir.memory import (
    ConsolidationResult,
    MaintenanceConfig,
    MaintenanceReport,
    MemoryMaintenanceScheduler,
    read_schedule,
    request_consolidation,
)
from memdir.workspace import Workspace

STATE = "memory/.maintenance.json"
NO_DELAY = MaintenanceConfig(startup_delay=timedelta(0))


class Consolidator:
    """Counts consolidations; ``during`` runs inside each one; ``skipped`` is their outcome."""

    def __init__(self, *, skipped: str | None = "nothing_new", during: object = None) -> None:
        self.calls = 0
        self.skipped = skipped
        self.during = during
        self.done = threading.Event()

    async def consolidate(self, *, dry_run: bool = False) -> ConsolidationResult:
        self.calls += 1
        if callable(self.during):
            self.during()
        self.done.set()
        return ConsolidationResult(skipped=self.skipped, dry_run=dry_run)


def scheduler(ws: Workspace, consolidator: Consolidator) -> MemoryMaintenanceScheduler:
    return MemoryMaintenanceScheduler(ws, consolidator, config=NO_DELAY)  # type: ignore[arg-type]


def ran_ago(ws: Workspace, clock: FixedClock, *, tick: timedelta, consolidation: timedelta) -> None:
    """Record a pass ``tick`` ago and a consolidation ``consolidation`` ago."""
    record = {
        "last_tick_at": (clock.instant - tick).isoformat(),
        "last_consolidation_at": (clock.instant - consolidation).isoformat(),
    }
    ws.write_text(STATE, json.dumps(record))


def due(ws: Workspace, consolidator: Consolidator) -> object:
    return asyncio.run(scheduler(ws, consolidator).arun_due())


def test_a_persisted_request_is_served_by_another_scheduler_after_the_gap(
    any_ws: Workspace, clock: FixedClock
) -> None:
    ran_ago(any_ws, clock, tick=timedelta(0), consolidation=timedelta(minutes=10))
    request_consolidation(any_ws)  # a process with no scheduler of its own (a server replica)
    assert read_schedule(any_ws).consolidation_requested_at == clock.instant
    served = Consolidator()
    assert due(any_ws, served) is None and served.calls == 0  # 10 min: inside the 30 min gap
    assert read_schedule(any_ws).consolidation_requested_at == clock.instant  # kept
    clock.instant += timedelta(minutes=21)
    result = due(any_ws, served)
    assert isinstance(result, ConsolidationResult) and served.calls == 1
    schedule = read_schedule(any_ws)
    assert schedule.consolidation_requested_at is None
    assert schedule.last_consolidation_at == clock.instant
    clock.instant += timedelta(hours=1)
    assert due(any_ws, served) is None and served.calls == 1  # served: nothing more to do


def test_nothing_is_due_without_a_request_or_a_tick(any_ws: Workspace, clock: FixedClock) -> None:
    ran_ago(any_ws, clock, tick=timedelta(hours=1), consolidation=timedelta(days=1))
    idle = Consolidator()
    assert due(any_ws, idle) is None and idle.calls == 0


def test_a_due_tick_runs_the_full_pass_and_serves_the_request(
    any_ws: Workspace, clock: FixedClock
) -> None:
    ran_ago(any_ws, clock, tick=timedelta(hours=7), consolidation=timedelta(minutes=1))
    request_consolidation(any_ws)
    ticked = Consolidator()
    report = due(any_ws, ticked)
    assert isinstance(report, MaintenanceReport) and report.errors == ()
    assert ticked.calls == 1 and read_schedule(any_ws).consolidation_requested_at is None
    assert read_schedule(any_ws).last_tick_at == clock.instant


def test_a_request_made_during_a_consolidation_survives_it(
    any_ws: Workspace, clock: FixedClock
) -> None:
    ran_ago(any_ws, clock, tick=timedelta(0), consolidation=timedelta(hours=1))
    request_consolidation(any_ws)
    # a flush lands (and asks again) while the consolidation reads the ledgers
    racing = Consolidator(during=lambda: request_consolidation(any_ws))
    assert isinstance(due(any_ws, racing), ConsolidationResult)
    assert read_schedule(any_ws).consolidation_requested_at is not None
    clock.instant += timedelta(minutes=31)
    calm = Consolidator()
    assert isinstance(due(any_ws, calm), ConsolidationResult) and calm.calls == 1
    assert read_schedule(any_ws).consolidation_requested_at is None


def test_a_consolidation_that_must_be_retried_keeps_the_request(
    any_ws: Workspace, clock: FixedClock
) -> None:
    ran_ago(any_ws, clock, tick=timedelta(0), consolidation=timedelta(hours=1))
    request_consolidation(any_ws)
    failed = Consolidator(skipped="model_error")
    assert isinstance(due(any_ws, failed), ConsolidationResult)
    assert read_schedule(any_ws).consolidation_requested_at is not None


def test_two_replicas_serve_one_request_once(any_ws: Workspace, clock: FixedClock) -> None:
    ran_ago(any_ws, clock, tick=timedelta(0), consolidation=timedelta(hours=1))
    request_consolidation(any_ws)
    replicas = [Consolidator(), Consolidator()]
    start = threading.Barrier(2)
    results: list[object] = [None, None]

    def replica(i: int) -> None:
        start.wait()
        results[i] = due(any_ws, replicas[i])

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.calls for r in replicas) == 1
    assert sorted(r is None for r in results) == [False, True]


def test_the_background_worker_serves_a_persisted_request(ws: Workspace, clock: FixedClock) -> None:
    ran_ago(ws, clock, tick=timedelta(0), consolidation=timedelta(hours=1))
    request_consolidation(ws)
    worker = Consolidator()
    with scheduler(ws, worker):
        assert worker.done.wait(30)
    assert worker.calls == 1 and read_schedule(ws).consolidation_requested_at is None


def test_a_damaged_state_file_reads_as_never(any_ws: Workspace) -> None:
    any_ws.write_text(STATE, "{not json")
    schedule = read_schedule(any_ws)
    assert (schedule.last_tick_at, schedule.consolidation_requested_at) == (None, None)
    request_consolidation(any_ws)
    assert isinstance(read_schedule(any_ws).consolidation_requested_at, datetime)
