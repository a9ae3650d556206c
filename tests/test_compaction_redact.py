"""Secrets never reach the session log through compaction; the live context is not changed."""

from __future__ import annotations

from typing import Any

import pytest

from memdir.compaction import (
    SUMMARY_SECTIONS,
    ClearToolResultsConfig,
    CompactionConfig,
    ConversationCompactor,
)
from memdir.errors import ConfigError
from memdir.messages import Msg, ToolUseBlock
from memdir.redact import RedactionPattern, Redactor
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
PASSWORD = "hunter2hunter2"
ACME = "acme_" + "0123456789abcdef" * 2


def summariser() -> FunctionModel:
    return FunctionModel(lambda call: "\n\n".join(f"{h}\nok" for h in SUMMARY_SECTIONS))


def conversation() -> list[Msg]:
    """A prefix holding secrets in a user text, tool arguments and a tool output."""
    call = ToolUseBlock(
        id="c1", name="shell", input={"command": f"deploy --password={PASSWORD}", "env": [ACME]}
    )
    msgs = [
        Msg.user(f"my key is {KEY}, please deploy"),
        Msg.assistant("deploying", tool_calls=[call]),
        Msg.tool_result("c1", f"Authorization: Bearer {KEY}\nexport OPENAI_API_KEY={KEY}"),
        Msg.assistant("done"),
    ]
    for i in range(8):
        msgs.append(Msg.user(f"question {i}") if i % 2 == 0 else Msg.assistant(f"answer {i}"))
    return msgs


def cfg(**kw: Any) -> CompactionConfig:
    return CompactionConfig(trigger_messages=10, trigger_tokens=0, keep_messages=4, **kw)


def log_text(ws: Workspace) -> str:
    return (ws.root / "sessions" / "s1.log.jsonl").read_text(encoding="utf-8")


async def test_secrets_are_masked_in_the_session_log_by_default(ws: Workspace) -> None:
    msgs = conversation()
    comp = ConversationCompactor(summariser(), ws, cfg())
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.stages == ("summary",)
    text = log_text(ws)
    assert KEY not in text and PASSWORD not in text
    assert "[REDACTED:" in text
    # Masking keeps ids, order and line numbers: the summary still points at the right lines.
    span = res.log_span
    assert span is not None
    back = comp.session_log("s1").messages(span.start_line, span.end_line)
    assert [m.id for m in back] == [m.id for m in msgs[: len(back)]]
    assert "please deploy" in back[0].text and KEY not in back[0].text
    # The live conversation is not altered by what was written to disk.
    assert res.messages[-4:] == msgs[-4:]


async def test_cleared_tool_results_are_masked_in_the_log_too(ws: Workspace) -> None:
    big = f"token={KEY}\n" + "log line\n" * 400
    msgs: list[Msg] = [Msg.user("run it")]
    for i in range(3):
        msgs.append(Msg.assistant(tool_calls=[ToolUseBlock(id=f"c{i}", name="run", input={})]))
        msgs.append(Msg.tool_result(f"c{i}", big, name="run"))
    msgs.append(Msg.assistant("done"))
    config = CompactionConfig(
        trigger_messages=0,
        trigger_tokens=2_000,
        keep_messages=1,
        clear_tool_results=ClearToolResultsConfig(keep_results=0),
    )
    res = await ConversationCompactor(summariser(), ws, config).compact_if_needed(
        msgs, session_id="s1"
    )
    assert res is not None and "clear_tool_results" in res.stages
    assert KEY not in log_text(ws)


async def test_redaction_can_be_customised_or_turned_off(ws: Workspace, tmp_path: Any) -> None:
    custom = Redactor(extra=[RedactionPattern(name="acme", regex=r"acme_[0-9a-f]{32}")])
    res = await ConversationCompactor(summariser(), ws, cfg(redactor=custom)).compact_if_needed(
        conversation(), session_id="s1"
    )
    assert res is not None
    text = log_text(ws)
    assert ACME not in text and "[REDACTED:acme]" in text and KEY not in text

    raw = Workspace(tmp_path / "raw", tz="UTC", clock=ws.now)
    res = await ConversationCompactor(summariser(), raw, cfg(redactor=None)).compact_if_needed(
        conversation(), session_id="s1"
    )
    assert res is not None
    assert KEY in log_text(raw) and PASSWORD in log_text(raw)


def test_a_redactor_that_is_not_callable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="redactor"):
        CompactionConfig(redactor="mask")  # type: ignore[arg-type]
