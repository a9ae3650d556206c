"""The kept versions of MEMORY.md and who made each: a consolidation or a person, told from
the digest each writer records in the consolidation log, never guessed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conftest import FixedClock
from memdir.errors import ToolInputError
from memdir.memory import MemoryConsolidator, read_consolidation_log, replace_memory_md
from memdir.memory._versions import CURRENT, made_by, read_version, version_names
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel
from memdir.workspace import Workspace
from test_memory_consolidate import merge


async def _consolidate(ws: Workspace, clock: FixedClock, *bullets: str) -> None:
    clock.instant += timedelta(minutes=1)
    append_bullets(ws, list(bullets), header="Memory Flush")
    result = await MemoryConsolidator(ws, FunctionModel(merge)).consolidate()
    assert result.applied and result.skipped is None


def _replace(ws: Workspace, clock: FixedClock, text: str) -> None:
    clock.instant += timedelta(minutes=1)
    found = ws.read_versioned("MEMORY.md")
    replace_memory_md(ws, text, version=found.version if found is not None else None)


def _makers(ws: Workspace) -> list[tuple[str, str | None]]:
    """(text, who made it) of every version, newest first, the current file first."""
    records = read_consolidation_log(ws)
    found = []
    for name in [CURRENT, *version_names(ws)]:
        data = read_version(ws, name)
        maker = made_by(name, data, records)
        found.append((data.decode(), maker.who if maker is not None else None))
    return found


async def test_each_version_names_the_consolidation_or_the_person_who_made_it(
    any_ws: Workspace, clock: FixedClock
) -> None:
    ws = any_ws
    await _consolidate(ws, clock, "Alice prefers green tea")
    first = ws.read_text("MEMORY.md")
    _replace(ws, clock, first + "- Deploys happen on Fridays\n")
    await _consolidate(ws, clock, "Project X uses Postgres 16")
    _replace(ws, clock, first)  # a person restores the first version
    makers = _makers(ws)
    assert [who for _, who in makers] == ["person", "consolidation", "person", "consolidation"]
    assert makers[0][0] == makers[3][0] == first  # the same text, made twice, by each
    assert "Fridays" in makers[2][0] and "Postgres 16" in makers[1][0]
    applied = [r for r in read_consolidation_log(ws) if r["status"] == "applied"]
    assert all(len(r["sha256"]) == 64 for r in applied)


def test_a_version_no_logged_writer_made_has_no_maker(any_ws: Workspace, clock: FixedClock) -> None:
    ws = any_ws
    ws.write_text("MEMORY.md", "# Memory\n- written by a tool that keeps no log\n")
    _replace(ws, clock, "# Memory\n- written by a person\n")
    assert [who for _, who in _makers(ws)] == ["person", None]


async def test_a_consolidation_that_changes_nothing_claims_no_version(
    any_ws: Workspace, clock: FixedClock
) -> None:
    ws = any_ws
    text = "# Memory\n\n- Alice prefers green tea\n"
    _replace(ws, clock, text)
    clock.instant += timedelta(minutes=1)
    append_bullets(ws, ["Alice prefers green tea"], header="Memory Flush")
    result = await MemoryConsolidator(ws, FunctionModel(lambda call: text)).consolidate()
    assert result.skipped is None and ws.read_text("MEMORY.md") == text
    assert read_consolidation_log(ws)[-1]["status"] == "applied"
    assert [who for _, who in _makers(ws)] == ["person"]


@pytest.mark.parametrize("name", ["../MEMORY.md", "MEMORY.md", "consolidation.log.jsonl", ""])
def test_a_name_that_is_not_a_kept_version_is_refused(ws: Workspace, name: str) -> None:
    with pytest.raises(ToolInputError, match="version"):
        read_version(ws, name)


def test_a_well_formed_name_that_is_not_kept_is_refused(ws: Workspace) -> None:
    with pytest.raises(ToolInputError, match="no version"):
        read_version(ws, "MEMORY.20261130T090000.000000Z.md")
