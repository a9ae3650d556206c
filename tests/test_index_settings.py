"""The embedder setting lives apart from the vectors: a damaged vectors.db does not lose it."""

from __future__ import annotations

import json
import sqlite3
import warnings

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.index import MemoryIndex
from memdir.index._vectors import VectorStore
from memdir.testing import ConceptEmbedder
from memdir.workspace import Workspace

pytest.importorskip("numpy")

CONCEPTS = {"db": ["database", "数据库"], "move": ["migration", "迁移"]}
QUERY = "database migration plan"


@pytest.fixture(autouse=True)
def _concepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The name "concepts" builds the test embedder, wherever memdir resolves a name."""
    monkeypatch.setattr(
        "memdir.index._core.embedder_from_string", lambda name: ConceptEmbedder(CONCEPTS)
    )


def _embedded(ws: Workspace) -> None:
    ws.write_text("memory/2026-11-29.md", "- 我们讨论了数据库迁移方案\n- the weather was fine\n")
    with MemoryIndex(ws) as index:
        index.set_default_embedder("concepts")
        index.index_all_from_workspace()
        assert index.embed_pending().embedded == 2


def _damage(ws: Workspace) -> None:
    for suffix in ("-wal", "-shm"):
        (ws.index_dir / f"vectors.db{suffix}").unlink(missing_ok=True)
    (ws.index_dir / "vectors.db").write_bytes(b"\x00garbage, not a database" * 500)


def _index_embed(ws: Workspace) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--workspace", str(ws.root), "index", "--embed", "--json"])
    return result.exit_code, result.output


def test_the_setting_survives_a_damaged_vector_store(ws: Workspace) -> None:
    _embedded(ws)
    _damage(ws)
    with MemoryIndex(ws) as index:
        assert index.embedder is not None  # still hybrid
    with pytest.warns(RuntimeWarning, match="vector store .* was reset"):
        code, output = _index_embed(ws)
    assert code == 0, output
    assert json.loads(output)["vectors"]["embedded"] == 2
    with MemoryIndex(ws) as index:
        hits = index.search(QUERY, 3)
    assert [h.content for h in hits] == ["- 我们讨论了数据库迁移方案"]  # found by meaning again


def test_a_deleted_vector_store_keeps_the_setting(ws: Workspace) -> None:
    _embedded(ws)
    for suffix in ("", "-wal", "-shm"):
        (ws.index_dir / f"vectors.db{suffix}").unlink(missing_ok=True)
    code, output = _index_embed(ws)
    assert code == 0, output
    assert json.loads(output)["vectors"]["embedded"] == 2


def test_an_older_workspace_setting_is_moved_on_first_open(ws: Workspace) -> None:
    ws.write_text("memory/2026-11-29.md", "- 我们讨论了数据库迁移方案\n")
    store = VectorStore(ws.index_dir / "vectors.db")  # as memdir kept it before
    store.add([(b"k" * 16, b"\x00" * 8)])
    store.close()
    con = sqlite3.connect(ws.index_dir / "vectors.db")
    con.execute("INSERT INTO meta(key, value) VALUES ('embedder', 'concepts')")
    con.commit()
    con.close()
    assert not (ws.index_dir / "settings.json").exists()
    with MemoryIndex(ws) as index:
        assert index.embedder is not None
    settings = json.loads((ws.index_dir / "settings.json").read_text(encoding="utf-8"))
    assert settings["embedder"] == "concepts"
    _damage(ws)
    with pytest.warns(RuntimeWarning, match="was reset"):
        code, output = _index_embed(ws)
    assert code == 0, output


def test_embedder_off_turns_hybrid_off_and_removes_the_vectors(ws: Workspace) -> None:
    _embedded(ws)
    result = CliRunner().invoke(cli, ["--workspace", str(ws.root), "index", "--embedder", "off"])
    assert result.exit_code == 0, result.output
    assert not (ws.index_dir / "vectors.db").exists()
    # Recorded as off, so that the bundled embedder, when installed, is not used either.
    settings = json.loads((ws.index_dir / "settings.json").read_text("utf-8"))
    assert settings["embedder"] == "off"
    with MemoryIndex(ws) as index:
        assert index.embedder is None
    code, output = _index_embed(ws)
    assert code == 1 and "no embedder is set" in output


def test_a_damaged_settings_file_is_reported_and_search_stays_lexical(ws: Workspace) -> None:
    _embedded(ws)
    (ws.index_dir / "settings.json").write_text("{not json", encoding="utf-8")
    with MemoryIndex(ws) as index:
        with pytest.warns(RuntimeWarning, match="settings.json"):
            hits = index.search("数据库", 3)
        assert [h.content for h in hits] == ["- 我们讨论了数据库迁移方案"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            index.search("数据库", 3)  # said once
        index.set_default_embedder("concepts")  # setting it again repairs the file
    assert json.loads((ws.index_dir / "settings.json").read_text("utf-8"))["embedder"] == "concepts"
