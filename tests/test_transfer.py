"""Export and import: any store to a plain directory and back, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.errors import ConfigError, WorkspaceError
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.store.transfer import export_workspace, import_workspace, workspace_files
from memdir.workspace import Workspace


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".index" not in p.relative_to(root).parts
    }


def _fill(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "## Decisions\n- PostgreSQL 16 for the shop 数据库\n")
    ws.append_text("memory/2026-11-30.md", "## Memory Add — 2026-11-30T09:00:00Z\n- tabs\n")
    ws.write_bytes("memory/2026-11-29.md", b"- bad utf-8 \xff kept as it is\n")
    ws.write_text("memory/archive/2026-01-01.md", "- old\n")
    ws.write_text("memory/.history/MEMORY.20261130T090000.000000Z.md", "- before\n")
    ws.write_text("AGENTS.md", "Be terse.\n")
    ws.write_bytes("large_tool_results/s1/call-abc.txt", b"x" * 70_000)
    ws.write_text("notes/empty.md", "")
    SessionLog(ws, "s1").append([Msg.user("hello"), Msg.assistant("hi")])
    bob = ws.namespaced("bob")
    bob.write_text("MEMORY.md", "- bob's own\n")
    bob.append_text("memory/2026-11-30.md", "- bob noted it\n")


KEYS = '{"version": 1, "keys": [{"key_id": "abcdefghijklmnop", "scope": "admin"}]}\n'


def test_the_server_keys_are_neither_exported_nor_imported(
    tmp_path: Path, any_ws: Workspace
) -> None:
    any_ws.write_text("MEMORY.md", "- kept\n")
    any_ws.write_text(".memdir-server/keys.json", KEYS)
    assert workspace_files(any_ws) == ["MEMORY.md"]
    out = tmp_path / "out"
    report = export_workspace(any_ws, out, all_namespaces=True)
    assert report.files == 1 and not (out / ".memdir-server").exists()
    # a directory that brings keys of its own cannot plant them in the workspace
    planted = tmp_path / "planted"
    (planted / ".memdir-server").mkdir(parents=True)
    (planted / ".memdir-server" / "keys.json").write_text(KEYS.replace("admin", "forged"))
    (planted / "MEMORY.md").write_text("- kept\n")
    loaded = import_workspace(planted, any_ws, replace=True)
    assert loaded.files == 0 and loaded.unchanged == 1
    assert any_ws.read_text(".memdir-server/keys.json") == KEYS


def test_files_to_postgres_to_files_is_exact(tmp_path: Path, pg_url: str) -> None:
    source = Workspace(tmp_path / "src")
    _fill(source)
    first = tmp_path / "first"
    report = export_workspace(source, first, all_namespaces=True)
    assert report.namespaces == [None, "bob"] and report.files > 10
    db = Workspace(pg_url)
    loaded = import_workspace(first, db, all_namespaces=True)
    assert loaded.files == report.files and not loaded.conflicts
    assert db.namespaced("bob").read_text("MEMORY.md") == "- bob's own\n"
    second = tmp_path / "second"
    export_workspace(db, second, all_namespaces=True)
    assert _tree(second) == _tree(first)
    assert _tree(first) == _tree(tmp_path / "src")
    # Once more: nothing changes, nothing conflicts.
    again = import_workspace(first, db, all_namespaces=True)
    assert again.files == 0 and again.unchanged == report.files


def test_an_import_never_overwrites_what_differs_unless_asked(
    tmp_path: Path, any_ws: Workspace
) -> None:
    source = Workspace(tmp_path / "src")
    source.write_text("MEMORY.md", "- from the export\n")
    any_ws.write_text("MEMORY.md", "- already here\n")
    kept = import_workspace(source.root, any_ws)
    assert kept.conflicts == ["MEMORY.md"] and any_ws.read_text("MEMORY.md") == "- already here\n"
    replaced = import_workspace(source.root, any_ws, replace=True)
    assert replaced.files == 1 and any_ws.read_text("MEMORY.md") == "- from the export\n"


def test_export_refuses_a_directory_that_holds_files(tmp_path: Path, any_ws: Workspace) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "x").write_text("mine")
    with pytest.raises(WorkspaceError, match="not an empty directory"):
        export_workspace(any_ws, target)
    assert (target / "x").read_text() == "mine"


def test_a_directory_with_namespaces_needs_all_namespaces(tmp_path: Path, pg_url: str) -> None:
    source = Workspace(tmp_path / "src")
    _fill(source)
    with pytest.raises(ConfigError, match="all-namespaces"):
        import_workspace(source.root, Workspace(pg_url))


def test_cli_export_import_and_db_upgrade(tmp_path: Path, pg_url: str) -> None:
    runner = CliRunner()
    source = Workspace(tmp_path / "src")
    _fill(source)
    up = runner.invoke(cli, ["-w", pg_url, "db", "upgrade"])
    assert up.exit_code == 0 and "at version" in up.output
    imported = runner.invoke(
        cli, ["-w", pg_url, "import", str(source.root), "--all-namespaces", "--json"]
    )
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["conflicts"] == []
    got = runner.invoke(cli, ["-w", pg_url, "get", "MEMORY.md"])
    assert got.exit_code == 0 and "PostgreSQL 16" in got.stdout
    bob = runner.invoke(cli, ["-w", pg_url, "-n", "bob", "get", "MEMORY.md"])
    assert "bob's own" in bob.stdout and "PostgreSQL 16" not in bob.stdout
    out = tmp_path / "back"
    exported = runner.invoke(cli, ["-w", pg_url, "export", "--to", str(out), "--all-namespaces"])
    assert exported.exit_code == 0, exported.output
    assert _tree(out) == _tree(source.root)
    assert runner.invoke(cli, ["-w", str(tmp_path / "x"), "db", "upgrade"]).exit_code == 2
