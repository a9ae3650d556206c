"""Consolidating a large backlog: bounded batches in one run, progress, no oversized call."""

from __future__ import annotations

import json
import re
from datetime import date

import pytest

from memdir.errors import ConfigError
from memdir.memory import MemoryConsolidator
from memdir.models import CURRENT_KEY, ENTRIES_KEY
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace

STATE = "memory/.consolidation_state"


def keep_first(call: ModelCall) -> str:
    """A consolidator that promotes one entry per call: MEMORY.md stays small."""
    meta = call.messages[-1].metadata
    current = [ln for ln in str(meta[CURRENT_KEY]).splitlines() if ln.startswith("- ")]
    entries = list(meta[ENTRIES_KEY])
    if entries and f"- {entries[0]}" not in current:
        current.append(f"- {entries[0]}")
    return "# Memory\n\n" + "\n".join(current) + "\n"


def ledger_text(call: ModelCall) -> str:
    """The ledger part of a consolidation request (between <entries> and </entries>)."""
    text = call.messages[0].text
    return text.split("<entries>\n", 1)[1].split("\n</entries>", 1)[0]


async def test_a_big_day_is_consolidated_in_one_run_of_bounded_batches(ws: Workspace) -> None:
    # 600 KB of one day: a few tens of model calls of at most max_input_chars each, all in
    # this run (nothing waits for the next one), with progress after every batch.
    for block in range(60):
        append_bullets(
            ws,
            [
                f"fact {block}-{i}: the gateway keeps port {8000 + i} " + "w" * 60
                for i in range(100)
            ],
            header="Memory Flush",
        )
    size = (ws.root / "memory/2026-11-30.md").stat().st_size
    assert size > 600_000
    model = FunctionModel(keep_first)
    seen: list[tuple[int, int]] = []
    result = await MemoryConsolidator(
        ws, model, max_input_chars=48_000, progress=lambda done, total: seen.append((done, total))
    ).consolidate()
    assert result.skipped is None and result.entries == 6_000
    total = result.batches
    assert total == len(model.calls) and total >= size // 48_000
    assert all(len(ledger_text(call)) <= 48_000 + 100 for call in model.calls)
    assert seen == [(done, total) for done in range(total + 1)]
    state = json.loads(ws.read_text(STATE))
    assert state["files"]["2026-11-30.md"]["offset"] == size


async def test_one_giant_line_is_sent_clipped_not_whole(ws: Workspace) -> None:
    # A hand-edited ledger (or an old one) may hold a line of any length: one model call must
    # still carry about max_input_chars of ledger text, not the whole line.
    append_bullets(ws, ["Alice prefers green tea"], header="Memory Flush")
    append_bullets(ws, ["pasted log " + "x" * 300_000], header="Memory Flush")
    append_bullets(ws, ["Bob owns the billing service"], header="Memory Flush")
    model = FunctionModel(keep_first)
    result = await MemoryConsolidator(ws, model, max_input_chars=10_000).consolidate()
    assert result.skipped is None and result.entries == 3
    assert model.calls and all(len(ledger_text(call)) <= 10_000 + 100 for call in model.calls)
    clipped = next(ledger_text(c) for c in model.calls if "pasted log" in ledger_text(c))
    # The clipped line keeps the pointer to its ledger, then the entry's source id.
    assert re.search(r"… \(full text in memory/2026-11-30\.md\) \[src: e\d+\]$", clipped.rstrip())
    assert "x" * 300_000 in ws.read_text("memory/2026-11-30.md")  # the ledger keeps it whole


async def test_progress_is_not_called_without_new_entries(ws: Workspace) -> None:
    seen: list[tuple[int, int]] = []
    consolidator = MemoryConsolidator(
        ws, FunctionModel(keep_first), progress=lambda done, total: seen.append((done, total))
    )
    assert (await consolidator.consolidate()).skipped == "nothing_new"
    assert seen == []
    append_bullets(ws, ["one fact"], header="Memory Add", day=date(2026, 11, 29))
    await consolidator.consolidate(dry_run=True)
    assert seen == [(0, 1), (1, 1)]


def test_progress_must_be_a_function(ws: Workspace) -> None:
    with pytest.raises(ConfigError, match="MemoryConsolidator progress must be a function"):
        MemoryConsolidator(ws, FunctionModel(keep_first), progress="yes")  # type: ignore[arg-type]
