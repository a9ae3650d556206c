"""The sync wrappers of async APIs, called where they cannot run: inside an event loop."""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path

import pytest

from memdir.errors import ConfigError
from memdir.ingest import ingest, ingest_sync
from memdir.memory import MemoryConsolidator, MemoryMaintenanceScheduler
from memdir.models import ExtractiveModel
from memdir.store.ledger import append_bullets
from memdir.workspace import Workspace

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
BILLING = EXAMPLES / "billing-migration.openai.json"


def scheduler(ws: Workspace) -> MemoryMaintenanceScheduler:
    return MemoryMaintenanceScheduler(ws, MemoryConsolidator(ws, ExtractiveModel()))


async def test_run_once_in_an_event_loop_says_what_to_call_instead(ws: Workspace) -> None:
    append_bullets(ws, ["Alice prefers green tea"], header="Memory Add")
    maintenance = scheduler(ws)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" left behind
        with pytest.raises(ConfigError) as caught:
            maintenance.run_once()
        gc.collect()
    assert str(caught.value) == (
        "run_once() cannot run inside a running event loop: use `await "
        "scheduler.arun_once()` there (or `await asyncio.to_thread(scheduler.run_once)`)"
    )
    assert not ws.memory_md.exists()  # nothing ran
    # Both ways the message gives work.
    report = await asyncio.to_thread(maintenance.run_once)
    assert report.consolidation is not None and report.consolidation.applied
    assert (await maintenance.arun_once()).errors == ()


async def test_ingest_sync_in_an_event_loop_says_what_to_call_instead(ws: Workspace) -> None:
    with pytest.raises(ConfigError, match=r"^ingest_sync\(\) cannot run inside a running event"):
        ingest_sync([BILLING], workspace=ws)
    assert not (ws.root / "sessions" / "billing-migration.log.jsonl").exists()
    report = await ingest([BILLING], workspace=ws)
    assert report.sessions and not report.failures
