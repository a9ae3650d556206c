"""Search over past sessions: the offloaded messages of ``sessions/<id>.log.jsonl`` found again.

``session_search``, ``session_list`` and ``session_history`` (and ``memory_search`` with
``sources=``) on a directory and on PostgreSQL; the index kept in step with appends,
replaced and removed logs; hostile session ids; namespaces; the agent, the MCP server and
the ``memdir sessions`` commands.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from memdir import HarnessAgent
from memdir.cli import cli
from memdir.compaction import CompactionConfig
from memdir.messages import Msg, ToolUseBlock
from memdir.sessions import SessionIndex, SessionLog, close_session_indexes, search_sessions
from memdir.testing import FunctionModel, ModelCall
from memdir.tools import (
    call_tool,
    memory_add,
    memory_search,
    session_history,
    session_list,
    session_search,
)
from memdir.tools._core import close_shared_indexes
from memdir.workspace import Workspace

FACT = "By the way, the door code for the Lisbon office storage room is 4471-KESTREL."
QUESTION = "What was the door code for the Lisbon storage room?"
SUMMARY = (
    "## SESSION INTENT\nPlan the office move.\n## SUMMARY\nWe planned the move of the "
    "furniture and the network.\n## ARTIFACTS\nNone\n## NEXT STEPS\nBook the van."
)
# Turns that share words with the fact and the question, so the ranking has work to do.
DISTRACTORS = [
    "The Lisbon office needs new chairs for the meeting room.",
    "Which storage boxes should we order for the archive room?",
    "The door of the server room squeaks; ask facilities.",
    "Our code review for the office booking tool is on Monday.",
    "Move the printers from the storage area to the second floor.",
    "The Porto office keeps its spare keys at the front desk.",
    "Write down what the movers need to know about the Lisbon lift.",
    "The network cabinet goes into the storage room next to the kitchen.",
    "Remind me to check the door sizes for the new desks.",
    "The office code of conduct gets a new section on visitors.",
]


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_session_indexes()
    close_shared_indexes()


def hit_lines(out: str) -> list[str]:
    """The hit lines of a search answer (without its header and footer)."""
    return [line for line in out.split("\n")[1:] if not line.startswith("... ")]


def log(ws: Workspace, session_id: str, *texts: str) -> None:
    msgs = [Msg.user(t) if i % 2 == 0 else Msg.assistant(t) for i, t in enumerate(texts)]
    SessionLog(ws, session_id).append(msgs)


# -- the target: a fact said once, compacted away, never flushed ---------------------------


def _office_model(call: ModelCall) -> Msg | str:
    if call.task == "summarize":
        return SUMMARY
    if call.task is not None:
        return "NO_REPLY"
    last = call.messages[-1]
    if last.role == "tool":
        return f"From the old conversation: {last.tool_results[0].text}"
    if last.role == "user" and last.text == QUESTION:
        query = {"query": "door code Lisbon storage room"}
        return Msg.assistant(tool_calls=[ToolUseBlock(id="q1", name="session_search", input=query)])
    return f"Noted: {last.text[:30]}"


def test_a_fact_said_once_in_a_compacted_session_is_found_in_the_top_5(any_ws: Workspace) -> None:
    log(any_ws, "earlier", *DISTRACTORS, *DISTRACTORS[::-1])  # another session, same words
    agent = HarnessAgent(
        model=FunctionModel(_office_model),
        workspace=any_ws,
        compaction=CompactionConfig(trigger_messages=6, keep_messages=2),
        memory_flush=False,
        maintenance=None,
    )
    agent.call_sync(FACT)
    for text in DISTRACTORS:
        agent.call_sync(text)
    assert all("KESTREL" not in m.text for m in agent.history())  # compacted away
    logged = [m.text for m in SessionLog(any_ws, "default").messages()]
    assert FACT in logged
    for rel in any_ws.memory_files():
        assert "KESTREL" not in any_ws.read_text(rel)  # in no ledger, not in MEMORY.md

    out = session_search(QUESTION, 5, workspace=any_ws)
    lines = hit_lines(out)
    assert len(lines) <= 5
    found = [line for line in lines if "4471-KESTREL" in line]
    assert found, out
    line_number = logged.index(FACT) + 1
    assert found[0].startswith(f"sessions/default.log.jsonl#L{line_number} [user · ")

    # The agent finds it with the tool, in the same session after the compaction.
    answer = agent.call_sync(QUESTION)
    agent.close_sync()
    assert "4471-KESTREL" in answer.text
    assert f"sessions/default.log.jsonl#L{line_number}" in answer.text


def test_memory_search_keeps_to_memory_unless_asked_for_sessions(any_ws: Workspace) -> None:
    log(any_ws, "s1", FACT, "Noted.")
    memory_add("The Lisbon office storage room holds the spare chairs.", workspace=any_ws)
    assert "KESTREL" not in memory_search("Lisbon storage door code", workspace=any_ws)
    both = memory_search(
        "Lisbon storage door code", sources=("memory", "sessions"), workspace=any_ws
    )
    assert "in memory and past sessions" in both
    assert "sessions/s1.log.jsonl#L1" in both and "memory/" in both
    only = memory_search("Lisbon storage door code", sources=["sessions"], workspace=any_ws)
    assert hit_lines(only)[0].startswith("sessions/s1.log.jsonl#L1 [user")
    bad = memory_search("door", sources=["web"], workspace=any_ws)
    assert bad.startswith("Error: unknown source(s) web")


# -- analysis, listing, reading -------------------------------------------------------------


def test_chinese_and_mixed_queries_find_the_message(any_ws: Workspace) -> None:
    log(
        any_ws,
        "zh",
        "我们讨论了很多数据的问题。",
        "候鸟的迁徙路线很长。",
        "最后决定把订单数据库迁移到PostgreSQL 16，周五晚上执行。",
        "好的，我记下了。",
    )
    for query in ("数据库迁移", "迁移 PostgreSQL", "什么时候迁移数据库？"):
        lines = hit_lines(session_search(query, workspace=any_ws))
        assert lines[0].startswith("sessions/zh.log.jsonl#L3 [user"), (query, lines)
        assert "周五晚上执行" in lines[0]


def test_how_to_answer_is_not_searched_for(any_ws: Workspace) -> None:
    log(
        any_ws,
        "items",
        "The shop listed five new items this week.",
        "Only five items fit in the van.",
        "The offsite is on Friday the 12th at the lake house.",
    )
    index = SessionIndex(any_ws)
    index.refresh()
    found = search_sessions(index, "When is the offsite? Mention only five items.", limit=3)
    assert [hit.line for hit in found] == [3]


def test_tool_calls_and_results_are_searchable_with_role_and_tool(any_ws: Workspace) -> None:
    call = ToolUseBlock(id="c1", name="run_tests", input={"path": "tests/test_billing.py"})
    SessionLog(any_ws, "t").append(
        [
            Msg.user("Run the billing tests."),
            Msg.assistant(tool_calls=[call]),
            Msg.tool_result("c1", "FAILED test_invoice_rounding: expected 10.05", name="run_tests"),
        ]
    )
    lines = hit_lines(session_search("invoice rounding", workspace=any_ws))
    assert lines[0].startswith("sessions/t.log.jsonl#L3 [tool run_tests · ")
    lines = hit_lines(session_search("tests/test_billing.py", workspace=any_ws))
    assert lines[0].startswith("sessions/t.log.jsonl#L2 [assistant run_tests · ")


def test_list_and_history_read_the_logs(any_ws: Workspace) -> None:
    log(any_ws, "a", "Plan the Lisbon move.", "Sure.", "Book the van.", "Booked.")
    log(any_ws, "b", "Fix the flaky test.", "Done.")
    listed = session_list(workspace=any_ws).split("\n")
    assert listed[0] == "2 sessions (most recently active first):"
    assert listed[1].startswith("b (") and listed[1].endswith("2 messages): Fix the flaky test.")
    assert listed[2].startswith("a (") and "4 messages): Plan the Lisbon move." in listed[2]

    last = session_history("a", 2, workspace=any_ws).split("\n")
    assert last[0].startswith("sessions/a.log.jsonl (messages on lines 3-4; 4 messages")
    assert last[1].startswith("3|[user @ ") and last[1].endswith("] Book the van.")
    assert last[2].startswith("4|[assistant @ ") and len(last) == 3
    part = session_history("a", 1, start=2, workspace=any_ws).split("\n")
    assert part[1].endswith("] Sure.")
    assert part[-1] == '... 2 later messages; call session_history(session_id="a", start=3)'
    cited = session_history("sessions/a.log.jsonl#L2-L3", workspace=any_ws).split("\n")
    assert [line.split("]", 1)[1] for line in cited[1:3]] == [" Sure.", " Book the van."]
    assert session_history("nobody", workspace=any_ws).startswith(
        "Error: no messages are logged for session 'nobody'"
    )
    assert session_list(workspace=any_ws.namespaced("empty")).startswith("No past sessions")


def test_a_bad_line_is_skipped_and_keeps_its_number(any_ws: Workspace) -> None:
    log(any_ws, "s", "The first message.")
    any_ws.append_bytes("sessions/s.log.jsonl", b'{"v": 1, "type": "message", "msg": \n')
    any_ws.append_bytes("sessions/s.log.jsonl", b"\xff\xfe not text\n")
    log(any_ws, "s", "The gazebo paint is teal.")
    lines = hit_lines(session_search("gazebo paint", workspace=any_ws))
    assert lines[0].startswith("sessions/s.log.jsonl#L4 [user")
    assert "4|[user @ " in session_history("s", workspace=any_ws)


def test_a_log_that_kept_a_lone_surrogate_stays_searchable(any_ws: Workspace) -> None:
    # The log keeps what was said as it was said; the index cannot store a lone surrogate.
    log(any_ws, "s", "The zebra \ud800 crossing is closed.", "noted", "Tool \udfff names")
    found = session_search("zebra crossing", workspace=any_ws)
    assert hit_lines(found)[0].startswith("sessions/s.log.jsonl#L1 [user")
    assert "zebra \ufffd crossing" in found
    assert "s (" in session_list(workspace=any_ws) and "\ufffd" in session_list(workspace=any_ws)
    assert session_history("s", workspace=any_ws).count("\ud800") == 1


# -- kept in step with the logs -------------------------------------------------------------


class Reads:
    """Records the offsets the session index reads logs from."""

    def __init__(self, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offsets: list[tuple[str, int]] = []
        real = ws.read_from

        def spy(rel: str | os.PathLike[str], offset: int) -> bytes:
            self.offsets.append((str(rel), offset))
            return real(rel, offset)

        monkeypatch.setattr(ws, "read_from", spy)


def test_appends_are_indexed_incrementally(
    any_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(any_ws, monkeypatch)
    log(any_ws, "s", *DISTRACTORS)
    reads.offsets.clear()
    index = SessionIndex(any_ws)
    first = index.refresh()
    assert (first.logs_read, first.messages_indexed) == (1, len(DISTRACTORS))
    assert reads.offsets == [("sessions/s.log.jsonl", 0)]
    size = any_ws.stat("sessions/s.log.jsonl")
    assert size is not None

    reads.offsets.clear()
    unchanged = index.refresh()
    assert (unchanged.logs_unchanged, unchanged.logs_read) == (1, 0) and reads.offsets == []

    log(any_ws, "s", "The marmot mascot is called Pip.")
    reads.offsets.clear()  # the log's own read before its append
    again = index.refresh()
    assert (again.logs_read, again.logs_rebuilt, again.messages_indexed) == (1, 0, 1)
    [(rel, offset)] = reads.offsets
    assert rel == "sessions/s.log.jsonl" and size.size - 100 < offset <= size.size  # the end
    hits = search_sessions(index, "marmot mascot", limit=3)
    assert [(h.line, h.role) for h in hits] == [(len(DISTRACTORS) + 1, "user")]
    assert search_sessions(index, "spare keys front desk", limit=1)[0].line == 6
    index.close()


def test_a_replaced_log_is_indexed_again_and_a_removed_one_dropped(any_ws: Workspace) -> None:
    log(any_ws, "s", "The old plan was the red barn.", "Fine.")
    log(any_ws, "t", "The red barn is for the other team.")
    index = SessionIndex(any_ws)
    index.refresh()
    assert {h.session_id for h in search_sessions(index, "red barn")} == {"s", "t"}

    replaced = Msg.user("The new plan is the blue silo.")
    record = {"v": 1, "type": "message", "session": "s", "msg": replaced.to_dict()}
    any_ws.write_bytes("sessions/s.log.jsonl", (json.dumps(record) + "\n").encode())
    stats = index.refresh()
    assert (stats.logs_read, stats.logs_rebuilt, stats.messages_indexed) == (1, 1, 1)
    assert [h.session_id for h in search_sessions(index, "red barn")] == ["t"]
    assert [(h.session_id, h.line) for h in search_sessions(index, "blue silo")] == [("s", 1)]

    any_ws.delete("sessions/t.log.jsonl")
    assert index.refresh().logs_removed == 1
    assert search_sessions(index, "red barn") == []
    assert [s.session_id for s in index.sessions()] == ["s"]
    index.close()


def test_a_log_truncated_in_place_is_indexed_again(ws: Workspace) -> None:
    log(ws, "s", "The quokka fact.", "The wombat fact.")
    index = SessionIndex(ws)
    index.refresh()
    path = ws.root / "sessions" / "s.log.jsonl"
    first_line = path.read_bytes().split(b"\n")[0] + b"\n"
    os.truncate(path, len(first_line))  # same file, shorter
    assert index.refresh().logs_rebuilt == 1
    assert search_sessions(index, "wombat") == []
    assert [h.line for h in search_sessions(index, "quokka")] == [1]
    index.close()


def test_a_damaged_index_is_rebuilt_from_the_logs(ws: Workspace) -> None:
    log(ws, "s", "The heron nests by the lake.")
    assert "heron" in session_search("heron", workspace=ws)
    close_session_indexes()
    db = ws.index_dir / "sessions_index.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.warns(RuntimeWarning, match="built again from the logs"):
        out = session_search("heron", workspace=ws)
    assert hit_lines(out)[0].startswith("sessions/s.log.jsonl#L1")
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM session_logs").fetchone() == (1,)


# -- what a model or a caller may not do ------------------------------------------------------

HOSTILE_IDS: list[Any] = [
    "../etc/passwd",
    "/etc/passwd",
    "a/b",
    ".hidden",
    "s1\x00",
    "x" * 300,
    "sessions/../../etc/passwd.log.jsonl",
    "sessions/../x.log.jsonl#L1",
    42,
    ["s1"],
]


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_session_ids_are_refused_in_one_line(ws: Workspace, bad: Any) -> None:
    log(ws, "s1", "The harmless message.")
    for out in (
        session_search("harmless", session_id=bad, workspace=ws),
        session_history(bad, workspace=ws),
    ):
        assert out.startswith("Error: ") and "\n" not in out, out


def test_a_log_linked_from_outside_is_never_read(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = Msg.user("The vault phrase is ZEPHYR-SECRET.")
    record = {"v": 1, "type": "message", "session": "evil", "msg": secret.to_dict()}
    (outside / "evil.log.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    (ws.root / "sessions" / "evil.log.jsonl").symlink_to(outside / "evil.log.jsonl")
    log(ws, "fine", "The vault is in the basement.")
    out = session_search("vault phrase", workspace=ws)
    assert "ZEPHYR" not in out and hit_lines(out)[0].startswith("sessions/fine.log.jsonl#L1")
    assert session_history("evil", workspace=ws).startswith("Error: ")


def test_sessions_of_another_namespace_never_appear(any_ws: Workspace) -> None:
    alice = any_ws.namespaced("alice")
    log(alice, "s1", "Alice's locker combination is 1234-OTTER.")
    log(any_ws.namespaced("bob"), "s1", "Bob likes otters.")
    assert "1234-OTTER" in session_search("locker combination", workspace=alice)
    found = session_search("locker combination", workspace=any_ws, namespace="alice")
    assert "1234-OTTER" in found
    for other in (any_ws.namespaced("bob"), any_ws):
        assert "1234-OTTER" not in session_search("locker combination otter", workspace=other)
        assert "Alice" not in session_list(workspace=other)
        assert "1234-OTTER" not in session_history("s1", workspace=other)


# -- the tools as the agent, the MCP server and the CLI offer them ----------------------------


def test_call_tool_and_the_agent_offer_the_session_tools(ws: Workspace) -> None:
    log(ws, "s1", "The lighthouse lamp was replaced in 2019.")
    out = call_tool("session_search", {"query": "lighthouse lamp"}, workspace=ws)
    assert hit_lines(out)[0].startswith("sessions/s1.log.jsonl#L1")
    assert call_tool("session_list", None, workspace=ws).startswith("1 session ")
    model = FunctionModel(lambda call: "ok")
    agent = HarnessAgent(model=model, workspace=ws, memory_flush=False, maintenance=None)
    agent.call_sync("hello")
    agent.close_sync()
    offered = {tool.name for tool in model.calls[0].tools or []}
    assert {"session_search", "session_list", "session_history"} <= offered
    assert "session_search" in (model.calls[0].system or "")


mcp = pytest.importorskip("mcp")
Client = getattr(mcp, "Client", None)


@pytest.mark.skipif(Client is None, reason="these tests use the mcp v2 Client")
async def test_the_mcp_server_serves_the_session_tools(ws: Workspace) -> None:
    from memdir.mcp import create_server

    log(ws, "s1", "The kiln reaches 1280 degrees.", "Noted.")
    assert Client is not None
    with anyio.fail_after(60):
        async with Client(create_server(ws, read_only=True)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            found = await client.call_tool("session_search", {"query": "kiln degrees"})
            read = await client.call_tool(
                "session_history", {"session_id": "sessions/s1.log.jsonl#L1"}
            )
            listed = await client.call_tool("session_list", {})
            bad = await client.call_tool("session_history", {"session_id": "../../etc/passwd"})
    assert {"session_search", "session_list", "session_history"} <= names
    assert not found.is_error
    assert found.content[0].text.split("\n")[1].startswith("sessions/s1.log.jsonl#L1 [user")
    assert "1|[user @ " in read.content[0].text and "1280 degrees" in read.content[0].text
    assert listed.content[0].text.startswith("1 session ")
    assert bad.is_error and "invalid session id" in bad.content[0].text


@pytest.mark.skipif(Client is None, reason="these tests use the mcp v2 Client")
async def test_memdir_mcp_over_stdio_searches_sessions(ws: Workspace) -> None:
    from mcp.client.stdio import StdioServerParameters

    log(ws, "s1", "The kiln reaches 1280 degrees.")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memdir", "-w", str(ws.root), "mcp"],
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert Client is not None
    with anyio.fail_after(60):
        async with Client(params, read_timeout_seconds=60) as client:
            found = await client.call_tool("session_search", {"query": "kiln"})
    assert "sessions/s1.log.jsonl#L1" in found.content[0].text


def test_cli_sessions_search_list_show(ws: Workspace) -> None:
    log(ws, "s1", "Plan the kiln firing.", "The kiln reaches 1280 degrees.", "Thanks.")
    log(ws, "s2", "The kiln in the other studio is electric.")

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["-w", str(ws.root), "sessions", *args])

    found = run("search", "kiln degrees", "-k", "1")
    assert found.exit_code == 0, found.output
    assert found.stdout.startswith("sessions/s1.log.jsonl#L2 [assistant · ")
    assert found.stdout.count("\n") == 1 and "1 result" in found.stderr
    only = run("search", "kiln", "--session", "s2", "--json")
    assert [h["citation"] for h in json.loads(only.stdout)] == ["sessions/s2.log.jsonl#L1"]
    listed = run("list")
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["s2", "s1"]
    assert json.loads(run("list", "--json").stdout)[1]["messages"] == 3
    shown = run("show", "s1", "--last", "1")
    assert shown.stdout.startswith("3|[user @ ") and shown.stdout.count("\n") == 1
    more = run("show", "s1", "--start", "1", "--last", "1")
    assert "2 later messages; memdir sessions show s1 --start 2" in more.stderr  # not a tool call
    start = run("show", "s1", "--start", "2", "--last", "1", "--json")
    assert [r["line"] for r in json.loads(start.stdout)] == [2]
    cited = run("show", "sessions/s1.log.jsonl#L2")
    assert cited.stdout.startswith("2|[assistant @ ") and cited.stdout.count("\n") == 1
    bad = run("show", "../etc/passwd")
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: invalid session id")
    none = run("search", "zebra")
    assert none.exit_code == 0 and none.stdout == ""
