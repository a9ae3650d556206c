"""``memdir consolidate``, ``memdir maintain`` and ``memdir memory history``."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memdir.cli import cli
from memdir.cli._maintain_cmds import parse_duration
from memdir.errors import ConfigError
from memdir.store.ledger import append_bullets
from memdir.workspace import Workspace


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["-w", str(root), *args], env={"MEMDIR_MODEL": None})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = Workspace(tmp_path / "ws")  # the zone the CLI uses
    append_bullets(ws, ["I prefer dark roast coffee"], header="Memory Add")
    old = ws.today() - timedelta(days=120)
    append_bullets(ws, ["We decided to use Postgres"], header="Memory Add", day=old)
    return ws.root


def test_consolidate_dry_run_shows_the_diff_and_writes_nothing(root: Path) -> None:
    result = run(root, "consolidate", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would change MEMORY.md" in result.output
    assert "+ I prefer dark roast coffee" in result.output
    assert not (root / "MEMORY.md").exists()


def test_consolidate_then_history(root: Path) -> None:
    result = run(root, "consolidate", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["applied"] and data["skipped"] is None
    assert "I prefer dark roast coffee" in (root / "MEMORY.md").read_text()
    again = run(root, "consolidate")
    assert "nothing applied (nothing_new)" in again.output
    history = run(root, "memory", "history")
    assert history.exit_code == 0
    assert "applied [extractive] added=2" in history.output
    assert "+ We decided to use Postgres" in history.output
    records = json.loads(run(root, "memory", "history", "--json").output)
    assert len(records) == 1 and records[0]["counts"]["added"] == 2


def test_history_of_a_fresh_workspace_is_empty(tmp_path: Path) -> None:
    assert run(tmp_path, "init").exit_code == 0
    result = run(tmp_path, "memory", "history", "--json")
    assert result.exit_code == 0 and json.loads(result.output) == []


@pytest.mark.parametrize(
    "args",
    [
        ("search", "foo"),
        ("get", "MEMORY.md"),
        ("index",),
        ("mcp",),
        ("memory", "history"),
        ("consolidate", "--dry-run"),
        ("maintain", "--once"),
    ],
)
def test_reading_a_mistyped_workspace_fails_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo"
    result = run(typo, *args)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: no memdir workspace at {typo}: run 'memdir init' (or pass -w)"
    )
    assert not typo.exists()


def test_maintain_once_archives_and_consolidates(root: Path) -> None:
    result = run(root, "maintain", "--json")
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()  # JSON Lines: one object on one line
    report = json.loads(line)
    old_name = f"{(Workspace(root).today() - timedelta(days=120)).isoformat()}.md"
    assert report["archived"] == [old_name]
    assert report["consolidation"]["applied"]
    assert (root / "memory" / "archive" / old_name).exists()
    text = run(root, "maintain", "--dry-run").output
    assert "would be deleted" in text


def test_maintain_rejects_bad_options(root: Path) -> None:
    bad = run(root, "maintain", "--every", "soon")
    assert bad.exit_code == 2 and "cannot read the duration" in bad.output
    both = run(root, "maintain", "--once", "--every", "1h")
    assert both.exit_code == 2
    model = run(root, "consolidate", "--model", "nosuch:thing")
    assert model.exit_code == 1 and "unknown model provider" in model.output


@pytest.mark.parametrize(
    ("text", "seconds"), [("6h", 21_600), ("30m", 1_800), ("1h30m", 5_400), ("1d", 86_400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("consolidate", "--max-tokens", "10"), "--max-tokens"),
        (("maintain", "--every", "0s"), "--every"),
        (("maintain", "--every", "banana"), "--every"),
        (("maintain", "--retention-days", "-1"), "--retention-days"),
        (("maintain", "--session-retention-days", "0"), "--session-retention-days"),
    ],
)
def test_out_of_range_options_are_usage_errors(
    root: Path, args: tuple[str, ...], option: str
) -> None:
    result = run(root, *args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr
    assert "MemoryConsolidator" not in result.stderr and "MaintenanceConfig" not in result.stderr


@pytest.mark.parametrize("text", ["", "h", "5x", "0s", "6h soon"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(text)


def on_a_terminal(root: Path, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """Run ``memdir`` in a process whose stderr is a terminal: (exit code, stdout, stderr)."""
    import pty

    master, slave = pty.openpty()
    stdout = tmp_path / "stdout.txt"
    with stdout.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memdir", "-w", str(root), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=slave,
            env={**os.environ, "MEMDIR_MODEL": "extractive", "COLUMNS": "120", "TERM": "xterm"},
        )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while select.select([master], [], [], 120)[0]:
            try:
                data = os.read(master, 65_536)
            except OSError:  # EIO: the process is gone and the terminal closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = proc.wait(timeout=120)
    return code, stdout.read_text(encoding="utf-8"), b"".join(chunks).decode("utf-8", "replace")


def backlog(root: Path) -> None:
    """About 90 KB of new ledger text: two consolidation batches."""
    ws = Workspace(root)
    for block in range(10):
        bullets = [
            f"fact {block}-{i}: the gateway listens on port {8000 + i} " + "w" * 40
            for i in range(100)
        ]
        append_bullets(ws, bullets, header="Memory Add")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX terminal")
@pytest.mark.parametrize("command", [("consolidate",), ("maintain", "--once")])
def test_a_long_consolidation_shows_its_batches_on_a_terminal(
    root: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    backlog(root)
    code, out, err = on_a_terminal(root, tmp_path, *command, "--dry-run")
    assert code == 0, err
    assert "consolidating MEMORY.md: batch 2 of 2" in err
    assert "would change MEMORY.md" in out  # the report itself is data, on stdout
    # Never with --json, nor when stderr is not a terminal.
    code, out, err = on_a_terminal(root, tmp_path, *command, "--dry-run", "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert (report.get("consolidation") or report)["batches"] == 2
    piped = run(root, *command)
    assert piped.exit_code == 0, piped.output
    assert "batch" not in piped.stderr and "consolidating" not in piped.stderr


@pytest.mark.parametrize("command", ["consolidate", "maintain", "compact"])
def test_model_commands_take_a_base_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    import memdir.cli._ingest_cmd as ingest_cmd
    from memdir.messages import Msg
    from memdir.models import ExtractiveModel
    from memdir.sessions import SessionLog
    from memdir.workspace import Workspace

    seen: list[str | None] = []

    def build(spec: str, base_url: str | None, **_: object) -> ExtractiveModel:
        seen.append(base_url)
        return ExtractiveModel()

    monkeypatch.setattr(ingest_cmd, "build_model", build)
    ws = tmp_path / "ws"
    CliRunner().invoke(cli, ["-w", str(ws), "add", "The deploy window is Friday."])
    SessionLog(Workspace(ws), "s1").append([Msg.user("hello"), Msg.assistant("hi")])
    args = {
        "compact": ["compact", str(ws / "sessions" / "s1.log.jsonl"), "--force"],
        "consolidate": ["consolidate"],
        "maintain": ["maintain", "--once"],
    }[command]
    url = "http://127.0.0.1:9/v1"
    result = CliRunner().invoke(
        cli, ["-w", str(ws), *args, "--model", "openai:local", "--base-url", url]
    )
    assert seen == [url], result.output
