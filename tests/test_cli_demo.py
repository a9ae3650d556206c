"""``memdir demo``: the sample workspace copied, indexed and searched, offline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.cli._demo import (
    DEMO_SEARCHES,
    create_demo_workspace,
    sample_transcripts_dir,
    sample_workspace_dir,
)
from memdir.tools._core import close_shared_indexes

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workspace"


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


def test_demo_builds_a_workspace_and_shows_cited_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIR_TZ", "UTC")
    target = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(target)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Demo workspace: {target}" in out
    assert (target / ".index" / "memory_index.db").is_file()
    assert "10 files, " in out and "memory/archive/2026-08-03.md" in out
    for query in DEMO_SEARCHES:
        assert f'memory_search("{query}", max_results=3)' in out
    # The Chinese query finds migration notes, cited by file and line.
    chinese = out.split('memory_search("数据库迁移"', 1)[1].split(">>>", 1)[0]
    cited = re.findall(
        r"^(?:MEMORY\.md|memory/[\d-]+\.md)#L\d+-L\d+ \[[^\]]+\]: - .*数据库迁移", chinese, re.M
    )
    assert len(cited) >= 2
    assert "memory_get(" in out and re.search(r"^\d+\|", out, re.M)


def test_demo_ingests_the_sample_transcripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIR_TZ", "UTC")
    target = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(target)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "3 files ingested, 44 messages" in out and "1 tool result evicted" in out
    # The Claude Code session's facts went to the days they were said.
    assert "Wang Lei has to approve" in (target / "memory" / "2026-11-26.md").read_text("utf-8")
    assert "one migration per PR" in (target / "memory" / "2026-11-27.md").read_text("utf-8")
    # MEMORY.md grew from the sample, which is kept in the history; only new entries were added.
    memory = (target / "MEMORY.md").read_text("utf-8")
    previous = sorted((target / "memory" / ".history").glob("MEMORY*.md"))
    assert len(previous) == 1 and previous[0].read_bytes() == (SAMPLE / "MEMORY.md").read_bytes()
    assert "Wang Lei has to approve" in memory and "Chen Jing" in memory
    added = re.search(r"MEMORY\.md: (\d+) entries added", out)
    assert added and 0 < int(added[1]) < 40
    # Every message of every transcript is in its session log, with the password masked.
    logs = sorted(p.name for p in (target / "sessions").glob("*.log.jsonl"))
    assert logs == [
        "5b1e0c2a-9f4d-4c7e-8a36-2f0d7c1b9e44.log.jsonl",
        "billing-migration.log.jsonl",
        "log-migration-zh.log.jsonl",
    ]
    assert "[REDACTED:url_password]" in out
    assert not any(b"Tr0ub4dor" in p.read_bytes() for p in target.rglob("*") if p.is_file())
    evicted = list((target / "large_tool_results").rglob("*.txt"))
    assert len(evicted) == 1 and "1 failed, 120 passed" in evicted[0].read_text("utf-8")


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


def test_demo_names_a_file_given_as_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["demo", "--dir", str(target)])
    assert result.exit_code == 1
    assert "is a file, not a directory" in result.stderr
    assert "not empty" not in result.stderr
    assert target.read_text(encoding="utf-8") == "mine\n"


def test_sample_ships_with_the_package_or_the_checkout() -> None:
    found = sample_workspace_dir()
    assert (found / "MEMORY.md").is_file()
    assert sorted(p.name for p in (found / "memory").glob("*.md"))[0] == "2026-10-14.md"
    transcripts = sorted(p.name for p in sample_transcripts_dir().iterdir())
    assert transcripts == [
        "billing-migration.openai.json",
        "coupon-api.claude-code.jsonl",
        "log-migration-zh.openai.json",
    ]


async def test_sample_memory_md_already_holds_its_ledgers(tmp_path: Path) -> None:
    from memdir.memory import MemoryConsolidator
    from memdir.models import ExtractiveModel
    from memdir.store.ledger import append_bullets
    from memdir.workspace import Workspace

    ws = create_demo_workspace(tmp_path / "demo")
    consolidator = MemoryConsolidator(ws, ExtractiveModel())
    first = await consolidator.consolidate()
    assert first.entries == 0 and not first.applied  # nothing of the sample is merged again
    assert ws.read_text("MEMORY.md") == (SAMPLE / "MEMORY.md").read_text("utf-8")
    # A fact added to a sample ledger afterwards is the only new entry.
    fact = "Jing's team moves the weekly demo to Friday afternoons."
    append_bullets(ws, [fact], header="Memory Add", day=date(2026, 11, 24))
    second = await MemoryConsolidator(Workspace(ws.root), ExtractiveModel()).consolidate()
    assert second.entries == 1 and "weekly demo to Friday" in ws.read_text("MEMORY.md")


def _modules_of(dist: Any) -> set[str]:
    top = dist.read_text("top_level.txt")
    names = top.split() if top else []
    names += [f.parts[0].removesuffix(".py") for f in dist.files or () if f.parts]
    return {n for n in names if n.isidentifier()}


def _extra_modules() -> set[str]:
    """The top-level modules of this environment that memdir's base install does not bring
    (its dependencies, theirs, and so on, bring the others)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()
    base: set[str] = set()
    todo = ["memdir"]
    while todo:
        try:
            dist = metadata.distribution(todo.pop())
        except metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        base |= _modules_of(dist)
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    every = set().union(*(_modules_of(d) for d in metadata.distributions()))
    return every - base - {"memdir"}


# Runs `memdir ARGS` with only the base install importable (every other top-level package of
# the environment is refused, as on a machine where no extra is installed).
_BASE_ONLY = (
    "import json, sys\n"
    "refused = set(json.loads(sys.argv[1]))\n"
    "class Refuse:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in refused:\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
    "        return None\n"
    "sys.meta_path.insert(0, Refuse())\n"
    "from memdir.cli import main\n"
    "sys.argv = ['memdir', *sys.argv[2:]]\n"
    "main()\n"
)


def test_the_quickstart_needs_no_extra(tmp_path: Path) -> None:
    """`pip install -e .` then `memdir demo` (the README's first command), and forgetting a
    fact on that workspace, import nothing the base install lacks."""
    refused = _extra_modules()
    assert {"psycopg", "fastapi", "mcp"} <= refused  # the extras are installed here

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _BASE_ONLY, json.dumps(sorted(refused)), *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env={**os.environ, "PYTHONIOENCODING": "utf-8", "MEMDIR_TZ": "UTC"},
            timeout=600,
            check=False,
        )

    target = tmp_path / "demo"
    demo = memdir("demo", "--dir", str(target))
    assert demo.returncode == 0, demo.stderr
    assert "Traceback" not in demo.stderr
    forget = memdir("-w", str(target), "forget", "数据库迁移", "--yes")
    assert forget.returncode == 0, forget.stderr
    assert "psycopg" not in forget.stderr
