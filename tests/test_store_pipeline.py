"""The memory pipeline behaves the same on every store: files on disk, rows in PostgreSQL.

Flush, consolidation (with its history and lease), session logs, compaction with offload,
eviction, the agent's session state, retention, the file tools and the memory tools' reads,
each run on a directory and on a real PostgreSQL server (the ``any_ws`` fixture).
"""

from __future__ import annotations

import json
from datetime import timedelta

from _scripted_agent import compacting_agent, scripted_model
from memdir import HarnessAgent
from memdir.agent import list_files, read_file, write_file
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.memory._lease import Lease
from memdir.memory._retention import expire_ledgers, prune_old_files
from memdir.messages import Msg
from memdir.models import ExtractiveModel
from memdir.sessions import SessionLog, list_sessions
from memdir.testing import FunctionModel
from memdir.tools import memory_add, memory_get
from memdir.workspace import Workspace

CONVO = [
    Msg.user("We decided to move the shop database from MySQL to PostgreSQL 16."),
    Msg.assistant("Noted: the shop database moves to PostgreSQL 16."),
    Msg.user("My favourite editor theme is gruvbox."),
    Msg.assistant("Got it, gruvbox."),
]
SUMMARY = "We chose PostgreSQL 16."


async def test_flush_writes_each_fact_once(any_ws: Workspace) -> None:
    manager = MemoryFlushManager(any_ws, ExtractiveModel())
    first = await manager.flush_memories(CONVO, session_id="s1")
    again = await manager.flush_memories(CONVO, session_id="s1")
    ledger = any_ws.read_text(any_ws.ledger_rel())
    assert first.bullets and "PostgreSQL 16" in ledger and "gruvbox" in ledger
    assert again.bullets == () and ledger.count("gruvbox") == 1


async def test_consolidation_writes_memory_md_keeps_history_and_takes_the_lease(
    any_ws: Workspace,
) -> None:
    memory_add("The deploy window is Friday 18:00.", workspace=any_ws)
    consolidator = MemoryConsolidator(any_ws, ExtractiveModel())
    result = await consolidator.consolidate()
    assert result.applied and "Friday 18:00" in any_ws.read_text("MEMORY.md")
    memory_add("The backup runs nightly at 02:00.", workspace=any_ws)
    assert (await consolidator.consolidate()).applied
    history = [e.name for e in any_ws.listdir("memory/.history") if e.name.startswith("MEMORY.")]
    assert history  # the previous MEMORY.md was kept
    holder = Lease(any_ws, "consolidation", ttl=timedelta(minutes=5))
    assert holder.try_acquire()
    assert (await consolidator.consolidate()).skipped == "busy"
    holder.release()


def test_session_logs_append_dedupe_and_list(any_ws: Workspace) -> None:
    log = SessionLog(any_ws, "s1")
    span = log.append(CONVO[:2])
    assert span is not None and (span.start_line, span.end_line) == (1, 2)
    assert log.append(CONVO[:2]) is None  # already logged
    span2 = log.append(CONVO[2:])
    assert span2 is not None and span2.start_line == 3
    assert [m.text for m in log.messages()] == [m.text for m in CONVO]
    assert [m.text for m in SessionLog(any_ws, "s1").messages(3, 4)] == [
        CONVO[2].text,
        CONVO[3].text,
    ]
    assert list_sessions(any_ws) == ["s1"]


def test_an_agent_compacts_offloads_evicts_and_resumes(any_ws: Workspace) -> None:
    big = "line of tool output with an error near the end\n" * 4_000
    agent = compacting_agent(any_ws, summary=SUMMARY, tool_output=big, echo=40)
    agent.call_sync("Show me the build log.")
    for i in range(4):
        agent.call_sync(f"Question {i} about the migration plan, with some detail to it.")
    agent.close_sync()
    history = agent.history()
    assert history[0].name == "__compaction_summary__"
    logged = [m.text for m in SessionLog(any_ws, "default").messages()]
    assert "Show me the build log." in logged
    evicted = list(any_ws.walk("large_tool_results"))
    assert evicted and evicted[0][1].size == len(big.encode())
    again = HarnessAgent(
        model=scripted_model(SUMMARY, echo=40),
        workspace=any_ws,
        memory_flush=False,
        maintenance=None,
    )
    assert [m.id for m in again.history()] == [m.id for m in history]


def test_retention_archives_and_prunes(any_ws: Workspace) -> None:
    any_ws.append_text("memory/2026-01-02.md", "- an old day\n")
    any_ws.append_text(any_ws.ledger_rel(), "- today\n")
    assert expire_ledgers(any_ws, retention_days=30) == ["2026-01-02.md"]
    assert any_ws.read_text("memory/archive/2026-01-02.md") == "- an old day\n"
    assert any_ws.stat("memory/2026-01-02.md") is None
    SessionLog(any_ws, "old").append([Msg.user("x")])
    report = prune_old_files(any_ws, retention_days=1, dry_run=True)
    assert report.sessions == ()  # just written: younger than a day


def test_memory_get_and_file_tools_on_every_store(any_ws: Workspace) -> None:
    any_ws.write_text("MEMORY.md", "## Facts\n- one\n- two\n")
    assert "2|- one" in memory_get("MEMORY.md", workspace=any_ws)
    assert memory_get("sessions/x.log.jsonl", workspace=any_ws).startswith("Error:")
    assert "Created notes/plan.md" in write_file("notes/plan.md", "step 1\n", workspace=any_ws)
    assert "step 1" in read_file("notes/plan.md", workspace=any_ws)
    listing = list_files(".", recursive=True, workspace=any_ws)
    assert "notes/plan.md" in listing and ".index" not in listing


def test_agent_state_survives_and_a_damaged_one_is_kept_aside(any_ws: Workspace) -> None:
    any_ws.write_text("sessions/default.state.json", "{not json")
    agent = HarnessAgent(
        model=FunctionModel(lambda c: "hello"), workspace=any_ws, memory_flush=False,
        maintenance=None,
    )  # fmt: skip
    assert agent.history() == []
    aside = [e.name for e in any_ws.listdir("sessions") if ".corrupt-" in e.name]
    assert len(aside) == 1
    assert any_ws.read_text(f"sessions/{aside[0]}") == "{not json"
    agent.call_sync("hi")
    state = json.loads(any_ws.read_text("sessions/default.state.json"))
    assert [m["content"][0]["text"] for m in state["messages"]] == ["hi", "hello"]
