"""The cheap passes: old tool-result clearing and argument truncation, as committed stages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memdir.compaction import (
    ClearToolResultsConfig,
    CompactionConfig,
    ConversationCompactor,
    TruncateArgsConfig,
)
from memdir.compaction._pairing import safe_cut
from memdir.compaction._passes import clear_candidates
from memdir.messages import Msg, ToolUseBlock
from memdir.sessions import SessionLog
from memdir.testing import ScriptedModel
from memdir.workspace import Workspace

BIG = "".join(f"line {i}: value={i * 7}\n" for i in range(600))  # ~10k characters
WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def tool_turn(i: int, output: str, name: str = "read_file") -> list[Msg]:
    return [
        Msg.assistant(
            tool_calls=[ToolUseBlock(id=f"c{i}", name=name, input={"path": f"src/f{i}.py"})],
            metadata={"turn": i},
            created_at=WHEN,
        ),
        Msg.tool_result(
            f"c{i}", output, name=name, metadata={"turn": i}, created_at=WHEN, id=f"r{i}"
        ),
    ]


def lines_by_id(ws: Workspace, sid: str = "s1") -> dict[str, int]:
    return {r.msg.id: r.line for r in SessionLog(ws, sid).read().records}


# -- clearing ------------------------------------------------------------------------------------


async def test_clearing_alone_is_committed_when_it_brings_the_request_under(
    ws: Workspace,
) -> None:
    msgs: list[Msg] = [Msg.user("inspect the project")]
    for i in range(6):
        msgs += tool_turn(i, BIG if i < 4 else "short")
    model = ScriptedModel([])  # no summary call may happen
    config = CompactionConfig(
        trigger_messages=0,
        trigger_tokens=8_000,
        keep_messages=4,
        clear_tool_results=ClearToolResultsConfig(keep_results=2),
    )
    comp = ConversationCompactor(model, ws, config)
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    assert res.stages == ("clear_tool_results",) and res.summary == "" and res.cut_index is None
    assert res.tokens_after < 8_000 < res.tokens_before
    assert len(res.messages) == len(msgs)
    model.assert_complete()
    lines = lines_by_id(ws)
    for before, after in zip(msgs, res.messages, strict=True):
        # ids, roles, names, timestamps and metadata are preserved
        assert (after.id, after.role, after.name, after.created_at, after.metadata) == (
            before.id,
            before.role,
            before.name,
            before.created_at,
            before.metadata,
        )
        if before.role == "tool" and before.tool_results[0].text == BIG:
            block = after.tool_results[0]
            assert block.tool_use_id == before.tool_results[0].tool_use_id
            assert len(block.text) < 600
            assert block.text.startswith("line 0: value=0")  # head
            assert block.text.rstrip().endswith("line 599: value=4193")  # tail
            assert f"sessions/s1.log.jsonl line {lines[before.id]}" in block.text
            # the original is in the log at that line, whole
            original = SessionLog(ws, "s1").messages(lines[before.id], lines[before.id])[0]
            assert original == before
        else:
            assert after == before
    # running again changes nothing more (the previews are recognised)
    again = await comp.compact_if_needed(res.messages, session_id="s1")
    assert again is None


async def test_newest_results_and_excluded_tools_are_not_cleared(ws: Workspace) -> None:
    msgs: list[Msg] = [Msg.user("go")]
    msgs += tool_turn(0, BIG, name="memory_get")
    msgs += tool_turn(1, BIG)
    msgs += tool_turn(2, BIG)
    clearing = ClearToolResultsConfig(keep_results=1)
    # r2 is the newest (kept), r0 comes from an excluded tool: only r1 is cleared
    assert clear_candidates(msgs, clearing) == [(4, 0)]
    config = CompactionConfig(
        trigger_messages=0, trigger_tokens=1_000, keep_messages=2, clear_tool_results=clearing
    )
    model = ScriptedModel(["## SESSION INTENT\nx\n## SUMMARY\nx\n## ARTIFACTS\nx\n## NEXT STEPS\n"])
    res = await ConversationCompactor(model, ws, config).compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.stages[0] == "clear_tool_results"
    results = {m.id: m.tool_results[0].text for m in res.messages if m.role == "tool"}
    assert results["r2"] == BIG  # newest kept whole
    # the summariser saw the original, not the preview
    prompt = model.calls[0].last_user_text
    assert "characters cleared" not in prompt


# -- argument truncation -------------------------------------------------------------------------


def write_turn(i: int, body: str) -> list[Msg]:
    call = ToolUseBlock(
        id=f"w{i}",
        name="write_file",
        input={"path": f"docs/p{i}.md", "content": body, "meta": {"notes": [body]}},
    )
    return [
        Msg.assistant(tool_calls=[call], id=f"a{i}", created_at=WHEN, metadata={"k": i}),
        Msg.tool_result(f"w{i}", "written", name="write_file"),
    ]


async def test_truncate_args_runs_on_its_own_trigger_and_keeps_a_useful_head(
    ws: Workspace,
) -> None:
    body = "".join(f"paragraph {i} of the design document.\n" for i in range(300))
    msgs: list[Msg] = [Msg.user("write the docs")]
    for i in range(4):
        msgs += write_turn(i, body)
    config = CompactionConfig(
        trigger_messages=0,
        trigger_tokens=0,
        keep_messages=2,
        truncate_args=TruncateArgsConfig(trigger_messages=5, keep_messages=2),
    )
    model = ScriptedModel([])
    comp = ConversationCompactor(model, ws, config)
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.stages == ("truncate_args",) and res.reason == "truncate_args"
    lines = lines_by_id(ws)
    for before, after in zip(msgs, res.messages, strict=True):
        assert (after.id, after.created_at, after.metadata) == (
            before.id,
            before.created_at,
            before.metadata,
        )
    old = res.messages[1].tool_uses[0].input
    assert old["path"] == "docs/p0.md"  # short arguments untouched
    content = old["content"]
    assert content.startswith(body[:500]) and "...(argument truncated)" in content
    assert f"{len(body):,} characters in all" in content
    assert f"sessions/s1.log.jsonl line {lines['a0']}" in content
    assert old["meta"]["notes"][0].startswith(body[:500])  # nested strings too
    assert len(content) < 800
    # the newest call (inside keep_messages) is untouched; the log has the original
    assert res.messages[-2] == msgs[-2]
    assert SessionLog(ws, "s1").messages(lines["a0"], lines["a0"])[0] == msgs[1]
    again = await comp.compact_if_needed(res.messages, session_id="s1")
    assert again is None  # idempotent
    model.assert_complete()


# -- safe cut (unit) -----------------------------------------------------------------------------


def test_safe_cut_moves_before_the_call_or_after_a_long_run() -> None:
    a = Msg.assistant(tool_calls=[ToolUseBlock(id=x, name="t", input={}) for x in ("a", "b", "c")])
    ra, rb, rc = (Msg.tool_result(x, "ok") for x in ("a", "b", "c"))
    msgs: list[Any] = [Msg.user("u"), a, ra, rb, rc, Msg.assistant("done")]
    assert safe_cut(msgs, 3) == 1  # between results: move before the assistant
    assert safe_cut(msgs, 5) == 5
    assert safe_cut(msgs, 0) == 0
    only = [a, ra, rb, rc]  # nothing safe before: the nearest safe cut after
    assert safe_cut(only, 2) == 4
