"""``memdir ingest``: the command around :mod:`memdir.ingest`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.tools._core import close_shared_indexes

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
BILLING = str(EXAMPLES / "billing-migration.openai.json")
CHINESE = str(EXAMPLES / "log-migration-zh.openai.json")


@pytest.fixture(autouse=True)
def _close_indexes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEMDIR_MODEL", raising=False)
    monkeypatch.setenv("MEMDIR_TZ", "UTC")
    yield
    close_shared_indexes()


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_json_report_on_stdout(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, out, err = _run("-w", str(ws), "ingest", BILLING, CHINESE, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True and report["totals"]["messages"] == 24
    assert [s["session_id"] for s in report["sessions"]] == [
        "billing-migration",
        "log-migration-zh",
    ]
    assert report["memory_md"]["chars"] == len((ws / "MEMORY.md").read_text(encoding="utf-8"))
    assert report["consolidation"]["applied"] is True
    assert err == ""  # no table, no progress bar with --json


def test_summary_table_on_stderr(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    args = (
        "-w",
        str(ws),
        "ingest",
        str(EXAMPLES),
        "--trigger-messages",
        "8",
        "--keep-messages",
        "4",
    )
    code, out, err = _run(*args)
    assert code == 0 and out == ""
    header = err.splitlines()[0].split()
    assert header == ["file", "session", "messages", "compactions", "facts", "evicted"]
    row = next(
        line for line in err.splitlines() if line.startswith("billing-migration.openai.json")
    )
    assert row.split()[1:3] == ["billing-migration", "15"]
    assert "facts written to memory/2026-11-26.md, memory/2026-11-27.md, memory/" in err
    totals = err.splitlines()[-1]
    assert totals.startswith("MEMORY.md: ") and " added, 0 changed, 0 removed, from " in totals
    added = int(totals.split("; ")[1].split()[0])
    facts = int(err.splitlines()[-2].split(" facts written")[0].rsplit(", ", 1)[1])
    assert 0 < added <= facts  # what changed in MEMORY.md, not how many entries it read
    # The second run finds everything known.
    code, out, err = _run(*args)
    assert code == 0 and err.count("ingested before") == 3
    assert "0 facts written" in err and "unchanged (nothing new)" in err


def test_unreadable_files_fail_at_the_end(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    ws = tmp_path / "ws"
    code, _, err = _run("-w", str(ws), "ingest", str(tmp_path / "nope.json"), str(bad), CHINESE)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 2
    assert errors[0] == f"Error: transcript not found: {tmp_path / 'nope.json'}"
    assert errors[1].startswith(f"Error: {bad}: ") and errors[1].count(str(bad)) == 1
    assert (ws / "sessions" / "log-migration-zh.log.jsonl").is_file()


def test_only_bad_paths_leave_memory_md_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert _run("-w", str(ws), "add", "Jing prefers tabs")[0] == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _run("-w", str(ws), "ingest", str(tmp_path / "nope.json"), str(empty))
    assert code == 1
    assert f"Error: no transcript files (*.json, *.jsonl) in {empty}" in err.splitlines()
    assert not (ws / "MEMORY.md").exists()


def test_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    code, _, err = _run("-w", str(tmp_path / "ws"), "ingest", str(tmp_path))
    assert code == 1
    assert f"Error: no transcript files (*.json, *.jsonl) in {tmp_path}" in err.splitlines()


def test_options_are_checked(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    code, _, err = _run("-w", ws, "ingest", BILLING, "--trigger-messages", "5")
    assert code == 2 and "--keep-messages must be smaller" in err
    code, _, err = _run("-w", ws, "ingest", BILLING, "--model", "nosuch:model")
    assert code == 1 and err.startswith("Error: unknown model provider")
    code, _, err = _run("-w", ws, "ingest", BILLING, "--base-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "--base-url needs a model served over HTTP" in err
    code, _, err = _run("-w", ws, "ingest", BILLING, env={"MEMDIR_MODEL": "nosuch:model"})
    assert code == 1 and "nosuch" in err
    code, _, err = _run("-w", ws, "ingest")
    assert code == 2
    assert not (tmp_path / "ws" / "sessions" / "billing-migration.log.jsonl").exists()


def test_no_consolidate_leaves_memory_md_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, out, _ = _run("-w", str(ws), "ingest", CHINESE, "--no-consolidate", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["consolidation"] is None and report["totals"]["bullets"] > 0
    assert not (ws / "MEMORY.md").exists()
    code, out, _ = _run("-w", str(ws), "search", "林晓雯")
    assert code == 0 and out.startswith("memory/") and "林晓雯" in out


def test_session_id_option(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, out, _ = _run("-w", str(ws), "ingest", BILLING, "--session-id", "old-chat", "--json")
    assert code == 0 and json.loads(out)["sessions"][0]["session_id"] == "old-chat"
    assert (ws / "sessions" / "old-chat.log.jsonl").is_file()
    code, _, err = _run("-w", str(ws), "ingest", BILLING, "--session-id", "a/b")
    assert code == 1 and "invalid session id" in err


def test_files_of_the_wrong_kind_say_what_was_expected_and_found(tmp_path: Path) -> None:
    obj = tmp_path / "export.json"
    obj.write_text(json.dumps({"version": 2, "conversations_count": 3}), encoding="utf-8")
    binary = tmp_path / "photo.jsonl"
    binary.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}\n' + bytes([0xA4, 0x00, 0xFF]))
    prose = tmp_path / "notes.json"
    prose.write_text("just some notes\nmore notes\n", encoding="utf-8")
    records = tmp_path / "events.jsonl"
    records.write_text('{"event": "start"}\n{"event": "stop"}\n', encoding="utf-8")
    code, _, err = _run(
        "-w", str(tmp_path / "ws"), "ingest", str(obj), str(binary), str(prose), str(records)
    )
    assert code == 1
    expected = (
        "expected a list of messages in OpenAI or Anthropic format (or an object with a "
        "'messages' list), a memdir session log or a Claude Code session"
    )
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert errors == [
        f"Error: {obj}: a JSON object (keys 'version', 'conversations_count'), not a list of "
        f"messages or a known export format; {expected}",
        f"Error: {binary}: not a text file (invalid UTF-8 at byte 12)",
        f"Error: {prose}: no messages found: the file is not JSON or JSON Lines; {expected}",
        f"Error: {records}: no messages found: none of its 2 JSON lines is a message; {expected}",
    ]
    assert "codec" not in err and "JSON Lines format" not in err


def test_a_run_whose_only_file_failed_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    code, _, err = _run("-w", str(tmp_path / "ws"), "ingest", str(bad))
    assert code == 1
    assert err.splitlines()[-2].startswith("0 files ingested, 1 failed, 0 messages")


def test_errors_come_before_the_totals(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    code, _, err = _run("-w", str(tmp_path / "ws"), "ingest", str(bad), CHINESE)
    assert code == 1
    lines = err.splitlines()
    assert lines[-2].startswith("1 file ingested, 1 failed, ")
    assert lines[-1].startswith("MEMORY.md: ")
    assert lines[-3].startswith(f"Error: {bad}: an empty JSON object")
    code, out, err = _run("-w", str(tmp_path / "ws2"), "ingest", str(bad), CHINESE, "--json")
    assert code == 1 and json.loads(out)["ok"] is False
    assert err.startswith(f"Error: {bad}: an empty JSON object")


def test_context_window_lets_a_small_local_model_compact(tmp_path: Path) -> None:
    # ~5,500 tokens: no compaction without a window, two with a 4,000-token one.
    session = str(EXAMPLES / "coupon-api.claude-code.jsonl")

    def compactions(ws: str, *args: str, env: dict[str, str] | None = None) -> int:
        code, out, err = _run(
            "-w",
            str(tmp_path / ws),
            "ingest",
            session,
            "--trigger-messages",
            "0",
            "--json",
            *args,
            env=env,
        )
        assert code == 0, err
        return int(json.loads(out)["totals"]["compactions"])

    assert compactions("plain") == 0
    assert compactions("option", "--context-window", "4000") > 0
    assert compactions("env", env={"MEMDIR_CONTEXT_WINDOW": "4000"}) > 0
    code, _, err = _run("-w", str(tmp_path / "x"), "ingest", session, "--context-window", "-1")
    assert code == 2 and "positive whole number of tokens" in err
