"""``memdir compact``: session logs and OpenAI message lists, --json, --dry-run, failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memdir.cli import cli
from memdir.compaction._pairing import find_orphans
from memdir.messages import SUMMARY_NAME, Msg, msgs_from_json
from memdir.sessions import SessionLog
from memdir.workspace import Workspace


def run(ws_root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["-w", str(ws_root), *args])


def openai_conversation(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a build assistant."}]
    for i in range(turns):
        out.append({"role": "user", "content": f"Step {i}: check services/api/handler_{i}.py"})
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"services/api/handler_{i}.py"}),
                        },
                    }
                ],
            }
        )
        out.append(
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"def handler_{i}(): ..."}
        )
        out.append({"role": "assistant", "content": f"handler_{i} looks fine."})
    return out


def test_compact_an_openai_list_with_json_output(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(10)), encoding="utf-8")
    root = tmp_path / "ws"
    res = run(
        root, "compact", str(src), "--trigger-messages", "20", "--keep-messages", "6", "--json"
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["compacted"] is True
    assert data["before"]["messages"] == 41 and data["after"]["messages"] < 41
    assert data["after"]["tokens"] < data["before"]["tokens"]
    msgs = [Msg.from_dict(d) for d in data["messages"]]
    assert any(m.name == SUMMARY_NAME for m in msgs)
    assert find_orphans(msgs) == ([], [])
    log = data["log"]
    assert log["path"] == "sessions/compact-chat.log.jsonl" and log["start_line"] == 1
    logged = SessionLog(Workspace(root), "compact-chat").messages(
        log["start_line"], log["end_line"]
    )
    assert len(logged) == log["end_line"] - log["start_line"] + 1
    assert logged[0].text == "You are a build assistant."  # the prefix, from its first message
    assert logged[1].text == "Step 0: check services/api/handler_0.py"
    summary = next(m for m in msgs if m.name == SUMMARY_NAME)
    assert f"lines {log['start_line']}-{log['end_line']}" in summary.text
    assert "## SESSION INTENT" in summary.text


def test_compact_our_session_log_writes_output_and_prints_the_summary(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ws = Workspace(root)
    msgs = [Msg.user(f"note {i}: keep port 8443 for the gateway") for i in range(30)]
    SessionLog(ws, "s7").append(msgs)
    out_file = tmp_path / "compacted.json"
    res = run(
        root,
        "compact",
        str(root / "sessions" / "s7.log.jsonl"),
        "--trigger-messages",
        "10",
        "--keep-messages",
        "5",
        "-o",
        str(out_file),
    )
    assert res.exit_code == 0, res.output
    assert "## SUMMARY" in res.stdout
    written = msgs_from_json(out_file.read_text(encoding="utf-8"))
    assert written[0].name == SUMMARY_NAME and written[1:] == msgs[-5:]
    # offloading into the log it came from duplicates nothing
    ids = [r.msg.id for r in SessionLog(ws, "s7").read().records]
    assert ids == [m.id for m in msgs]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(10)), encoding="utf-8")
    root = tmp_path / "ws"
    res = run(
        root,
        "compact",
        str(src),
        "--trigger-messages",
        "20",
        "--keep-messages",
        "6",
        "--dry-run",
        "--json",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["dry_run"] is True and data["reason"] == "messages"
    assert data["cut_index"] is not None and data["after"]["messages"] < 41
    assert not list((root / "sessions").glob("*.log.jsonl"))
    text = run(
        root, "compact", str(src), "--trigger-messages", "20", "--keep-messages", "6", "--dry-run"
    )
    assert "would compact" in text.stderr


def test_below_the_trigger_nothing_is_written(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(2)), encoding="utf-8")
    root = tmp_path / "ws"
    res = run(root, "compact", str(src), "--json")
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["compacted"] is False and data["log"] is None and len(data["messages"]) == 9
    assert not list((root / "sessions").glob("*.log.jsonl"))


def test_bad_input_is_a_one_line_error(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    missing = run(root, "compact", str(tmp_path / "nope.json"))
    assert missing.exit_code == 1 and "Error:" in missing.stderr
    bad_model = tmp_path / "chat.json"
    bad_model.write_text(json.dumps(openai_conversation(2)), encoding="utf-8")
    res = run(root, "compact", str(bad_model), "--model", "nosuch:model")
    assert res.exit_code == 1 and "unknown model provider" in res.stderr
    usage = run(root, "compact", str(bad_model), "--trigger-messages", "5", "--keep-messages", "5")
    assert usage.exit_code == 2


def test_compacting_the_same_list_twice_logs_each_message_once(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(10)), encoding="utf-8")
    root = tmp_path / "ws"
    args = ("compact", str(src), "--trigger-messages", "20", "--keep-messages", "6", "--json")
    first = json.loads(run(root, *args).stdout)
    second = json.loads(run(root, *args).stdout)
    assert first["log"] == second["log"]
    records = SessionLog(Workspace(root), "compact-chat").read().records
    assert len(records) == len({r.msg.id for r in records}) == first["log"]["end_line"]


def test_a_forced_run_with_nothing_before_the_tail_is_not_an_error(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(4)[:15]), encoding="utf-8")
    root = tmp_path / "ws"
    lines = []
    for extra in ((), ("--dry-run",), ("--force", "--dry-run"), ("--force",)):
        res = run(root, "compact", str(src), *extra)
        assert res.exit_code == 0, res.output
        assert len(res.stderr.splitlines()) == 1 and "Error" not in res.stderr
        lines.append(res.stderr)
    # Every count is the same, system message included, and says so.
    assert all("15 messages, 1 of them system" in line for line in lines)
    assert lines[2] == lines[3] and "nothing before the tail of 20 to summarise" in lines[3]
    data = json.loads(run(root, "compact", str(src), "--force", "--json").stdout)
    assert data["compacted"] is False and "error" not in data
    assert data["before"]["messages"] == 15
    assert not list((root / "sessions").glob("*.log.jsonl"))


def test_a_file_gets_its_own_log_not_the_chat_session(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(10)), encoding="utf-8")
    root = tmp_path / "ws"
    res = run(root, "compact", str(src), "--trigger-messages", "20", "--keep-messages", "6")
    assert res.exit_code == 0, res.output
    assert "sessions/compact-chat.log.jsonl" in res.stderr
    assert not (root / "sessions" / "chat.log.jsonl").exists()  # `memdir chat`'s default


def test_a_relative_path_is_found_in_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The documented form `memdir -w WS compact sessions/<id>.log.jsonl`, run from elsewhere.
    root = tmp_path / "ws"
    msgs = [Msg.user(f"note {i}: keep port 8443 for the gateway") for i in range(30)]
    SessionLog(Workspace(root), "s7").append(msgs)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    args = ("--trigger-messages", "10", "--keep-messages", "5", "--json")
    res = run(root, "compact", "sessions/s7.log.jsonl", *args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["compacted"] is True and data["session_id"] == "s7"  # the log's own session
    assert not (elsewhere / "sessions").exists()
    # A file of that name in the current directory wins: it is what the user typed.
    (elsewhere / "sessions").mkdir()
    (elsewhere / "sessions" / "s7.log.jsonl").write_text(
        json.dumps(openai_conversation(2)), encoding="utf-8"
    )
    local = json.loads(run(root, "compact", "sessions/s7.log.jsonl", "--dry-run", "--json").stdout)
    assert local["before"]["messages"] == 9
    missing = run(root, "compact", "sessions/nope.log.jsonl")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == (
        "Error: transcript not found: sessions/nope.log.jsonl (neither in the current "
        f"directory nor in the workspace {root})"
    )
    # The workspace lookup never leads out of it: ../outside.json is tmp/outside.json from
    # the workspace, but the user typed it relative to the cwd, where there is none.
    (tmp_path / "outside.json").write_text(json.dumps(openai_conversation(10)), encoding="utf-8")
    (tmp_path / "b" / "c").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "b" / "c")
    escape = run(root, "compact", "../outside.json", "--force", "--json")
    assert escape.exit_code == 1
    assert escape.stderr.strip() == "Error: transcript not found: ../outside.json"
    assert not (root / "sessions" / "compact-outside.log.jsonl").exists()


def test_context_window_sets_the_hard_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Below both triggers; only a window as small as the local server's forces a compaction.
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(10)), encoding="utf-8")
    root = tmp_path / "ws"

    def reason(*args: str) -> Any:
        res = run(root, "compact", str(src), "--dry-run", "--json", *args)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["reason"]

    assert reason() is None
    assert reason("--context-window", "1000") == "hard_limit"
    monkeypatch.setenv("MEMDIR_CONTEXT_WINDOW", "1000")
    assert reason() == "hard_limit"
    assert reason("--context-window", "200000") is None  # the option wins over the variable
    res = run(root, "compact", str(src), "--context-window", "1000", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["compacted"] is True


@pytest.mark.parametrize("value", ["0", "-5", "8k", "1.5", ""])
def test_a_bad_context_window_is_a_usage_error(tmp_path: Path, value: str) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(openai_conversation(2)), encoding="utf-8")
    res = run(tmp_path / "ws", "compact", str(src), "--context-window", value)
    assert res.exit_code == 2
    assert (
        "Invalid value for '--context-window': the context window must be a positive whole "
        f"number of tokens, such as 8192, not {value!r}"
    ) in res.stderr
    env = CliRunner().invoke(
        cli,
        ["-w", str(tmp_path / "ws"), "compact", str(src)],
        env={"MEMDIR_CONTEXT_WINDOW": "zero"},
    )
    assert env.exit_code == 2 and "not 'zero' (from $MEMDIR_CONTEXT_WINDOW)" in env.stderr
