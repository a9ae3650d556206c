"""Failure injection: a failing summariser or session log never costs the conversation."""

from __future__ import annotations

import asyncio
import errno
import shutil
from typing import Any

import pytest

from memdir.compaction import (
    ClearToolResultsConfig,
    CompactionConfig,
    CompactionEvent,
    ConversationCompactor,
)
from memdir.errors import ConfigError, ModelError, SessionLogError
from memdir.messages import SUMMARY_NAME, MessageFormatError, Msg, ToolUseBlock
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.workspace import Workspace

FILLER = "we discussed the retry policy of the upload worker in some detail " * 3


def chat(n: int) -> list[Msg]:
    return [
        Msg.user(f"Q{i} {FILLER}") if i % 2 == 0 else Msg.assistant(f"A{i} {FILLER}")
        for i in range(n)
    ]


def config(**kw: Any) -> CompactionConfig:
    base: dict[str, Any] = {
        "trigger_messages": 10,
        "trigger_tokens": 0,
        "keep_messages": 4,
        "summary_retries": 0,
    }
    base.update(kw)
    return CompactionConfig(**base)


def compactor(ws: Workspace, model: Any, **kw: Any) -> tuple[ConversationCompactor, list[Any]]:
    comp = ConversationCompactor(model, ws, config(**kw))
    events: list[CompactionEvent] = []
    comp.add_listener(events.append)
    return comp, events


async def never_answers(call: ModelCall) -> str:
    await asyncio.sleep(30)
    return "late"


@pytest.mark.parametrize(
    ("model", "kw", "why"),
    [
        (ScriptedModel([ModelError("HTTP 503", status_code=503)]), {}, "ModelError"),
        (ScriptedModel([RuntimeError("connection reset")]), {}, "connection reset"),
        (ScriptedModel(["   \n"]), {}, "empty answer"),
        (FunctionModel(never_answers), {"summary_timeout": 0.05}, "made no progress for 0.05 s"),
    ],
    ids=["provider-error", "crash", "blank", "timeout"],
)
async def test_summary_failure_leaves_the_context_unchanged(
    ws: Workspace, model: Any, kw: dict[str, Any], why: str
) -> None:
    msgs = chat(12)
    snapshot = list(msgs)
    comp, events = compactor(ws, model, **kw)
    assert await comp.compact_if_needed(msgs, session_id="s1") is None
    assert msgs == snapshot
    assert [e.kind for e in events] == ["compaction.started", "compaction.failed"]
    assert why in events[1].reason
    assert events[1].messages_after == 12
    # the offload happened first, so a later attempt has nothing left to lose
    assert [r.msg.id for r in SessionLog(ws, "s1").read().records] == [m.id for m in msgs[:8]]


async def test_retry_after_a_transient_failure_succeeds(ws: Workspace) -> None:
    model = ScriptedModel([ModelError("HTTP 502", status_code=502), "## SUMMARY\nrecovered"])
    comp, events = compactor(ws, model, summary_retries=1)
    res = await comp.compact_if_needed(chat(12), session_id="s1")
    assert res is not None and "recovered" in res.summary
    assert events[-1].kind == "compaction.completed"
    model.assert_complete()


async def test_repeated_compaction_after_a_failure_logs_each_message_once(ws: Workspace) -> None:
    msgs = chat(12)
    comp, _ = compactor(ws, ScriptedModel([RuntimeError("down"), "## SUMMARY\nok"]))
    assert await comp.compact_if_needed(msgs, session_id="s1") is None
    assert await comp.compact_if_needed(msgs, session_id="s1") is not None
    ids = [r.msg.id for r in SessionLog(ws, "s1").read().records]
    assert ids == [m.id for m in msgs[:8]]


async def test_summary_failure_over_the_hard_limit_uses_the_extractive_summary(
    ws: Workspace,
) -> None:
    model = ScriptedModel([RuntimeError("provider down")], context_window=4_000)
    comp, events = compactor(
        ws, model, trigger_messages=0, trigger_tokens=0, reserve_tokens=1_000, keep_messages=2
    )
    msgs = [
        Msg.user("Deploy the service to staging-eu-3 and keep the rollback script at ops/rb.sh"),
        *chat(120),
    ]
    assert comp.measure(msgs)[1] >= 3_000
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.stages == ("extractive_summary",)
    assert res.reason == "hard_limit" and res.messages[0].name == SUMMARY_NAME
    assert "## SESSION INTENT" in res.summary
    assert events[-1].kind == "compaction.completed" and events[-1].model == "extractive"


@pytest.mark.parametrize(
    "error",
    [
        SessionLogError("cannot write session log: No space left on device"),
        OSError(errno.ENOSPC, "No space left on device"),
        PermissionError(errno.EACCES, "Permission denied"),
    ],
    ids=["disk-full", "oserror", "permission"],
)
async def test_log_write_failure_changes_nothing_and_skips_the_model(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def refuse(self: SessionLog, msgs: Any, *, fsync: bool = True) -> None:
        raise error

    monkeypatch.setattr(SessionLog, "append", refuse)
    model = ScriptedModel([])
    comp, events = compactor(ws, model)
    msgs = chat(12)
    assert await comp.compact_if_needed(msgs, session_id="s1") is None
    assert model.calls == []
    assert events[-1].kind == "compaction.failed"
    assert "session log could not be written" in events[-1].reason


async def test_unwritable_sessions_directory_changes_nothing(ws: Workspace) -> None:
    # A real failure, independent of privileges: the sessions directory is a file.
    shutil.rmtree(ws.root / "sessions")
    (ws.root / "sessions").write_text("not a directory")
    model = ScriptedModel([])
    comp, events = compactor(ws, model)
    assert await comp.compact_if_needed(chat(12), session_id="s1") is None
    assert model.calls == [] and events[-1].kind == "compaction.failed"
    assert (ws.root / "sessions").read_text() == "not a directory"


async def test_cheap_pass_result_is_kept_when_the_summary_fails(ws: Workspace) -> None:
    big = "x = compute()\n" * 800
    msgs: list[Msg] = [
        Msg.user("profile the job"),
        Msg.assistant(tool_calls=[ToolUseBlock(id="t0", name="bash", input={"cmd": "run"})]),
        Msg.tool_result("t0", big, name="bash"),
        *chat(12),
    ]
    comp, events = compactor(
        ws,
        ScriptedModel([RuntimeError("down")]),
        clear_tool_results=ClearToolResultsConfig(keep_results=0),
    )
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    assert res.stages == ("clear_tool_results",) and res.summary == "" and res.cut_index is None
    assert len(res.messages) == len(msgs)
    assert "characters cleared" in res.messages[2].tool_results[0].text
    assert res.messages[3:] == msgs[3:]
    assert events[-1].kind == "compaction.failed"


async def test_cancellation_propagates(ws: Workspace) -> None:
    comp, _ = compactor(ws, ScriptedModel([asyncio.CancelledError()]))
    with pytest.raises(asyncio.CancelledError):
        await comp.compact_if_needed(chat(12), session_id="s1")


async def test_bad_session_id_is_a_clear_error(ws: Workspace) -> None:
    comp, _ = compactor(ws, ScriptedModel([]))
    with pytest.raises(SessionLogError):
        await comp.compact_if_needed(chat(2), session_id="../escape")


@pytest.mark.parametrize(
    "messages",
    [None, "hello", Msg.user("one message"), [{"role": "user", "content": "hi"}]],
    ids=["none", "string", "single-message", "dicts"],
)
async def test_anything_but_a_list_of_messages_is_a_clear_error(
    ws: Workspace, messages: Any
) -> None:
    comp, _ = compactor(ws, ScriptedModel([]))
    with pytest.raises(MessageFormatError, match=r"takes a list|not a Msg"):
        await comp.compact_if_needed(messages, session_id="s1", force=True)
    with pytest.raises(MessageFormatError):
        comp.plan(messages)
    with pytest.raises(ConfigError, match="keep_messages"):
        await comp.compact_if_needed(chat(12), session_id="s1", keep_messages=True)


def test_wrong_hooks_are_config_errors(ws: Workspace) -> None:
    with pytest.raises(ConfigError, match="on_flush"):
        ConversationCompactor(ScriptedModel([]), ws, on_flush="flush")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="token_counter"):
        ConversationCompactor(ScriptedModel([]), ws, token_counter=len)  # type: ignore[arg-type]


async def test_cancelled_flush_propagates_and_nothing_is_offloaded(ws: Workspace) -> None:
    async def cancelled(msgs: list[Msg], *, session_id: str) -> None:
        raise asyncio.CancelledError

    model = ScriptedModel([])
    comp = ConversationCompactor(model, ws, config(), on_flush=cancelled)
    with pytest.raises(asyncio.CancelledError):
        await comp.compact_if_needed(chat(12), session_id="s1")
    assert model.calls == [] and not (ws.root / "sessions" / "s1.log.jsonl").exists()


async def test_cancelling_one_session_does_not_stop_another(ws: Workspace) -> None:
    started = asyncio.Event()

    async def slow(call: ModelCall) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    stuck = ConversationCompactor(FunctionModel(slow), ws, config())
    fine = ConversationCompactor(ScriptedModel(["## SUMMARY\nfine"]), ws, config())
    task = asyncio.create_task(stuck.compact_if_needed(chat(12), session_id="a"))
    await started.wait()
    other = asyncio.create_task(fine.compact_if_needed(chat(12), session_id="b"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    res = await other
    assert res is not None and "fine" in res.summary


async def test_summariser_overflow_halves_the_slices(ws: Workspace) -> None:
    def small_window(call: ModelCall) -> str:
        if len(call.last_user_text) > 5_000:
            raise ModelError(
                "HTTP 400",
                status_code=400,
                body={"error": {"code": "context_length_exceeded", "message": "too long"}},
            )
        return "## SUMMARY\npart"

    model = FunctionModel(small_window)  # its window is unknown: no slicing until it overflows
    comp, _ = compactor(ws, model, trigger_messages=30, keep_messages=4)
    res = await comp.compact_if_needed(chat(40), session_id="s1")
    assert res is not None and "part" in res.summary
    assert len(model.calls) > 2
    summarised = {
        d["id"]
        for c in model.calls
        if len(c.last_user_text) <= 5_000
        for d in c.messages[-1].metadata["memdir.messages"]
        if d.get("name") != SUMMARY_NAME
    }
    assert len(summarised) == 36  # every summarised message went through a successful call


async def test_forced_compaction_falls_back_to_the_extractive_summary(ws: Workspace) -> None:
    comp, events = compactor(ws, ScriptedModel([ModelError("HTTP 500", status_code=500)]))
    msgs = chat(20)
    res = await comp.compact_if_needed(msgs, session_id="s1", force=True, keep_messages=2)
    assert res is not None and res.stages == ("extractive_summary",)
    assert res.messages[0].name == SUMMARY_NAME and res.messages[1:] == msgs[-2:]
    assert "## SUMMARY" in res.summary and events[-1].kind == "compaction.completed"
