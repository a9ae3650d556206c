"""``memdir demo``: the sample workspace copied, indexed and searched, offline."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._toolcore import close_shared_indexes
from memdir.cli import cli
from memdir.cli._demo import DEMO_SEARCHES, sample_workspace_dir

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


def test_demo_builds_a_workspace_and_shows_cited_hits(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(target)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Demo workspace: {target}" in out
    assert (target / "MEMORY.md").read_bytes() == (SAMPLE / "MEMORY.md").read_bytes()
    assert (target / ".index" / "memory_index.db").is_file()
    assert "10 files, " in out and "memory/archive/2026-08-03.md" in out
    for query in DEMO_SEARCHES:
        assert f'memory_search("{query}", max_results=3)' in out
    # The Chinese query finds the migration decision, cited by file and line.
    chinese = out.split('memory_search("数据库迁移"', 1)[1].split(">>>", 1)[0]
    assert re.search(r"^MEMORY\.md#L18-L18 \[Project: lumen-shop\]: - 数据库迁移", chinese, re.M)
    assert "memory_get(" in out and "\n1|## Memory Flush" in out


def test_demo_default_dir_is_a_fresh_temp_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    created = re.search(r"Demo workspace: (\S+)", result.stdout)
    assert created and Path(created[1]).is_relative_to(tmp_path)
    assert (Path(created[1]) / "memory" / "2026-10-14.md").is_file()


def test_demo_never_overwrites_a_directory_in_use(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "MEMORY.md").write_text("# my own memory\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["demo", "--dir", str(target)])
    assert result.exit_code == 1
    assert "is not empty" in result.stderr
    assert (target / "MEMORY.md").read_text(encoding="utf-8") == "# my own memory\n"


def test_sample_ships_with_the_package_or_the_checkout() -> None:
    found = sample_workspace_dir()
    assert (found / "MEMORY.md").is_file()
    assert sorted(p.name for p in (found / "memory").glob("*.md"))[0] == "2026-10-14.md"
