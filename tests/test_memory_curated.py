"""Replacing MEMORY.md by a person or a client: compare-and-swap, history, masking, the index."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.errors import ConfigError, ToolInputError, VersionConflict
from memdir.memory import curated as curated_module
from memdir.memory import read_consolidation_log, replace_memory_md
from memdir.memory.curated import MAX_MEMORY_MD_BYTES
from memdir.tools import memory_search
from memdir.workspace import Workspace

SENDGRID = "SG." + "aB3dE6gH9jK2mN5pQ8sT1v" + "." + "xY4zA7cD0fG3iJ6lM9oP2rS5uV8wX1yZ4bC7eF0hI3k"


def _history_files(ws: Workspace) -> list[str]:
    return sorted(e.name for e in ws.listdir("memory/.history") if e.name.startswith("MEMORY."))


def _written(ws: Workspace, text: str) -> str:
    """Write MEMORY.md as an editor would; the version read back."""
    ws.write_text("MEMORY.md", text)
    found = ws.read_versioned("MEMORY.md")
    assert found is not None
    return found.version


def _cli_arg(ws: Workspace, request: pytest.FixtureRequest) -> str:
    return str(ws.root) if ws.is_local else str(request.getfixturevalue("pg_url"))


def test_a_replace_based_on_the_current_version_is_written_with_history(
    any_ws: Workspace, request: pytest.FixtureRequest
) -> None:
    ws = any_ws
    version = _written(ws, "# Memory\n- uses Postgres 14\n- likes tea\n")
    text = "# Memory\n- uses Postgres 16\n- likes tea\n- deploys on Fridays\n"
    result = replace_memory_md(ws, text, version=version)
    assert result.changed and result.masked == 0 and result.index_error is None
    now = ws.read_versioned("MEMORY.md")
    assert now is not None and now.data.decode() == text
    assert result.version == now.version  # good for the next replace
    assert result.history_path is not None
    assert ws.read_text(result.history_path) == "# Memory\n- uses Postgres 14\n- likes tea\n"
    (record,) = read_consolidation_log(ws)
    assert record["status"] == "replaced" and record["by"] == "person"
    assert record["added"] == ["deploys on Fridays"]
    assert record["history"] == result.history_path
    # the index knows the new text at once
    assert "Fridays" in memory_search("deploys Fridays", workspace=ws)
    history = CliRunner().invoke(cli, ["-w", _cli_arg(ws, request), "memory", "history"])
    assert history.exit_code == 0, history.output
    assert "replaced [by person] added=1" in history.output
    assert "+ deploys on Fridays" in history.output


def test_a_stale_version_is_a_conflict_and_writes_nothing(any_ws: Workspace) -> None:
    ws = any_ws
    stale = _written(ws, "# Memory\n- one\n")
    ws.write_text("MEMORY.md", "# Memory\n- one\n- typed meanwhile\n")
    with pytest.raises(VersionConflict, match="read it again") as caught:
        replace_memory_md(ws, "# Memory\n- one\n- mine\n", version=stale, by="api")
    current = ws.read_versioned("MEMORY.md")
    assert current is not None and caught.value.current == current.version
    assert ws.read_text("MEMORY.md") == "# Memory\n- one\n- typed meanwhile\n"
    assert _history_files(ws) == [] and read_consolidation_log(ws) == []


def test_the_same_content_again_is_a_success_whatever_the_version(any_ws: Workspace) -> None:
    # a PUT sent again after its answer was lost finds its own text: not a conflict
    ws = any_ws
    first = _written(ws, "# Memory\n- one\n")
    done = replace_memory_md(ws, "# Memory\n- two\n", version=first, by="api")
    again = replace_memory_md(ws, "# Memory\n- two\n", version=first, by="api")
    assert not again.changed and again.version == done.version
    assert len(read_consolidation_log(ws)) == 1 and len(_history_files(ws)) == 1


def test_no_version_creates_the_file_and_refuses_to_replace_one(any_ws: Workspace) -> None:
    ws = any_ws
    created = replace_memory_md(ws, "# Memory\n- first\n", version=None)
    assert created.changed and created.history_path is None
    assert ws.read_text("MEMORY.md") == "# Memory\n- first\n"
    with pytest.raises(VersionConflict):
        replace_memory_md(ws, "# Memory\n- other\n", version=None)
    assert ws.read_text("MEMORY.md") == "# Memory\n- first\n"


def test_an_edit_between_the_check_and_the_swap_is_kept(
    any_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = any_ws
    version = _written(ws, "# Memory\n- one\n")

    def edit_there(name: str) -> None:
        if name == "curated:before-replace":
            ws.write_text("MEMORY.md", "# Memory\n- one\n- the consolidator's\n")

    monkeypatch.setattr(curated_module, "pause_point", edit_there)
    with pytest.raises(VersionConflict):
        replace_memory_md(ws, "# Memory\n- mine\n", version=version)
    assert ws.read_text("MEMORY.md") == "# Memory\n- one\n- the consolidator's\n"
    assert _history_files(ws) == []  # the copy taken for a replace that did not happen


def test_secrets_are_masked_before_the_write(any_ws: Workspace) -> None:
    ws = any_ws
    text = f"# Memory\n- the mail key is {SENDGRID}\n"
    result = replace_memory_md(ws, text, version=None)
    stored = ws.read_text("MEMORY.md")
    assert SENDGRID not in stored and "[REDACTED:sendgrid_key]" in stored
    assert result.masked == 1
    assert SENDGRID not in json.dumps(read_consolidation_log(ws))


def test_bad_input_is_refused_before_anything_is_written(any_ws: Workspace) -> None:
    ws = any_ws
    with pytest.raises(ToolInputError, match="the limit is 262,144"):
        replace_memory_md(ws, "- x\n" * (MAX_MEMORY_MD_BYTES // 4 + 1), version=None)
    with pytest.raises(ToolInputError, match="NUL"):
        replace_memory_md(ws, "a\x00b", version=None)
    with pytest.raises(ToolInputError, match="not valid Unicode"):
        replace_memory_md(ws, "a\ud800b", version=None)
    with pytest.raises(ToolInputError, match="must be text"):
        replace_memory_md(ws, b"bytes", version=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="by must be"):
        replace_memory_md(ws, "x", version=None, by="a person\n")
    assert ws.read_versioned("MEMORY.md") is None
