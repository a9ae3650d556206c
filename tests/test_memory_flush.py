"""Flush: new facts reach today's ledger exactly once, deduplicated, redacted, never on failure."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memdir.errors import ConfigError, MemdirError, ModelError
from memdir.memory import FlushResult, MemoryFlushManager
from memdir.messages import SUMMARY_NAME, MessageFormatError, Msg, ToolUseBlock
from memdir.models import KNOWN_KEY, MESSAGES_KEY, TASK_KEY, ExtractiveModel
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.workspace import Workspace

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def conversation(n: int, *, start: int = 0) -> list[Msg]:
    out = []
    for i in range(start, start + n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append(Msg(role=role, content=f"message {i}", created_at=T0 + timedelta(seconds=i)))
    return out


def ledger(ws: Workspace) -> str:
    return ws.read_text(ws.ledger_rel())


def ledger_bullets(ws: Workspace) -> list[str]:
    return [ln[2:] for ln in ledger(ws).splitlines() if ln.startswith("- ")]


def echo_model() -> FunctionModel:
    """Answers one bullet per extracted user message: ``- fact <text>``."""

    def reply(call: ModelCall) -> str:
        msgs = [Msg.from_dict(d) for d in call.messages[-1].metadata[MESSAGES_KEY]]
        facts = [f"- fact {m.text}" for m in msgs if m.role == "user"]
        return "\n".join(facts) or "NO_REPLY"

    return FunctionModel(reply)


async def test_flush_appends_one_block_and_reports_its_lines(ws: Workspace) -> None:
    model = ScriptedModel(["- Alice prefers green tea\n- Project X ships on 2026-12-15"])
    result = await MemoryFlushManager(ws, model).flush_memories(conversation(4), session_id="s1")
    assert result.bullets == ("Alice prefers green tea", "Project X ships on 2026-12-15")
    assert result.path == "memory/2026-11-30.md"
    assert result.skipped is None and result.messages_flushed == 4
    lines = ledger(ws).splitlines()
    assert lines[result.start_line - 2] == "## Memory Flush — 2026-11-30T09:00:00Z"
    assert lines[result.start_line - 1 : result.end_line] == [
        "- Alice prefers green tea",
        "- Project X ships on 2026-12-15",
    ]
    model.assert_complete()


async def test_same_messages_are_never_extracted_twice(ws: Workspace) -> None:
    model = echo_model()
    manager = MemoryFlushManager(ws, model)
    msgs = conversation(4)
    await manager.flush_memories(msgs, session_id="s1")
    again = await manager.flush_memories(msgs, session_id="s1")
    assert again.skipped == "no_new_messages"
    assert len(model.calls) == 1
    # A new process (new manager) resumes from the persisted cursor.
    msgs += conversation(2, start=4)
    third = await MemoryFlushManager(ws, model).flush_memories(msgs, session_id="s1")
    assert third.bullets == ("fact message 4",)
    sent = [Msg.from_dict(d).text for d in model.calls[-1].messages[-1].metadata[MESSAGES_KEY]]
    assert sent == ["message 4", "message 5"]
    assert ledger_bullets(ws) == ["fact message 0", "fact message 2", "fact message 4"]


async def test_prefix_flushed_before_compaction_is_not_flushed_again_after(ws: Workspace) -> None:
    model = echo_model()
    manager = MemoryFlushManager(ws, model)
    msgs = conversation(10)
    await manager.flush_memories(msgs[:6], session_id="s1")  # the compaction prefix
    summary = Msg(
        role="user", content="summary of 0-5", name=SUMMARY_NAME, created_at=T0 + timedelta(hours=1)
    )
    compacted = [summary, *msgs[6:]]
    result = await manager.flush_memories(compacted, session_id="s1")
    assert result.bullets == ("fact message 6", "fact message 8")
    sent = model.calls[-1].messages[-1].metadata[MESSAGES_KEY]
    assert all(d.get("name") != SUMMARY_NAME for d in sent)
    assert "summary of 0-5" not in model.calls[-1].last_user_text
    assert len(ledger_bullets(ws)) == 5


async def test_a_clock_running_ahead_does_not_hide_later_messages(ws: Workspace) -> None:
    # One message was stamped an hour ahead (another host's clock, an imported transcript).
    # After compaction removed the last flushed message, the newer messages must still be
    # taken: a flushed message still in the context places them, not the clock.
    model = echo_model()
    manager = MemoryFlushManager(ws, model)
    request = Msg(role="user", content="message 0", created_at=T0)
    ahead = Msg(role="assistant", content="message 1", created_at=T0 + timedelta(hours=1))
    await manager.flush_memories([request, ahead], session_id="s1")
    later = conversation(2, start=2)  # stamped T0 + 2 s and T0 + 3 s
    summary = Msg(role="user", content="summary", name=SUMMARY_NAME, created_at=T0)
    result = await manager.flush_memories([summary, request, *later], session_id="s1")
    assert result.bullets == ("fact message 2",)
    assert ledger_bullets(ws) == ["fact message 0", "fact message 2"]


async def test_one_huge_message_does_not_make_a_request_no_model_can_take(
    ws: Workspace,
) -> None:
    # A pasted 2 MB log would be sent whole on every flush, fail the same way every time, and
    # keep every later message of the session from memory.
    model = ScriptedModel(["- The deploy log of 2026-11-30 ends with OOM"])
    huge = Msg.user("here is the log:\n" + "line of the deploy log\n" * 100_000 + "OOM at the end")
    manager = MemoryFlushManager(ws, model, max_input_chars=20_000)
    result = await manager.flush_memories([huge], session_id="s1")
    assert result.written
    sent = model.calls[0].last_user_text
    assert len(sent) < 30_000
    assert "here is the log" in sent and "OOM at the end" in sent  # head and tail kept


async def test_flush_plugs_into_the_compactor_hook_signature(ws: Workspace) -> None:
    manager = MemoryFlushManager(ws, echo_model())
    hook = manager.flush_memories
    result = await hook(conversation(2), session_id="s1")
    assert result.bullets == ("fact message 0",)
    fixed = manager.compaction_hook("s2")
    assert (await fixed(conversation(2), session_id="ignored")).bullets == ()  # known already


async def test_rendering_drops_system_and_summaries_and_compacts_tool_calls(ws: Workspace) -> None:
    model = ScriptedModel(["NO_REPLY"])
    args = {"path": "src/app.py", "text": "x" * 5000}
    call = ToolUseBlock(id="c1", name="write_file", input=args)
    msgs = [
        Msg.system("you are a bot"),
        Msg.user("summary", name=SUMMARY_NAME),
        Msg.user("please fix src/app.py"),
        Msg.assistant("on it", tool_calls=[call]),
        Msg.tool_result("c1", "y" * 10_000 + "ERROR at the end", name="write_file"),
    ]
    await MemoryFlushManager(ws, model).flush_memories(msgs, session_id="s1")
    prompt = model.calls[0].last_user_text
    assert "you are a bot" not in prompt and "summary" not in prompt.split("<conversation>")[1]
    assert "please fix src/app.py" in prompt
    assert '[tool call write_file id=c1] {"path": "src/app.py"' in prompt
    assert "ERROR at the end" in prompt  # the tail of a clipped result survives
    assert len(prompt) < 4_000
    assert model.calls[0].messages[-1].metadata[TASK_KEY] == "flush"


async def test_known_memory_is_sent_as_do_not_restate(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "# Memory\n- Bob uses vim\n")
    model = ScriptedModel(["NO_REPLY"])
    await MemoryFlushManager(ws, model).flush_memories(conversation(2), session_id="s1")
    request = model.calls[0].messages[-1]
    assert "Bob uses vim" in request.metadata[KNOWN_KEY]
    assert "Already known — do not restate" in request.text


@pytest.mark.parametrize(
    "answer",
    ["NO_REPLY", "NO_REPLY.", "`NO_REPLY`", "```\nNO_REPLY\n```", "- NO_REPLY", "- (none)", "None"],
)
async def test_nothing_new_writes_nothing_and_moves_the_cursor(ws: Workspace, answer: str) -> None:
    model = ScriptedModel([answer])
    manager = MemoryFlushManager(ws, model)
    msgs = conversation(2)
    result = await manager.flush_memories(msgs, session_id="s1")
    assert result.skipped == "no_reply" and not result.written
    assert not (ws.root / ws.ledger_rel()).exists()
    assert (await manager.flush_memories(msgs, session_id="s1")).skipped == "no_new_messages"


async def test_known_and_repeated_bullets_are_dropped(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "# Memory\n\n## People\n- Alice prefers green tea\n")
    ws.append_text(ws.ledger_rel(), "\n## Memory Add — x\n- The build uses uv\n")
    answer = (
        "Here you go:\n- alice prefers green tea.\n- The build uses  UV\n"
        "- Carol joined on 2026-11-29\n* Carol joined on 2026-11-29"
    )
    result = await MemoryFlushManager(ws, ScriptedModel([answer])).flush_memories(
        conversation(2), session_id="s1"
    )
    assert result.bullets == ("Carol joined on 2026-11-29",)
    assert result.duplicates_dropped == 3
    assert ledger_bullets(ws) == ["The build uses uv", "Carol joined on 2026-11-29"]


async def test_all_known_moves_the_cursor_without_writing(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "- Alice prefers green tea\n")
    manager = MemoryFlushManager(ws, ScriptedModel(["- Alice prefers green tea"]))
    result = await manager.flush_memories(conversation(2), session_id="s1")
    assert result.skipped == "all_known" and result.messages_flushed == 2
    assert not (ws.root / ws.ledger_rel()).exists()


async def test_a_lone_surrogate_in_the_answer_is_written_as_a_replacement_character(
    ws: Workspace,
) -> None:
    model = ScriptedModel(["- Alice likes \udce9t\u00e9"])
    result = await MemoryFlushManager(ws, model).flush_memories(conversation(2), session_id="s1")
    assert result.bullets == ("Alice likes \ufffdt\u00e9",)
    assert ledger_bullets(ws) == ["Alice likes \ufffdt\u00e9"]


async def test_secrets_are_masked_before_the_ledger(ws: Workspace) -> None:
    key = "sk-proj-" + "Q" * 30
    model = ScriptedModel([f"- The staging OpenAI key is {key}\n- DB password: hunter22"])
    result = await MemoryFlushManager(ws, model).flush_memories(conversation(2), session_id="s1")
    assert result.redacted == 2
    text = ledger(ws)
    assert key not in text and "hunter22" not in text
    assert "[REDACTED:openai_key]" in text
    # The transcript sent to the model is redacted too.
    msgs = [Msg.user(f"use {key}")]
    model2 = ScriptedModel(["NO_REPLY"])
    await MemoryFlushManager(ws, model2).flush_memories(msgs, session_id="s2")
    assert key not in model2.calls[0].last_user_text


def _slow(call: ModelCall) -> object:
    async def later() -> str:
        await asyncio.sleep(5)
        return "- too late"

    return later()


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (ModelError("provider down", status_code=503), "model_error"),
        (RuntimeError("boom"), "model_error"),
        ("", "blank_answer"),
        ("   \n", "blank_answer"),
        ("I think the user is nice and we talked a lot.", "unusable_answer"),
        ("- secret fact\n" * 6_000, "oversized_answer"),
    ],
)
async def test_model_failures_write_nothing_and_keep_the_messages(
    ws: Workspace, caplog: pytest.LogCaptureFixture, step: object, reason: str
) -> None:
    manager = MemoryFlushManager(ws, ScriptedModel([step]))  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await manager.flush_memories(conversation(2), session_id="s1")
    assert result.skipped == reason and not result.written and result.messages_flushed == 0
    assert not (ws.root / ws.ledger_rel()).exists()
    assert any("session s1" in r.getMessage() for r in caplog.records)
    assert all("secret fact" not in r.getMessage() for r in caplog.records)
    # Nothing lost: the next flush sends the same messages again.
    retry = ScriptedModel(["- recovered fact"])
    manager.model = retry
    assert (await manager.flush_memories(conversation(2), session_id="s1")).bullets == (
        "recovered fact",
    )
    assert [Msg.from_dict(d).text for d in retry.calls[0].messages[-1].metadata[MESSAGES_KEY]] == [
        "message 0",
        "message 1",
    ]


async def test_a_model_that_hangs_times_out(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    manager = MemoryFlushManager(ws, FunctionModel(_slow), timeout=0.05)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await manager.flush_memories(conversation(2), session_id="s1")
    assert result.skipped == "timeout"
    assert any("made no progress for 0.05 s" in r.getMessage() for r in caplog.records)
    assert not (ws.root / ws.ledger_rel()).exists()


class RecordingIndex:
    def __init__(self) -> None:
        self.files: list[str] = []

    def index_file(self, rel: str) -> int:
        self.files.append(rel)
        return 1


class RecordingScheduler:
    def __init__(self) -> None:
        self.requests = 0

    def request_consolidation(self) -> None:
        self.requests += 1


async def test_write_reindexes_only_the_ledger_and_nudges_the_scheduler(ws: Workspace) -> None:
    index, scheduler = RecordingIndex(), RecordingScheduler()
    manager = MemoryFlushManager(
        ws,
        ScriptedModel(["- a fact", "NO_REPLY"]),
        index=index,  # type: ignore[arg-type]
        scheduler=scheduler,
    )
    await manager.flush_memories(conversation(2), session_id="s1")
    await manager.flush_memories(conversation(4), session_id="s1")
    assert index.files == ["memory/2026-11-30.md"]
    assert scheduler.requests == 1


async def test_concurrent_flushes_of_one_session_extract_once(ws: Workspace) -> None:
    model = echo_model()
    msgs = conversation(6)
    managers = [MemoryFlushManager(ws, model) for _ in range(4)]
    results = await asyncio.gather(*(m.flush_memories(msgs, session_id="s1") for m in managers))
    assert sum(len(r.bullets) for r in results) == 3
    assert len(model.calls) == 1
    assert ledger_bullets(ws) == ["fact message 0", "fact message 2", "fact message 4"]


async def test_two_sessions_extracting_one_fact_write_it_once(ws: Workspace) -> None:
    model = FunctionModel(lambda call: "- The office moves to Berlin in March 2027")
    manager = MemoryFlushManager(ws, model)
    await asyncio.gather(
        manager.flush_memories(conversation(2), session_id="a"),
        manager.flush_memories(conversation(2), session_id="b"),
    )
    assert ledger_bullets(ws) == ["The office moves to Berlin in March 2027"]


async def test_long_input_is_sent_in_chunks(ws: Workspace) -> None:
    model = echo_model()
    manager = MemoryFlushManager(ws, model, max_input_chars=1_000)
    msgs = [
        Msg(role="user", content=f"note {i} " + "z" * 300, created_at=T0 + timedelta(seconds=i))
        for i in range(10)
    ]
    result = await manager.flush_memories(msgs, session_id="s1")
    assert len(model.calls) > 3
    assert len(result.bullets) == 10 and result.messages_flushed == 10
    assert result.start_line is not None and result.end_line is not None
    assert result.end_line > result.start_line


async def test_interrupted_append_is_completed_not_repeated(ws: Workspace) -> None:
    """A crash after the ledger append but before the cursor moved (state as left on disk)."""
    msgs = conversation(2)
    ws.append_text(ws.ledger_rel(), "\n## Memory Flush — 2026-11-30T08:59:00Z\n- fact message 0\n")
    cursor = {
        "version": 1,
        "session_id": "s1",
        "pending": {
            "rel": ws.ledger_rel(),
            "size": 0,
            "bullets": ["fact message 0"],
            "ids": [m.id for m in msgs],
            "last_created_at": msgs[-1].created_at.isoformat(),
        },
    }
    ws.write_text("memory/.flush_state/s1.json", json.dumps(cursor))
    model = echo_model()
    result = await MemoryFlushManager(ws, model).flush_memories(msgs, session_id="s1")
    assert result.skipped == "no_new_messages" and model.calls == []
    assert ledger_bullets(ws) == ["fact message 0"]


async def test_pending_append_that_never_landed_is_redone(ws: Workspace) -> None:
    msgs = conversation(2)
    cursor = {
        "version": 1,
        "session_id": "s1",
        "pending": {"rel": ws.ledger_rel(), "size": 0, "bullets": ["fact message 0"], "ids": []},
    }
    ws.write_text("memory/.flush_state/s1.json", json.dumps(cursor))
    result = await MemoryFlushManager(ws, echo_model()).flush_memories(msgs, session_id="s1")
    assert result.bullets == ("fact message 0",)
    assert ledger_bullets(ws) == ["fact message 0"]


async def test_damaged_cursor_starts_again_safely(ws: Workspace) -> None:
    ws.write_text("memory/.flush_state/s1.json", "{not json")
    manager = MemoryFlushManager(ws, echo_model())
    assert (await manager.flush_memories(conversation(2), session_id="s1")).written


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x" * 129, "..", "sp ace", ".hidden", None])
async def test_bad_session_ids_are_refused(ws: Workspace, bad: Any) -> None:
    # The same rule as the session log and the compactor: one id names all of a session.
    with pytest.raises(MemdirError, match="session id"):
        await MemoryFlushManager(ws, echo_model()).flush_memories([], session_id=bad)


async def test_the_longest_valid_session_id_can_flush(ws: Workspace) -> None:
    sid = "s" * 128
    result = await MemoryFlushManager(ws, echo_model()).flush_memories(
        conversation(2), session_id=sid
    )
    assert result.bullets == ("fact message 0",)


@pytest.mark.parametrize("messages", [None, "hello", Msg.user("one"), [{"role": "user"}]])
async def test_anything_but_a_list_of_messages_is_a_clear_error(
    ws: Workspace, messages: Any
) -> None:
    with pytest.raises(MessageFormatError):
        await MemoryFlushManager(ws, echo_model()).flush_memories(messages, session_id="s1")


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"model": None}, "ChatModel"),
        ({"timeout": "60"}, "timeout"),
        ({"lock_timeout": 0}, "lock_timeout"),
        ({"max_input_chars": 10}, "max_input_chars"),
        ({"prompt": "  "}, "prompt"),
        ({"redactor": "mask"}, "redactor"),
        ({"scheduler": object()}, "scheduler"),
    ],
)
def test_invalid_settings_are_one_line_config_errors(
    ws: Workspace, kw: dict[str, Any], name: str
) -> None:
    args: dict[str, Any] = {"model": echo_model(), **kw}
    with pytest.raises(ConfigError, match=name):
        MemoryFlushManager(ws, **args)


async def test_only_system_messages_need_no_model_call(ws: Workspace) -> None:
    model = ScriptedModel([])
    result = await MemoryFlushManager(ws, model).flush_memories(
        [Msg.system("rules")], session_id="s1"
    )
    assert result == FlushResult(skipped="nothing_to_extract", messages_flushed=1)


async def test_flushed_message_ids_names_what_was_extracted(ws: Workspace) -> None:
    from memdir.memory import flushed_message_ids

    assert flushed_message_ids(ws, "s1") == frozenset()
    msgs = [Msg.user("Remember that I prefer pytest over unittest.")]
    manager = MemoryFlushManager(ws, ExtractiveModel())
    await manager.flush_memories(msgs, session_id="s1")
    assert msgs[0].id in flushed_message_ids(ws, "s1")
    assert flushed_message_ids(ws, "other") == frozenset()
