"""Provenance: every memory bullet knows where it came from, on both stores."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from datetime import timedelta
from pathlib import Path

from conftest import FixedClock
from memdir.memory import MemoryConsolidator, MemoryFlushManager, replace_memory_md
from memdir.memory._entries import parse_bullets
from memdir.messages import Msg
from memdir.models import SOURCES_KEY
from memdir.models.extractive import ExtractiveModel
from memdir.provenance._records import load_memory_records
from memdir.provenance._why import Link, SourceFinder, why
from memdir.sessions import SessionLog
from memdir.store.archive import import_archive, write_archive
from memdir.store.workspace import Workspace
from memdir.testing import FunctionModel, ModelCall
from memdir.tools import memory_add, memory_get, memory_why
from memdir.tools._core import add_memory, shared_index

CONVERSATION = [
    ("user", "I prefer PostgreSQL 16 for the billing service."),
    ("assistant", "Noted: PostgreSQL 16 for billing."),
    ("user", "Anna Schmidt owns the deploy pipeline; her deadline is 2026-12-15."),
    ("assistant", "Got it."),
    ("user", "We decided to run the nightly backfill at 02:00 UTC in batches of 5,000 rows."),
]


def _messages(clock: FixedClock) -> list[Msg]:
    out = []
    for n, (role, text) in enumerate(CONVERSATION):
        msg = Msg.user(text) if role == "user" else Msg.assistant(text)
        out.append(dataclasses.replace(msg, created_at=clock.instant + timedelta(minutes=n)))
    return out


def _leaves(link: Link) -> list[Link]:
    return [link] if not link.sources else [x for s in link.sources for x in _leaves(s)]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]{4,}", text.lower()) if w not in {"user", "that"}}


async def _flush_and_consolidate(ws: Workspace, clock: FixedClock) -> list[Msg]:
    msgs = _messages(clock)
    SessionLog(ws, "s1").append(msgs)
    flushed = await MemoryFlushManager(ws, ExtractiveModel()).flush_memories(msgs, session_id="s1")
    assert flushed.written
    result = await MemoryConsolidator(ws, ExtractiveModel()).consolidate()
    assert result.applied
    return msgs


async def test_every_memory_bullet_leads_to_the_conversation_lines(
    any_ws: Workspace, clock: FixedClock
) -> None:
    await _flush_and_consolidate(any_ws, clock)
    bullets = parse_bullets(any_ws.read_text("MEMORY.md"))
    assert bullets
    for bullet in bullets:
        chain = why(any_ws, f"MEMORY.md#L{bullet.first_line + 1}")
        assert chain.note == "consolidated" and chain.sources, chain
        ledger = chain.sources[0]
        assert ledger.citation.startswith("memory/2026-11-30.md#L")
        assert ledger.origin == "user" and ledger.note == "flush of session s1"
        messages = ledger.sources
        assert messages and all(m.citation.startswith("sessions/s1.log.jsonl#L") for m in messages)
        # The conversation line holds the fact's words.
        spoken = " ".join(m.text for m in messages).lower()
        assert _words(bullet.text) & _words(spoken) == _words(bullet.text) - {"noted"}, (
            bullet.text,
            spoken,
        )


async def test_the_consolidator_is_given_ids_and_invented_ones_are_dropped(
    any_ws: Workspace,
) -> None:
    add_memory(any_ws, "The staging cluster runs Kubernetes 1.31", origin="model")
    add_memory(any_ws, "Backups are kept for 35 days", origin="person")
    seen: list[dict[str, object]] = []

    def answer(call: ModelCall) -> str:
        meta = call.messages[-1].metadata
        seen.append(dict(meta[SOURCES_KEY]))
        assert "[src: e1]" in call.messages[-1].text and "[src: e2]" in call.messages[-1].text
        return (
            "# Memory\n\n## Facts\n"
            "- The staging cluster runs Kubernetes 1.31 [src: e1, e99, m42]\n"
            "- Backups are kept for 35 days [src: e2]\n"
            "- The CEO loves golf [src: q7]\n"
        )

    result = await MemoryConsolidator(any_ws, FunctionModel(answer)).consolidate()
    assert result.applied and seen[0]["entries"] == ["e1", "e2"]
    text = any_ws.read_text("MEMORY.md")
    assert "[src:" not in text  # ids never reach the file a person reads
    chains = {b.text: why(any_ws, f"MEMORY.md#L{b.first_line + 1}") for b in parse_bullets(text)}
    k8s = chains["The staging cluster runs Kubernetes 1.31"]
    assert [s.citation for s in k8s.sources] == ["memory/2026-11-30.md#L3"]  # e99, m42: dropped
    assert k8s.sources[0].note == "added by the model (memory_add)"
    backups = chains["Backups are kept for 35 days"]
    assert backups.sources[0].note == "added by a person (memdir add)"
    golf = chains["The CEO loves golf"]
    assert golf.sources == () and golf.note.startswith("unsourced")  # never a made-up source
    log = [
        json.loads(x)
        for x in any_ws.read_text("memory/.history/consolidation.log.jsonl").splitlines()
    ]
    assert log[-1]["provenance"] == {"invented_ids": 3, "unsourced": 1, "quoted": 0}


async def test_provenance_survives_an_archive_round_trip_and_a_human_edit(
    any_ws: Workspace, clock: FixedClock, tmp_path: Path
) -> None:
    await _flush_and_consolidate(any_ws, clock)
    buffer = io.BytesIO()
    write_archive(any_ws, buffer)
    other = Workspace(tmp_path / "imported", tz="UTC", clock=clock)
    import_archive(io.BytesIO(buffer.getvalue()), other)
    text = other.read_text("MEMORY.md")
    first = next(b for b in parse_bullets(text) if "PostgreSQL" in b.text)
    before = why(any_ws, f"MEMORY.md#L{first.first_line + 1}")
    assert why(other, f"MEMORY.md#L{first.first_line + 1}") == before

    # A person rewords one bullet and writes a new one.
    edited = text.replace(first.text, first.text.replace("PostgreSQL 16", "PostgreSQL 16.4"))
    edited += "- The office wifi password rotates monthly\n"
    other.write_text("MEMORY.md", edited)
    bullets = parse_bullets(edited)
    reworded = next(b for b in bullets if "16.4" in b.text)
    chain = why(other, f"MEMORY.md#L{reworded.first_line + 1}")
    assert chain.note.startswith("edited by a person")
    assert [s.citation for s in chain.sources] == [s.citation for s in before.sources]
    new = next(b for b in bullets if "wifi" in b.text)
    assert why(other, f"MEMORY.md#L{new.first_line + 1}").note.startswith("unsourced")


async def test_a_replacement_by_a_person_is_recorded_as_theirs(any_ws: Workspace) -> None:
    replace_memory_md(any_ws, "# Memory\n\n- Our fiscal year starts in April\n", version=None)
    chain = why(any_ws, "MEMORY.md#L3")
    assert chain.note == "written by a person" and chain.origin == "person"


async def test_hits_and_reads_carry_sources(any_ws: Workspace, clock: FixedClock) -> None:
    await _flush_and_consolidate(any_ws, clock)
    memory_add("Deploys are frozen during the last week of December", workspace=any_ws)
    index = shared_index(any_ws)
    index.refresh()
    hits = index.search("PostgreSQL billing")
    curated = next(h for h in hits if h.path == "MEMORY.md")
    assert curated.sources and curated.sources[0].startswith("memory/2026-11-30.md#L")
    frozen = index.search("deploys frozen December")[0]
    assert frozen.sources == ("added by the model (memory_add)",)
    read = memory_get("MEMORY.md", sources=True, workspace=any_ws)
    assert "Sources:" in read and "<- memory/2026-11-30.md#L" in read
    ledger = memory_get("memory/2026-11-30.md#L3", sources=True, workspace=any_ws)
    assert "L3 <- sessions/s1.log.jsonl#" in ledger
    chain = memory_why(f"MEMORY.md#L{curated.line_number}", workspace=any_ws)
    assert "sessions/s1.log.jsonl#L" in chain and not chain.startswith("Error")


async def test_records_live_in_the_store(any_ws: Workspace, clock: FixedClock) -> None:
    await _flush_and_consolidate(any_ws, clock)
    records = load_memory_records(any_ws)
    assert len(records) == len(parse_bullets(any_ws.read_text("MEMORY.md")))
    sidecar = any_ws.read_text("memory/.provenance/MEMORY.md.json")
    assert "PostgreSQL" not in sidecar  # fingerprints, not the text


def test_why_refuses_a_line_without_a_bullet(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "# Memory\n\n- one fact\n")
    assert memory_why("MEMORY.md#L1", workspace=ws).startswith("Error: MEMORY.md line 1 is not")
    assert memory_why("MEMORY.md", workspace=ws).startswith("Error: give a line")


async def test_a_hits_sources_read_from_its_own_text_match_the_whole_ledgers(
    ws: Workspace, clock: FixedClock
) -> None:
    """A search cites a few lines of ledgers thousands of lines long: their sources are read
    from the hit's text (or the lines around it), and must be what the whole file says."""
    await _flush_and_consolidate(ws, clock)
    rel = "memory/2026-11-30.md"
    add_memory(ws, "Jing prefers tabs over spaces\nThe staging database is on port 6543")
    ws.append_text(rel, "- a bullet written by hand\n  with a continuation line\n  and another\n")
    add_memory(ws, "The backfill runs from the ops host")
    index = shared_index(ws)
    index.refresh()
    text = ws.read_text(rel)
    found = 0
    for bullet in parse_bullets(text):
        first, last = bullet.first_line + 1, bullet.last_line + 1
        content = "\n".join(text.splitlines()[first - 1 : last])
        whole = SourceFinder(ws)
        whole._window = lambda *args: None  # type: ignore[method-assign]
        expected = whole.sources(rel, first, last)
        assert expected, bullet.text
        assert SourceFinder(ws).sources(rel, first, last, content) == expected
        assert SourceFinder(ws).sources(rel, first, last) == expected
        found += 1
    assert found >= 5
    for hit in index.search("backfill ops host staging port hand continuation", limit=10):
        if hit.path == rel:
            assert hit.sources == SourceFinder(ws).sources(rel, hit.line_number, hit.line_end)


def test_a_hand_written_ledger_and_a_repeated_bullet_cite_what_they_are(ws: Workspace) -> None:
    """A ledger written by hand has no records: its hits are unsourced. A bullet added twice
    has a record per line: each line cites its own."""
    ws.write_text(
        "memory/2026-11-29.md",
        "- the kiln is fired on Thursdays\n\nA paragraph, not a bullet: the kiln shed key\n",
    )
    rel = "memory/2026-11-30.md"
    add_memory(ws, "The kiln cools overnight", origin="person")
    ws.append_text(rel, "- a note typed into the ledger about the kiln\n")
    add_memory(ws, "The kiln cools overnight", origin="model")
    index = shared_index(ws)
    index.refresh()
    hits = index.search("kiln", limit=10)
    by_line = {(h.path, h.line_number): h.sources for h in hits}
    assert by_line["memory/2026-11-29.md", 1] == ("unsourced",)
    assert by_line["memory/2026-11-29.md", 3] == ()  # no bullet: nothing to cite
    lines = ws.read_text(rel).splitlines()
    cited = [
        SourceFinder(ws).sources(rel, n, n, line)
        for n, line in enumerate(lines, start=1)
        if line.startswith("- ")
    ]
    assert cited == [
        ("added by a person (memdir add)",),
        ("unsourced",),
        ("added by the model (memory_add)",),
    ], cited
