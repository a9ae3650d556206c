"""``memdir hook claude-code``: Claude Code's hook payloads on stdin, in a real subprocess.

PreCompact (and SessionEnd) ingest the transcript, exactly once per message; SessionStart prints
the budgeted MEMORY.md as additionalContext; anything else is ignored; bad input exits 1 (never
2, which would block Claude Code's compaction).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memdir.adapters.claude_code import handle_hook

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "examples" / "transcripts"
SESSION = "5b1e0c2a-9f4d-4c7e-8a36-2f0d7c1b9e44"


def run_hook(ws: Path, payload: Any, *args: str) -> subprocess.CompletedProcess[str]:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-m", "memdir", "-w", str(ws), "hook", "claude-code", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def pre_compact(transcript: Path, trigger: str = "auto") -> dict[str, Any]:
    # The PreCompact input of Claude Code's hooks reference.
    return {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": "/home/jing/src/lumen-shop",
        "permission_mode": "default",
        "hook_event_name": "PreCompact",
        "trigger": trigger,
        "custom_instructions": "",
    }


def session_start(source: str) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": "/home/jing/.claude/projects/lumen-shop/x.jsonl",
        "cwd": "/home/jing/src/lumen-shop",
        "hook_event_name": "SessionStart",
        "source": source,
        "model": "claude-sonnet-4-5",
    }


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "project" / f"{SESSION}.jsonl"
    path.parent.mkdir()
    shutil.copy(TRANSCRIPTS / "coupon-api.claude-code.jsonl", path)
    return path


def snapshot(ws: Path) -> dict[str, str]:
    files = [*ws.glob("sessions/*.jsonl"), *ws.glob("memory/*.md"), ws / "MEMORY.md"]
    return {str(p.relative_to(ws)): p.read_text() for p in files if p.is_file()}


def log_ids(ws: Path) -> list[str]:
    lines = (ws / "sessions" / f"{SESSION}.log.jsonl").read_text().splitlines()
    return [json.loads(line)["msg"]["id"] for line in lines]


def test_pre_compact_ingests_the_transcript_once(tmp_path: Path, transcript: Path):
    ws = tmp_path / "ws"
    first = run_hook(ws, pre_compact(transcript))
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""  # PreCompact output is not context; nothing on stdout
    assert "20 new message(s) logged" in first.stderr
    ids = log_ids(ws)
    assert len(ids) == 20 == len(set(ids))
    ledgers = "".join(p.read_text() for p in sorted((ws / "memory").glob("*.md")))
    assert "Priya needs POST /api/coupons/redeem by Monday" in ledgers
    assert "Priya" in (ws / "MEMORY.md").read_text()
    before = snapshot(ws)

    second = run_hook(ws, pre_compact(transcript, trigger="manual"))
    assert second.returncode == 0, second.stderr
    assert "ingested before; nothing new" in second.stderr
    assert snapshot(ws) == before


def test_a_grown_transcript_adds_only_its_new_messages(tmp_path: Path, transcript: Path):
    ws = tmp_path / "ws"
    assert run_hook(ws, pre_compact(transcript)).returncode == 0
    base = {"sessionId": SESSION, "isSidechain": False, "userType": "external", "cwd": "/x"}
    extra = [
        {
            **base,
            "type": "user",
            "uuid": "u-new-1",
            "timestamp": "2026-11-27T03:00:00.000Z",
            "message": {"role": "user", "content": "Remember that the demo moved to Friday."},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "u-new-2",
            "timestamp": "2026-11-27T03:00:05.000Z",
            "message": {
                "id": "msg_new",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": "Noted: the demo is on Friday."}],
            },
        },
    ]
    with transcript.open("a") as out:
        out.writelines(json.dumps(line) + "\n" for line in extra)
    grown = run_hook(ws, pre_compact(transcript))
    assert grown.returncode == 0, grown.stderr
    assert "2 new message(s) logged" in grown.stderr
    ids = log_ids(ws)
    assert len(ids) == 22 == len(set(ids))
    assert "demo moved to Friday" in (ws / "memory" / "2026-11-27.md").read_text()


def test_session_end_ingests_too(tmp_path: Path, transcript: Path):
    ws = tmp_path / "ws"
    payload = {**pre_compact(transcript), "hook_event_name": "SessionEnd", "reason": "other"}
    del payload["trigger"], payload["custom_instructions"]
    result = run_hook(ws, payload)
    assert result.returncode == 0, result.stderr
    assert len(log_ids(ws)) == 20


@pytest.mark.parametrize("source", ["startup", "resume", "compact", "clear"])
def test_session_start_prints_the_memory_as_additional_context(tmp_path: Path, source: str):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n\n## Decisions\n- Coupons are stored in cents.\n")
    result = run_hook(ws, session_start(source))
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "Today is " in context
    assert '<memory_context path="MEMORY.md">' in context
    assert "[MEMORY.md#L3-L4]\n## Decisions\n- Coupons are stored in cents." in context
    assert "memory_search" in context


def test_session_start_keeps_memory_within_the_budget(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    sections = [f"## Project {i}\n" + f"- detail {i} " * 200 + "\n" for i in range(20)]
    (ws / "MEMORY.md").write_text("# Memory\n\n" + "\n".join(sections))
    result = run_hook(ws, session_start("startup"), "--max-tokens", "600", "--no-tools")
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "[Left out to fit the 600-token memory budget:" in context
    assert len(context) < 6_000
    assert "memory_search" not in context


def test_other_events_are_ignored(tmp_path: Path):
    payload = {
        "session_id": SESSION,
        "transcript_path": "/x.jsonl",
        "cwd": "/",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    }
    result = run_hook(tmp_path / "ws", payload)
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("{not json", "Error: the hook input on stdin is not JSON"),
        ('["a"]', "Error: a hook input must be a JSON object"),
        ('{"session_id": "x"}', "Error: the hook input has no 'hook_event_name'"),
    ],
)
def test_bad_input_exits_1_with_one_line(tmp_path: Path, stdin: str, message: str):
    result = run_hook(tmp_path / "ws", stdin)
    assert result.returncode == 1
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_a_missing_transcript_exits_1_and_writes_nothing(tmp_path: Path):
    ws = tmp_path / "ws"
    result = run_hook(ws, pre_compact(tmp_path / "gone.jsonl"))
    assert result.returncode == 1
    assert result.stderr.startswith("Error: the transcript ") and "does not exist" in result.stderr
    assert not list(ws.glob("sessions/*.jsonl"))


async def test_handle_hook_serves_an_agent_sdk_pre_compact_callback(
    tmp_path: Path, transcript: Path
):
    async def pre_compact_hook(input_data: dict[str, Any], tool_use_id: Any, context: Any):
        outcome = await handle_hook(input_data, workspace=tmp_path / "ws")
        return outcome.output or {}

    assert await pre_compact_hook(pre_compact(transcript), None, None) == {}
    assert len(log_ids(tmp_path / "ws")) == 20
