"""Search on a workspace kept in PostgreSQL: the same hits as on files, in SQL, per namespace.

Every test runs against a real server (``tests/_postgres.py``). The index rows live beside the
files rows; they are derived, so a full rebuild gives the same hits, and several processes
appending and indexing at once leave rows that match the files exactly.
"""

from __future__ import annotations

import json
import multiprocessing
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.index import MemoryIndex, SearchHit
from memdir.testing import ConceptEmbedder
from memdir.tools import memory_search
from memdir.tools._core import close_shared_indexes
from memdir.workspace import Workspace

MEMORY_MD = """# User

- Alice prefers PostgreSQL over MySQL for every new service.
- 用户喜欢喝手冲咖啡，不加糖。
- Timezone: Asia/Shanghai; works 10:00-19:00.

# Projects

- memdir: durable memory for agents; the search index must stay derived data.
- 数据库迁移方案：先双写，再切读，最后下线旧库。
"""

LEDGERS = {
    "memory/2026-11-20.md": """## Memory Flush — 2026-11-20T09:00Z

- Discussed the database migration plan with Bob: dual writes first.
- 讨论了向量检索的召回率，目标是R@5达到0.8以上。
- Bob's birthday is on March 3rd; he likes chess.
""",
    "memory/2026-11-25.md": """## Memory Flush — 2026-11-25T10:00Z

- Deployed the migration on Friday; rollback plan kept for a week.
- 周五部署了数据库迁移，保留一周回滚方案。
- Alice asked for a coffee machine in the office 🎉.

## Memory Flush — 2026-11-25T18:00Z

- The CI runs PostgreSQL 15 on loopback only.
- 南京市长江大桥的照片放在共享盘里。
""",
    "memory/2026-11-29.md": """## Memory Flush — 2026-11-29T08:30Z

- Alice's favourite coffee is a flat white with oat milk.
- 会议改到周三下午三点，地点在三楼会议室。
- Searching Chinese needs segmentation: 迁移 must match 数据库迁移方案.
```
code blocks keep their lines: SELECT * FROM files;
```
""",
}
ARCHIVE = {
    "memory/archive/2026-08-01.md": """## Memory Flush — 2026-08-01T12:00Z

- Old decision: MySQL for the billing service (superseded by PostgreSQL).
- 旧的决定：账单服务使用MySQL。
""",
}
QUERIES = [
    "PostgreSQL",
    "database migration",
    "migration plan rollback",
    "迁移",
    "数据库迁移方案",
    "咖啡",
    "Alice coffee",
    "Bob birthday chess",
    "长江大桥",
    "南京市长江大桥",
    "市长",
    "向量检索的召回率",
    "会议 周三",
    "MySQL billing",
    "🎉",
    "the",
    "SELECT files",
    "oat milk flat white",
    "R@5 召回率",
    "xyzzy plugh",
]


def _fill(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", MEMORY_MD)
    for rel, text in {**LEDGERS, **ARCHIVE}.items():
        ws.write_text(rel, text)


def _key(hit: SearchHit) -> tuple[object, ...]:
    return (hit.path, hit.line_number, hit.line_end, hit.content, hit.heading, hit.archived)


def _results(index: MemoryIndex) -> dict[str, list[tuple[object, ...]]]:
    return {query: [_key(hit) for hit in index.search(query, limit=10)] for query in QUERIES}


@pytest.fixture
def pg_ws(pg_url: str) -> Workspace:
    return Workspace(pg_url, tz="UTC")


def test_the_same_hits_on_files_and_in_postgresql(tmp_path: Path, pg_ws: Workspace) -> None:
    local = Workspace(tmp_path / "ws", tz="UTC")
    _fill(local)
    _fill(pg_ws)
    with MemoryIndex(local) as on_files, MemoryIndex(pg_ws) as in_pg:
        assert on_files.refresh().lines_indexed == in_pg.refresh().lines_indexed > 0
        expected = _results(on_files)
        assert _results(in_pg) == expected
        assert expected["迁移"] and expected["🎉"] and expected["PostgreSQL"]
        assert not expected["xyzzy plugh"]
        scores = [h.score for h in in_pg.search("Alice coffee")]
        assert scores == pytest.approx([h.score for h in on_files.search("Alice coffee")])
        archived = {h.path: h.archived for h in in_pg.search("MySQL")}
        assert archived["memory/archive/2026-08-01.md"] is True
        assert in_pg.path is None


def test_appends_edits_deletions_and_a_full_rebuild(pg_ws: Workspace) -> None:
    _fill(pg_ws)
    with MemoryIndex(pg_ws) as index:
        index.refresh()
        before = _results(index)
        start, _ = pg_ws.append_text("memory/2026-11-29.md", "- Carol joins the team on Monday.\n")
        line = index.index_appended("memory/2026-11-29.md", start)
        hits = index.search("Carol team")
        assert [(h.path, h.line_number) for h in hits] == [("memory/2026-11-29.md", line)]
        text = pg_ws.read_text("memory/2026-11-25.md").replace("Friday", "Thursday")
        pg_ws.write_text("memory/2026-11-25.md", text)
        stats = index.refresh()
        assert (stats.files_indexed, stats.lines_indexed) == (1, 1)  # only the edited line
        assert [h.content for h in index.search("Thursday")] == [
            "- Deployed the migration on Thursday; rollback plan kept for a week."
        ]
        assert index.search("Friday rollback")[0].content.startswith("- Deployed")
        pg_ws.delete("memory/2026-11-20.md")
        assert index.refresh().files_removed == 1
        assert not index.search("Bob birthday chess")
        assert all(h.path != "memory/2026-11-20.md" for h in index.search("migration"))
        now = _results(index)
        rebuilt = index.index_all_from_workspace(full=True)
        assert rebuilt.files_indexed == 4
        assert _results(index) == now != before


def test_a_namespace_never_sees_another_namespaces_rows(pg_url: str) -> None:
    alice = Workspace(pg_url, tz="UTC", namespace="alice")
    bob = Workspace(pg_url, tz="UTC", namespace="bob")
    root = Workspace(pg_url, tz="UTC")
    for ws, who in ((alice, "alice"), (bob, "bob"), (root, "root")):
        ws.write_text("MEMORY.md", f"# Secrets\n\n- the shared password belongs to {who}\n")
        ws.write_text("memory/2026-11-30.md", f"- shared password rotated by {who}\n")
    with MemoryIndex(alice) as a, MemoryIndex(bob) as b, MemoryIndex(root) as r:
        for index in (a, b, r):
            index.refresh()
        for index, who in ((a, "alice"), (b, "bob"), (r, "root")):
            hits = index.search("shared password", limit=50)
            assert len(hits) == 2
            assert all(h.content.endswith(who) for h in hits)
        assert not a.search("bob") and not b.search("alice")
        bob.delete("memory/2026-11-30.md")
        b.index_all_from_workspace(full=True)
        assert len(b.search("shared password")) == 1
        assert len(a.search("shared password")) == 2  # a rebuild of bob left alice alone
        assert len(r.search("rotated")) == 1


def _appender(url: str, who: int, count: int, barrier: Any) -> None:
    ws = Workspace(url, tz="UTC")
    with MemoryIndex(ws) as index:
        barrier.wait(timeout=60)
        for i in range(count):
            start, _ = ws.append_text("memory/2026-11-30.md", f"- writer {who} note zq{who}x{i}\n")
            index.index_appended("memory/2026-11-30.md", start)


def test_two_processes_appending_and_indexing_at_once(pg_ws: Workspace, pg_url: str) -> None:
    pg_ws.write_text("memory/2026-11-30.md", "# Notes\n\n")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    count = 25
    workers = [ctx.Process(target=_appender, args=(pg_url, w, count, barrier)) for w in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=180)
    assert [w.exitcode for w in workers] == [0, 0]
    lines = pg_ws.read_text("memory/2026-11-30.md").splitlines()
    with MemoryIndex(pg_ws) as index:
        for who in (0, 1):
            for i in range(count):
                hits = index.search(f"zq{who}x{i}")
                assert [(h.content, h.line_number) for h in hits] == [
                    (
                        f"- writer {who} note zq{who}x{i}",
                        lines.index(f"- writer {who} note zq{who}x{i}") + 1,
                    )
                ]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a row out of step would be rebuilt, with a warning
            stats = index.index_all_from_workspace(check=True)
        assert stats.files_indexed == 0
        assert len(index.search("writer note", limit=100)) == 2 * count


def test_cli_index_and_search_and_the_memory_search_tool(pg_ws: Workspace, pg_url: str) -> None:
    _fill(pg_ws)
    runner = CliRunner()
    try:
        done = runner.invoke(cli, ["-w", pg_url, "index", "--json"])
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["files_indexed"] == 5
        found = runner.invoke(cli, ["-w", pg_url, "search", "迁移", "--json"])
        assert found.exit_code == 0, found.output
        paths = {hit["path"] for hit in json.loads(found.stdout)}
        assert paths == {"MEMORY.md", "memory/2026-11-25.md", "memory/2026-11-29.md"}
        full = runner.invoke(cli, ["-w", pg_url, "index", "--full", "--json"])
        assert full.exit_code == 0 and json.loads(full.stdout)["files_indexed"] == 5
        text = memory_search("oat milk coffee", workspace=pg_ws)
        assert "memory/2026-11-29.md#L3" in text and "flat white" in text
    finally:
        close_shared_indexes()


def test_hybrid_search_keeps_its_setting_and_vectors_in_the_database(pg_ws: Workspace) -> None:
    _fill(pg_ws)
    embedder = ConceptEmbedder({"drink": ["coffee", "咖啡", "espresso"]})
    with MemoryIndex(pg_ws, embedder=embedder) as index:
        index.refresh()
        stats = index.embed_pending()
        assert stats.embedded > 0 and stats.pending == 0
        assert index.embed_pending().embedded == 0  # stored: nothing left to embed
        hits = index.search("espresso")  # no line holds the word: only vectors find it
        assert hits and all("coffee" in h.content or "咖啡" in h.content for h in hits)
    with MemoryIndex(pg_ws) as index:
        index.set_default_embedder("ollama:nomic-embed-text")
    other = Workspace(pg_ws.url, tz="UTC", namespace="other")
    with MemoryIndex(pg_ws) as index, MemoryIndex(other) as elsewhere:
        assert index.embedder is not None and index.embedder.name.startswith("ollama:")
        ollama = "ollama:"
        assert not (elsewhere.embedder and elsewhere.embedder.name.startswith(ollama))  # per ns
        index.set_default_embedder(None)
        assert not (index.embedder and index.embedder.name.startswith(ollama))
    with MemoryIndex(pg_ws, embedder=embedder) as index:
        assert index.embed_pending(max_seconds=0).pending == stats.embedded  # vectors deleted


def _postings(ws: Workspace) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Every posting row, and every lexeme of every stored unit, both sorted."""
    import psycopg

    db = ws.store.db  # type: ignore[attr-defined]
    s = f'"{db.schema}"'
    with psycopg.connect(db.conninfo) as conn:
        postings = conn.execute(f"SELECT ns, lexeme, id FROM {s}.index_postings ORDER BY 1, 2, 3")
        units = conn.execute(
            f"SELECT ns, l, id FROM {s}.index_units, unnest(tsvector_to_array(terms)) AS l"
            " ORDER BY 1, 2, 3"
        )
        return postings.fetchall(), units.fetchall()


def test_the_posting_lists_follow_every_insert_edit_deletion_and_rebuild(pg_url: str) -> None:
    ws = Workspace(pg_url, tz="UTC")
    other = Workspace(pg_url, tz="UTC", namespace="other")
    _fill(ws)
    _fill(other)
    with MemoryIndex(ws) as index, MemoryIndex(other) as elsewhere:
        index.refresh()
        elsewhere.refresh()
        postings, lexemes = _postings(ws)
        assert postings == lexemes and len(postings) > 200
        start, _ = ws.append_text("memory/2026-11-29.md", "- Carol joins the team 周一.\n")
        index.index_appended("memory/2026-11-29.md", start)
        edited = LEDGERS["memory/2026-11-25.md"].replace("周五", "周四")
        ws.write_text("memory/2026-11-25.md", edited)
        ws.delete("memory/2026-11-20.md")
        index.refresh()
        now, lexemes = _postings(ws)
        assert now == lexemes
        hits = [h.content for h in index.search("周四")]
        assert hits == ["- 周四部署了数据库迁移，保留一周回滚方案。"]
        assert not index.search("周五") and not index.search("chess")
        index.index_all_from_workspace(full=True)
        after, lexemes = _postings(ws)
        assert after == lexemes
        assert {row for row in after if row[0] == "other"} == {
            row for row in postings if row[0] == "other"
        }  # the rebuild of one namespace left the other's postings alone
        assert len(elsewhere.search("周五")) == 1


def test_an_index_made_before_the_posting_lists_gets_them_when_migrated(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memdir.store.postgres import _schema

    local = Workspace(tmp_path / "ws", tz="UTC")
    _fill(local)
    # All but migration 5: the store's writes need the write keys of migration 6.
    older = {v: steps for v, steps in _schema.MIGRATIONS.items() if v != 5}
    with monkeypatch.context() as patch:
        patch.setattr(_schema, "MIGRATIONS", older)
        ws = Workspace(pg_url, tz="UTC")
        _fill(ws)
        with MemoryIndex(ws) as index:
            index.refresh()  # units with their tsvectors, written before migration 5
    db = ws.store.db  # type: ignore[attr-defined]
    assert _schema.migrate(db.transaction, db.schema) == 1  # as `memdir db upgrade` runs it

    def estimated_rows(cur: Any) -> float:
        cur.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
            (f'"{db.schema}".index_postings',),
        )
        return float(cur.fetchone()[0])

    # The planner knows the new table at once (-1: never analysed), not after autovacuum.
    assert db.transaction(estimated_rows) > 0
    with MemoryIndex(local) as on_files, MemoryIndex(ws) as in_pg:
        on_files.refresh()
        assert in_pg.refresh().files_indexed == 0  # nothing re-indexed: the rows were kept
        assert _results(in_pg) == _results(on_files)
        postings, lexemes = _postings(ws)
        assert postings == lexemes and postings
