"""Maintenance: archive, prune, reindex; background worker throttling, persistence and drain."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import FixedClock
from memdir.errors import ConfigError
from memdir.memory import (
    ConsolidationResult,
    MaintenanceConfig,
    MemoryConsolidator,
    MemoryMaintenanceScheduler,
)
from memdir.memory._lease import Lease
from memdir.memory._retention import archive_ledger, expire_ledgers, prune_old_files
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace


def ledger_on(ws: Workspace, day: str, *bullets: str) -> Path:
    from datetime import date

    append_bullets(ws, list(bullets), header="Memory Flush", day=date.fromisoformat(day))
    return ws.memory_dir / f"{day}.md"


def age(path: Path, days: float) -> None:
    stamp = time.time() - days * 86_400
    os.utime(path, (stamp, stamp))


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class FakeConsolidator:
    """Records calls; optionally blocks until released."""

    def __init__(self, *, hold: float = 0.0, fail: bool = False) -> None:
        self.calls = 0
        self.hold = hold
        self.fail = fail
        self.finished = threading.Event()

    async def consolidate(self, *, dry_run: bool = False) -> ConsolidationResult:
        self.calls += 1
        if self.hold:
            await asyncio.sleep(self.hold)
        self.finished.set()
        if self.fail:
            raise RuntimeError("consolidator exploded")
        return ConsolidationResult(skipped="nothing_new", dry_run=dry_run)


# -- retention --------------------------------------------------------------------------


def test_old_ledgers_move_to_the_archive(ws: Workspace) -> None:
    old = ledger_on(ws, "2026-08-01", "old fact")
    edge = ledger_on(ws, "2026-09-01", "edge fact")  # exactly 90 days before 2026-11-30
    content = old.read_bytes()
    assert expire_ledgers(ws, retention_days=90, dry_run=True) == ["2026-08-01.md"]
    assert old.exists()
    assert expire_ledgers(ws, retention_days=90) == ["2026-08-01.md"]
    assert not old.exists() and edge.exists()
    assert (ws.archive_dir / "2026-08-01.md").read_bytes() == content
    assert "memory/archive/2026-08-01.md" in ws.memory_files()


def test_half_done_move_is_completed(ws: Workspace) -> None:
    old = ledger_on(ws, "2026-08-01", "old fact")
    os.link(old, ws.archive_dir / old.name)  # killed after the link, before the unlink
    assert expire_ledgers(ws, retention_days=90) == ["2026-08-01.md"]
    assert not old.exists()
    assert "old fact" in (ws.archive_dir / old.name).read_text()


def test_archive_never_overwrites_different_content(ws: Workspace) -> None:
    (ws.archive_dir / "2026-08-01.md").write_text("## Memory Add — a\n- archived first\n")
    ledger_on(ws, "2026-08-01", "written later")
    assert archive_ledger(ws, "2026-08-01.md")
    text = (ws.archive_dir / "2026-08-01.md").read_text()
    assert "- archived first" in text and "- written later" in text
    assert not (ws.memory_dir / "2026-08-01.md").exists()


def test_old_session_artefacts_are_pruned(ws: Workspace) -> None:
    old_log = ws.sessions_dir / "old.log.jsonl"
    new_log = ws.sessions_dir / "new.log.jsonl"
    old_result = ws.large_results_dir / "old" / "c1.txt"
    new_result = ws.large_results_dir / "new" / "c2.txt"
    cursor = ws.memory_dir / ".flush_state" / "old.json"
    for path in (old_log, new_log, old_result, new_result, cursor):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    for path in (old_log, old_result, cursor):
        age(path, 200)
    # The retention is measured from the workspace clock.
    clock_ws = Workspace(ws.root, tz="UTC", clock=lambda: datetime.now(UTC))
    dry = prune_old_files(clock_ws, retention_days=180, dry_run=True)
    assert dry.sessions == ("sessions/old.log.jsonl",) and old_log.exists()
    report = prune_old_files(clock_ws, retention_days=180)
    assert report.sessions == ("sessions/old.log.jsonl",)
    assert report.tool_results == ("large_tool_results/old/c1.txt",)
    assert report.cursors == ("memory/.flush_state/old.json",)
    assert not old_log.exists() and not old_result.parent.exists()
    assert new_log.exists() and new_result.exists()


# -- one pass -----------------------------------------------------------------------------


def merge(call: ModelCall) -> str:
    meta = call.messages[-1].metadata
    lines = [ln for ln in str(meta["memdir.current"]).splitlines() if ln.startswith("- ")]
    lines += [f"- {e}" for e in meta["memdir.entries"] if f"- {e}" not in lines]
    return "# Memory\n" + "\n".join(lines) + "\n"


def test_run_once_archives_consolidates_prunes_and_reindexes(ws: Workspace) -> None:
    old = ledger_on(ws, "2026-08-01", "old fact")
    with old.open("a") as handle:
        handle.write("A note about zebras, not a bullet.\n")
    ledger_on(ws, "2026-11-30", "new fact")
    consolidator = MemoryConsolidator(ws, FunctionModel(merge))
    report = MemoryMaintenanceScheduler(ws, consolidator).run_once()
    assert report.errors == () and report.skipped is None
    assert report.archived == ("2026-08-01.md",)
    assert report.consolidation is not None and report.consolidation.applied
    assert ws.read_text("MEMORY.md") == "# Memory\n- old fact\n- new fact\n"
    assert report.index is not None and report.index.files_indexed >= 3
    from memdir.index import MemoryIndex

    with MemoryIndex(ws) as index:
        assert [h.path for h in index.search("zebras")] == ["memory/archive/2026-08-01.md"]
        assert "MEMORY.md" in {h.path for h in index.search("old fact")}


def test_a_failing_step_does_not_stop_the_others(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    ledger_on(ws, "2026-08-01", "old fact")
    scheduler = MemoryMaintenanceScheduler(ws, FakeConsolidator(fail=True))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        report = scheduler.run_once()
    assert report.archived == ("2026-08-01.md",)
    assert report.index is not None
    assert len(report.errors) == 1 and report.errors[0].startswith("consolidate: RuntimeError")
    assert any("step consolidate failed" in r.getMessage() for r in caplog.records)


def test_dry_run_changes_nothing(ws: Workspace) -> None:
    old = ledger_on(ws, "2026-08-01", "old fact")
    consolidator = MemoryConsolidator(ws, FunctionModel(merge))
    report = MemoryMaintenanceScheduler(ws, consolidator).run_once(dry_run=True)
    assert report.dry_run and report.archived == ("2026-08-01.md",)
    assert report.consolidation is not None and report.consolidation.text is not None
    assert old.exists() and not ws.memory_md.exists() and report.index is None


def test_only_one_maintenance_run_at_a_time(ws: Workspace) -> None:
    other = Lease(ws, "maintenance", ttl=timedelta(minutes=5))
    assert other.try_acquire()
    fake = FakeConsolidator()
    report = MemoryMaintenanceScheduler(ws, fake).run_once()  # type: ignore[arg-type]
    assert report.skipped == "busy" and fake.calls == 0
    other.release()


# -- background worker ---------------------------------------------------------------------


def write_state(ws: Workspace, **stamps: datetime) -> None:
    record = {k: v.isoformat() for k, v in stamps.items()}
    (ws.memory_dir / ".maintenance.json").write_text(json.dumps(record))


def test_requests_are_throttled_remembered_and_served(ws: Workspace, clock: FixedClock) -> None:
    now = clock.instant
    write_state(ws, last_tick_at=now, last_consolidation_at=now - timedelta(minutes=10))
    fake = FakeConsolidator()
    with MemoryMaintenanceScheduler(ws, fake) as scheduler:  # type: ignore[arg-type]
        scheduler.request_consolidation()
        time.sleep(0.3)
        assert fake.calls == 0 and scheduler.consolidation_pending
        clock.instant = now + timedelta(minutes=19)
        scheduler.request_consolidation()
        time.sleep(0.3)
        assert fake.calls == 0
        clock.instant = now + timedelta(minutes=21)
        scheduler.request_consolidation()
        assert wait_for(lambda: fake.calls == 1)
        assert wait_for(lambda: not scheduler.consolidation_pending)
    state = json.loads((ws.memory_dir / ".maintenance.json").read_text())
    assert datetime.fromisoformat(state["last_consolidation_at"]) == now + timedelta(minutes=21)


def test_another_process_respects_the_persisted_gap(ws: Workspace, clock: FixedClock) -> None:
    now = clock.instant
    write_state(ws, last_tick_at=now, last_consolidation_at=now - timedelta(minutes=31))
    first, second = FakeConsolidator(), FakeConsolidator()
    with MemoryMaintenanceScheduler(ws, first) as a:  # type: ignore[arg-type]
        a.request_consolidation()
        assert wait_for(lambda: first.calls == 1)
    with MemoryMaintenanceScheduler(ws, second) as b:  # type: ignore[arg-type]
        b.request_consolidation()
        time.sleep(0.3)
        assert second.calls == 0 and b.consolidation_pending


def test_overdue_tick_runs_the_full_pass(ws: Workspace, clock: FixedClock) -> None:
    ledger_on(ws, "2026-08-01", "old fact")
    fake = FakeConsolidator()
    config = MaintenanceConfig(startup_delay=timedelta(0))
    with MemoryMaintenanceScheduler(ws, fake, config=config):  # type: ignore[arg-type]
        assert wait_for(lambda: fake.calls == 1)
        assert wait_for(lambda: (ws.archive_dir / "2026-08-01.md").exists())
    state = json.loads((ws.memory_dir / ".maintenance.json").read_text())
    assert datetime.fromisoformat(state["last_tick_at"]) == clock.instant


@pytest.mark.parametrize("recorded", ["ahead", "naive"])
def test_a_time_recorded_in_the_future_does_not_stall_maintenance(
    ws: Workspace, clock: FixedClock, recorded: str
) -> None:
    # Another host's clock ran a year ahead (or this one was set back): the recorded times
    # are in the future. Waiting for them would stop maintenance for a year. A time without
    # a zone (edited by hand) used to kill the worker thread with a TypeError.
    ahead = clock.instant + timedelta(days=365)
    if recorded == "naive":
        ahead = clock.instant.replace(tzinfo=None) - timedelta(minutes=1)
    write_state(ws, last_tick_at=ahead, last_consolidation_at=ahead)
    fake = FakeConsolidator()
    config = MaintenanceConfig(startup_delay=timedelta(0))
    with MemoryMaintenanceScheduler(ws, fake, config=config):  # type: ignore[arg-type]
        assert wait_for(lambda: fake.calls == 1)
    state = json.loads((ws.memory_dir / ".maintenance.json").read_text())
    assert datetime.fromisoformat(state["last_tick_at"]) == clock.instant


def test_request_never_blocks_and_stop_drains(ws: Workspace, clock: FixedClock) -> None:
    write_state(ws, last_tick_at=clock.instant)
    slow = FakeConsolidator(hold=0.5)
    scheduler = MemoryMaintenanceScheduler(ws, slow)  # type: ignore[arg-type]
    scheduler.start()
    scheduler.request_consolidation()
    assert not slow.finished.is_set()  # the caller got control back before the work ran
    assert wait_for(lambda: slow.calls == 1)
    assert scheduler.stop(timeout=10)
    assert slow.finished.is_set() and not scheduler.running


def test_stop_cancels_a_run_that_overstays(ws: Workspace, clock: FixedClock) -> None:
    write_state(ws, last_tick_at=clock.instant)
    stuck = FakeConsolidator(hold=3600)
    scheduler = MemoryMaintenanceScheduler(ws, stuck)  # type: ignore[arg-type]
    scheduler.start()
    scheduler.request_consolidation()
    assert wait_for(lambda: stuck.calls == 1)
    assert scheduler.stop(timeout=0.2)
    assert not stuck.finished.is_set()


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        MaintenanceConfig(interval=timedelta(0))
    with pytest.raises(ConfigError):
        MaintenanceConfig(daily_file_retention_days=0)
    with pytest.raises(ConfigError):
        MaintenanceConfig(consolidation_min_gap=timedelta(minutes=-1))
    # Wrong types fail here, with the field's name, not later in the worker thread.
    with pytest.raises(ConfigError, match="interval"):
        MaintenanceConfig(interval=3600)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="session_retention_days"):
        MaintenanceConfig(session_retention_days="180")  # type: ignore[arg-type]
    cfg = MaintenanceConfig()
    assert (cfg.interval, cfg.daily_file_retention_days, cfg.session_retention_days) == (
        timedelta(hours=6),
        90,
        180,
    )
    assert cfg.consolidation_min_gap == timedelta(minutes=30) and cfg.max_memory_tokens == 4000
