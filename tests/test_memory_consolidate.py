"""Consolidation: MEMORY.md is rewritten only from a sound answer, within budget, with history."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memdir.errors import ConfigError, ModelError
from memdir.memory import MemoryConsolidator, read_consolidation_log
from memdir.memory import consolidate as consolidate_module
from memdir.memory._lease import Lease
from memdir.models import CURRENT_KEY, ENTRIES_KEY, MAX_CHARS_KEY, TASK_KEY
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.workspace import Workspace

STATE = "memory/.consolidation_state"


def merge(call: ModelCall) -> str:
    """A well-behaved consolidator: current bullets, then new entries not yet there."""
    meta = call.messages[-1].metadata
    current = [ln for ln in str(meta[CURRENT_KEY]).splitlines() if ln.startswith("- ")]
    seen = {ln.casefold() for ln in current}
    for entry in meta[ENTRIES_KEY]:
        if f"- {entry}".casefold() not in seen:
            current.append(f"- {entry}")
            seen.add(f"- {entry}".casefold())
    return "# Memory\n\n" + "\n".join(current) + "\n"


def add(ws: Workspace, *bullets: str, day: str | None = None) -> None:
    from datetime import date

    append_bullets(
        ws, list(bullets), header="Memory Flush", day=date.fromisoformat(day) if day else None
    )


def snapshot(ws: Workspace) -> tuple[bytes | None, bytes | None]:
    def read(rel: str) -> bytes | None:
        path = ws.root / rel
        return path.read_bytes() if path.exists() else None

    return read("MEMORY.md"), read(STATE)


async def test_merges_new_entries_and_moves_the_watermark(ws: Workspace) -> None:
    add(ws, "Alice prefers green tea", "Project X uses Postgres 16")
    model = FunctionModel(merge)
    result = await MemoryConsolidator(ws, model).consolidate()
    assert result.skipped is None and result.applied
    assert result.added == ("Alice prefers green tea", "Project X uses Postgres 16")
    assert result.entries == 2 and result.files == ("2026-11-30.md",)
    assert ws.read_text("MEMORY.md") == (
        "# Memory\n\n- Alice prefers green tea\n- Project X uses Postgres 16\n"
    )
    meta = model.calls[0].messages[-1].metadata
    assert meta[TASK_KEY] == "consolidate" and meta[MAX_CHARS_KEY] == 16_000
    assert "4000 tokens" in (model.calls[0].system or "")
    state = json.loads(ws.read_text(STATE))
    size = (ws.root / "memory/2026-11-30.md").stat().st_size
    assert state["files"]["2026-11-30.md"]["offset"] == size
    again = await MemoryConsolidator(ws, model).consolidate()
    assert again.skipped == "nothing_new" and len(model.calls) == 1


async def test_only_entries_after_the_watermark_are_sent(ws: Workspace) -> None:
    add(ws, "first fact")
    model = FunctionModel(merge)
    consolidator = MemoryConsolidator(ws, model)
    await consolidator.consolidate()
    add(ws, "second fact")
    add(ws, "third fact", day="2026-12-01")
    result = await consolidator.consolidate()
    assert model.calls[1].messages[-1].metadata[ENTRIES_KEY] == ["second fact", "third fact"]
    assert "first fact" not in model.calls[1].messages[-1].metadata[ENTRIES_KEY]
    assert result.added == ("second fact", "third fact")
    assert result.files == ("2026-11-30.md", "2026-12-01.md")


async def test_previous_versions_are_kept_and_bounded(ws: Workspace) -> None:
    consolidator = MemoryConsolidator(ws, FunctionModel(merge), history_versions=2)
    for i in range(4):
        add(ws, f"fact {i}")
        result = await consolidator.consolidate()
    assert result.history_path is not None
    versions = sorted(ws.history_dir.glob("MEMORY.*.md"))
    assert len(versions) == 2
    assert versions[-1].read_text() == "# Memory\n\n- fact 0\n- fact 1\n- fact 2\n"
    log = read_consolidation_log(ws)
    assert [r["status"] for r in log] == ["applied"] * 4
    assert log[-1]["added"] == ["fact 3"] and log[-1]["counts"]["unchanged"] == 3


async def test_a_rewrite_that_drops_most_entries_is_refused(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    original = "# Memory\n\n" + "".join(f"- durable fact number {i}\n" for i in range(8))
    ws.write_text("MEMORY.md", original)
    add(ws, "a new fact")
    lossy = "# Memory\n\n- durable fact number 0\n- durable fact number 1\n- a new fact\n"
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await MemoryConsolidator(ws, ScriptedModel([lossy])).consolidate()
    assert result.skipped == "too_many_removals" and not result.applied
    assert ws.read_text("MEMORY.md") == original
    assert not (ws.root / STATE).exists()
    assert any("drops 6 of 8" in r.getMessage() for r in caplog.records)
    record = read_consolidation_log(ws)[-1]
    assert record["status"] == "refused" and record["counts"]["would_remove"] == 6


async def test_rewording_and_single_removals_are_allowed(ws: Workspace) -> None:
    ws.write_text(
        "MEMORY.md", "# Memory\n- Alice lives in Paris\n- Bob uses vim\n- Temp: ticket 42 open\n"
    )
    add(ws, "Alice moved to Berlin in November 2026")
    answer = "# Memory\n- Alice lives in Berlin since November 2026\n- Bob uses vim\n"
    result = await MemoryConsolidator(ws, ScriptedModel([answer])).consolidate()
    assert result.applied
    new = "Alice lives in Berlin since November 2026"
    assert result.changed == (("Alice lives in Paris", new),)
    assert result.removed == ("Temp: ticket 42 open",)


@pytest.mark.parametrize(("pad", "applied"), [("n" * 30, True), ("", False)])
async def test_a_full_file_may_swap_old_bullets_for_new_ones(
    ws: Workspace, pad: str, applied: bool
) -> None:
    old = [f"old fact number {i} " + "o" * 20 for i in range(8)]
    ws.write_text("MEMORY.md", "# Memory\n" + "".join(f"- {b}\n" for b in old))
    new = [f"new fact {i} {pad}".strip() for i in range(4)]
    add(ws, *new)
    answer = "# Memory\n" + "".join(f"- {b}\n" for b in [*old[:4], *new])
    consolidator = MemoryConsolidator(ws, ScriptedModel([answer]), max_memory_tokens=100)
    result = await consolidator.consolidate()
    # At 80 % of the budget or more, each new bullet may take an old one's place; a file
    # that shrinks while dropping half its entries is refused.
    assert result.applied is applied
    assert result.skipped == (None if applied else "too_many_removals")


async def test_over_budget_answer_is_sent_back_once(ws: Workspace) -> None:
    add(ws, "new fact")
    big = "# Memory\n" + "".join(f"- long fact {i} " + "x" * 80 + "\n" for i in range(5))
    small = "# Memory\n- new fact\n- long fact summary\n"
    model = ScriptedModel([big, small])
    result = await MemoryConsolidator(ws, model, max_memory_tokens=100).consolidate()
    assert result.applied and result.trimmed == ()
    assert ws.read_text("MEMORY.md") == small
    follow_up = model.calls[1].messages[-1]
    assert "the limit is 400" in follow_up.text
    model.assert_complete()


async def test_budget_is_enforced_by_trimming_oldest_bullets(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "# Memory\n" + "".join(f"- old fact {i}\n" for i in range(3)))
    add(ws, "fresh fact A", "fresh fact B")
    big = (
        "# Memory\n\n## Old\n"
        + "".join(f"- old fact {i} " + "y" * 60 + "\n" for i in range(3))
        + "\n## New\n- fresh fact A\n- fresh fact B\n"
    )
    model = ScriptedModel([big, big])
    consolidator = MemoryConsolidator(ws, model, max_memory_tokens=60, max_drop_ratio=1.0)
    result = await consolidator.consolidate()
    text = ws.read_text("MEMORY.md")
    assert len(text) <= 240
    assert "- fresh fact A" in text and "- fresh fact B" in text
    assert result.trimmed and all(t.startswith("old fact") for t in result.trimmed)
    assert result.trimmed[0].startswith("old fact 2")  # last in the file goes first


async def test_an_answer_that_cannot_fit_changes_nothing(ws: Workspace) -> None:
    add(ws, "fact")
    prose = "# Memory\n" + "z" * 300 + "\n- fact\n"
    result = await MemoryConsolidator(
        ws, ScriptedModel([prose, prose]), max_memory_tokens=60
    ).consolidate()
    assert result.skipped == "over_budget"
    assert not ws.memory_md.exists()


def _hang(call: ModelCall) -> object:
    async def later() -> str:
        await asyncio.sleep(5)
        return "- late"

    return later()


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (ModelError("rate limited", status_code=429), "model_error"),
        (ValueError("bad payload"), "model_error"),
        ("", "blank_answer"),
        ("```\n\n```", "blank_answer"),
        ("I could not do that, sorry.", "unusable_answer"),
        ("- private fact\n" * 7_000, "oversized_answer"),
        (_hang, "timeout"),
    ],
)
async def test_model_failures_change_nothing(
    ws: Workspace, caplog: pytest.LogCaptureFixture, step: object, reason: str
) -> None:
    ws.write_text("MEMORY.md", "# Memory\n- kept fact\n")
    add(ws, "private fact")
    before = snapshot(ws)
    consolidator = MemoryConsolidator(ws, ScriptedModel([step]), timeout=0.05)  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await consolidator.consolidate()
    assert result.skipped == reason and not result.applied
    assert snapshot(ws) == before
    assert list(ws.history_dir.glob("MEMORY.*.md")) == []
    assert any("consolidation" in r.getMessage() for r in caplog.records)
    assert all("private fact" not in r.getMessage() for r in caplog.records)
    assert read_consolidation_log(ws)[-1]["reason"] == reason
    # Nothing lost: the entry is offered again next time.
    retry = FunctionModel(merge)
    consolidator.model = retry
    assert (await consolidator.consolidate()).added == ("private fact",)


async def test_missing_memory_md_is_rebuilt_from_every_ledger(ws: Workspace) -> None:
    add(ws, "archived fact", day="2026-01-02")
    add(ws, "recent fact")
    model = FunctionModel(merge)
    await MemoryConsolidator(ws, model).consolidate()
    os.replace(ws.root / "memory/2026-01-02.md", ws.archive_dir / "2026-01-02.md")
    ws.memory_md.unlink()
    result = await MemoryConsolidator(ws, model).consolidate()
    assert result.applied
    assert ws.read_text("MEMORY.md") == "# Memory\n\n- archived fact\n- recent fact\n"


async def test_archived_ledger_keeps_its_watermark(ws: Workspace) -> None:
    add(ws, "old fact", day="2026-01-02")
    model = FunctionModel(merge)
    await MemoryConsolidator(ws, model).consolidate()
    os.replace(ws.root / "memory/2026-01-02.md", ws.archive_dir / "2026-01-02.md")
    assert (await MemoryConsolidator(ws, model).consolidate()).skipped == "nothing_new"


async def test_hand_edited_ledger_is_read_again(ws: Workspace) -> None:
    add(ws, "fact one", "fact two")
    model = FunctionModel(merge)
    await MemoryConsolidator(ws, model).consolidate()
    ws.write_text(ws.ledger_rel(), "## Memory Add — x\n- fact one (corrected)\n")
    result = await MemoryConsolidator(ws, model).consolidate()
    assert model.calls[1].messages[-1].metadata[ENTRIES_KEY] == ["fact one (corrected)"]
    assert result.added == ("fact one (corrected)",)


async def test_a_user_edit_during_the_call_is_not_overwritten(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "# Memory\n- one\n")
    add(ws, "two")

    def edit_then_answer(call: ModelCall) -> str:
        ws.write_text("MEMORY.md", "# Memory\n- one\n- typed by the user\n")
        return "# Memory\n- one\n- two\n"

    result = await MemoryConsolidator(ws, FunctionModel(edit_then_answer)).consolidate()
    assert result.skipped == "memory_changed"
    assert "typed by the user" in ws.read_text("MEMORY.md")


async def test_an_edit_between_the_check_and_the_write_is_not_overwritten(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the last moment: after the consolidator compared MEMORY.md, before it replaced it
    ws.write_text("MEMORY.md", "# Memory\n- one\n")
    add(ws, "two")

    def edit_there(name: str) -> None:
        if name == "consolidate:before-replace":
            ws.write_text("MEMORY.md", "# Memory\n- one\n- typed by the user\n")

    monkeypatch.setattr(consolidate_module, "pause_point", edit_there)
    result = await MemoryConsolidator(ws, FunctionModel(merge)).consolidate()
    assert result.skipped == "memory_changed" and not result.added
    assert ws.read_text("MEMORY.md") == "# Memory\n- one\n- typed by the user\n"
    monkeypatch.undo()
    again = await MemoryConsolidator(ws, FunctionModel(merge)).consolidate()  # not lost either
    assert again.added == ("two",) and "typed by the user" in ws.read_text("MEMORY.md")


async def test_dry_run_writes_nothing(ws: Workspace) -> None:
    add(ws, "a fact")
    result = await MemoryConsolidator(ws, FunctionModel(merge)).consolidate(dry_run=True)
    assert result.dry_run and not result.applied
    assert result.text == "# Memory\n\n- a fact\n" and result.added == ("a fact",)
    assert snapshot(ws) == (None, None)
    assert read_consolidation_log(ws) == []


async def test_secrets_in_the_answer_are_masked(ws: Workspace) -> None:
    add(ws, "deploy key noted")
    answer = "# Memory\n- deploy key noted\n- token ghp_" + "a" * 36 + "\n"
    await MemoryConsolidator(ws, ScriptedModel([answer])).consolidate()
    assert "ghp_" not in ws.read_text("MEMORY.md")


async def test_a_lone_surrogate_in_the_answer_does_not_fail_every_run(ws: Workspace) -> None:
    # JSON may carry "\\udce9"; it decodes to text that cannot be written as UTF-8.
    add(ws, "Alice likes summer")
    answer = "# Memory\n- Alice likes summer \udce9t\u00e9\n"
    result = await MemoryConsolidator(ws, ScriptedModel([answer])).consolidate()
    assert result.applied
    assert "Alice likes summer \ufffdt\u00e9" in ws.read_text("MEMORY.md")


async def test_long_backlog_is_sent_in_batches(ws: Workspace) -> None:
    for day in range(1, 6):
        add(ws, *(f"day {day} fact {i} " + "w" * 100 for i in range(6)), day=f"2026-11-0{day}")
    model = FunctionModel(merge)
    result = await MemoryConsolidator(ws, model, max_input_chars=1_000).consolidate()
    assert len(model.calls) >= 5 and result.batches == len(model.calls)
    assert len(result.added) == 30
    assert (await MemoryConsolidator(ws, model).consolidate()).skipped == "nothing_new"


async def test_one_huge_block_is_sent_in_batches_too(ws: Workspace) -> None:
    # `memdir add` of a long list makes one block; sent whole, it would fail the same way on
    # every run and keep MEMORY.md from ever changing again.
    add(ws, *(f"catalogue item {i:04d} " + "w" * 60 for i in range(1_000)))
    model = FunctionModel(merge)
    result = await MemoryConsolidator(
        ws, model, max_input_chars=10_000, max_memory_tokens=30_000
    ).consolidate()
    assert result.skipped is None and len(model.calls) >= 7
    assert all(len("\n".join(c.messages[-1].metadata[ENTRIES_KEY])) <= 10_000 for c in model.calls)
    assert len(result.added) == 1_000


async def test_a_live_lease_makes_the_run_skip(ws: Workspace) -> None:
    add(ws, "fact")
    other = Lease(ws, "consolidation", ttl=timedelta(minutes=5))
    assert other.try_acquire()
    model = ScriptedModel([])
    assert (await MemoryConsolidator(ws, model).consolidate()).skipped == "busy"
    other.release()
    assert (await MemoryConsolidator(ws, FunctionModel(merge)).consolidate()).applied


@pytest.mark.parametrize("stale", ["dead_pid", "expired"])
async def test_a_stale_lease_is_taken_over(ws: Workspace, stale: str) -> None:
    add(ws, "fact")
    future = datetime.now(UTC) + timedelta(hours=1)
    record = {
        "pid": 2**22 + 12345 if stale == "dead_pid" else os.getpid(),
        "host": socket.gethostname(),
        "token": "abc",
        "expires_at": (future if stale == "dead_pid" else datetime.now(UTC)).isoformat(),
    }
    (ws.memory_dir / ".consolidation.lease").write_text(json.dumps(record))
    assert (await MemoryConsolidator(ws, FunctionModel(merge)).consolidate()).applied
    # Released: the record stays (expired) and the lease is free for the next run.
    assert Lease(ws, "consolidation", ttl=timedelta(minutes=1)).holder() is None


async def test_crash_between_memory_write_and_watermark_is_settled(ws: Workspace) -> None:
    add(ws, "fact")
    model = FunctionModel(merge)
    await MemoryConsolidator(ws, model).consolidate()
    # Simulate: a second run wrote MEMORY.md, then died before committing the watermark.
    add(ws, "later fact")
    state = json.loads(ws.read_text(STATE))
    size = (ws.root / "memory/2026-11-30.md").stat().st_size
    from memdir.memory._state import sha256

    new_text = "# Memory\n\n- fact\n- later fact\n"
    data = (ws.root / "memory/2026-11-30.md").read_bytes()
    state["pending"] = {
        "memory_sha256": sha256(new_text.encode()),
        "files": {"2026-11-30.md": {"offset": size, "sha256": sha256(data)}},
    }
    ws.write_text(STATE, json.dumps(state))
    ws.write_text("MEMORY.md", new_text)
    result = await MemoryConsolidator(ws, model).consolidate()
    assert result.skipped == "nothing_new" and len(model.calls) == 1
    assert json.loads(ws.read_text(STATE))["pending"] is None


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"max_drop_ratio": 1.5}, "max_drop_ratio"),
        ({"prompt": "keep {budget} chars"}, "placeholders"),
        ({"max_memory_tokens": "4000"}, "max_memory_tokens"),
        ({"history_versions": 0}, "history_versions"),
        ({"timeout": 0}, "timeout"),
        ({"lease_ttl": 900}, "lease_ttl"),
        ({"redactor": "mask"}, "redactor"),
        ({"model": None}, "ChatModel"),
    ],
)
def test_invalid_settings_are_one_line_config_errors(
    ws: Workspace, kw: dict[str, Any], name: str
) -> None:
    args: dict[str, Any] = {"model": ScriptedModel([]), **kw}
    with pytest.raises(ConfigError, match=name) as info:
        MemoryConsolidator(ws, **args)
    assert "\n" not in str(info.value)


async def test_one_huge_entry_is_clipped_and_does_not_stall_later_runs(ws: Workspace) -> None:
    from memdir.models import ExtractiveModel

    ws.write_text("MEMORY.md", "# Memory\n")
    add(ws, "word " * 12_000)
    add(ws, "Jing prefers tabs over spaces")
    consolidator = MemoryConsolidator(ws, ExtractiveModel())
    result = await consolidator.consolidate()
    assert result.skipped is None and result.applied
    memory = ws.read_text("MEMORY.md")
    assert "- Jing prefers tabs over spaces" in memory
    assert "- word word word" in memory
    assert " … (full text in memory/2026-11-30.md)\n" in memory
    assert len(memory) <= consolidator.max_chars
    assert (await consolidator.consolidate()).skipped == "nothing_new"


async def test_an_empty_file_answer_moves_past_entries_only_when_nothing_is_lost(
    ws: Workspace,
) -> None:
    add(ws, "a fact the model left out")
    consolidator = MemoryConsolidator(ws, ScriptedModel(["# Memory\n"]))
    assert (await consolidator.consolidate()).skipped is None
    assert (await consolidator.consolidate()).skipped == "nothing_new"
    ws.write_text("MEMORY.md", "# Memory\n\n- kept fact\n")
    add(ws, "another fact")
    before = snapshot(ws)
    consolidator.model = ScriptedModel(["# Memory\n"])
    assert (await consolidator.consolidate()).skipped == "blank_answer"
    assert snapshot(ws) == before


async def test_search_puts_the_consolidated_fact_first_and_forgets_the_replaced_one(
    ws: Workspace,
) -> None:
    from memdir.index import MemoryIndex

    ws.write_text("MEMORY.md", "# Memory\n- Alice lives in Paris\n- Bob uses vim\n")
    add(ws, "Alice lives in Paris, near the canal", day="2026-11-02")
    add(ws, "Alice lives in Berlin", day="2026-11-29")
    with MemoryIndex(ws) as index:
        index.refresh()  # as memory_search does before every search
        before = index.search("where does Alice live", 5)
        assert (before[0].path, before[0].content) == ("MEMORY.md", "- Alice lives in Paris")
        answer = "# Memory\n- Alice lives in Berlin\n- Bob uses vim\n"
        assert (await MemoryConsolidator(ws, ScriptedModel([answer])).consolidate()).applied
        index.refresh()
        after = index.search("where does Alice live", 5)  # the same index, opened before
    curated = [hit.content for hit in after if hit.path == "MEMORY.md"]
    assert curated == ["- Alice lives in Berlin"]  # the replaced line is gone from results
    assert (after[0].path, after[0].content) == ("MEMORY.md", "- Alice lives in Berlin")
    # the newest ledger's identical line is shown once, as the curated one; the older
    # ledger keeps its history, ranked below
    assert [hit.path for hit in after[1:]] == ["memory/2026-11-02.md"]
