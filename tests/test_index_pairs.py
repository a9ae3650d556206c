"""Chinese words looked up by their character pairs: found inside longer runs, kept in step
with every edit of a file, and filled in when an older index is upgraded."""

from __future__ import annotations

import re
import sqlite3

import pytest

from memdir.index import MemoryIndex
from memdir.index._fts import PAIRS_TABLE, TOKENIZER
from memdir.index._schema import SCHEMA_VERSION
from memdir.index._sqlite import SqliteEngine
from memdir.index._text import CJK_CHARS, index_body, index_pairs
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-02.md"
LINES = (
    "- 我们讨论了数据库迁移方案",
    "- 数组越界的问题已经修好",
    "- 他说复数，组合起来更难",
    "- deploy the 数据库 on friday",
    "- 水獭在河边吃鱼",
)


def _hits(index: MemoryIndex, query: str) -> list[int]:
    return [hit.line_number for hit in index.search(query, limit=10)]


def _indexed(tmp_path, lines=LINES) -> tuple[Workspace, MemoryIndex]:
    ws = Workspace(tmp_path)
    ws.write_text(LEDGER, "\n".join(lines) + "\n")
    index = MemoryIndex(ws).open()
    index.index_all_from_workspace()
    return ws, index


def test_pairs_of_each_run_never_span_two_runs() -> None:
    assert index_pairs("我们讨论了数据库迁移") == "我们 们讨 讨论 论了 了数 数据 据库 库迁 迁移"
    assert index_pairs("复数，组合 abc 数组") == "复数 组合 数组"
    assert index_pairs("one 字 only") == ""
    assert index_pairs("plain ascii") == ""
    assert index_pairs("v1.0 的 gpt-4o") == "v1ǀ0 gptǀ4o"  # written words of several tokens


def test_a_word_is_found_inside_a_longer_run(tmp_path) -> None:
    _, index = _indexed(tmp_path)
    assert sorted(_hits(index, "数据库")) == [1, 4]
    assert _hits(index, "迁移") == [1]
    assert _hits(index, "数据库迁移")[0] == 1
    assert 4 in _hits(index, "数据库 friday")[:1]  # a Chinese word and a Latin one together
    assert _hits(index, "河边") == [5]


def test_a_word_split_by_punctuation_is_not_that_word(tmp_path) -> None:
    """``复数，组合`` holds the characters of ``数组`` side by side, but not the word."""
    _, index = _indexed(tmp_path)
    assert _hits(index, "数组") == [2]


def test_pairs_follow_edits_and_removals(tmp_path) -> None:
    ws, index = _indexed(tmp_path)
    assert _hits(index, "水獭") == [5]
    edited = [line.replace("水獭在河边吃鱼", "海豹在冰上睡觉") for line in LINES]
    ws.write_text(LEDGER, "\n".join(edited) + "\n")
    index.index_file(LEDGER)
    assert _hits(index, "水獭") == []
    assert _hits(index, "河边") == []
    assert _hits(index, "海豹") == [5]
    assert _hits(index, "数据库迁移")[0] == 1
    engine, problem = SqliteEngine.open(ws.index_dir / "memory_index.db")
    assert engine is not None, problem
    assert engine.damage() is None  # FTS5's own check of both tables
    engine.close()
    ws.delete(LEDGER)
    index.index_file(LEDGER)
    assert _hits(index, "海豹") == []
    assert _hits(index, "数据库") == []
    index.close()
    con = sqlite3.connect(ws.index_dir / "memory_index.db")
    try:
        assert con.execute("SELECT rowid FROM pairs WHERE pairs MATCH '\"数据\"'").fetchall() == []
    finally:
        con.close()


def _as_version(path, version: int) -> None:
    """Turn a current index back into what ``version`` left: words with positions in ``fts``
    and CJK pairs only in ``pairs`` (3), no ``pairs`` table (2)."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("DROP TABLE fts")
        con.execute(
            f"CREATE VIRTUAL TABLE fts USING fts5(body, content='', tokenize='{TOKENIZER}')"
        )
        rows = con.execute("SELECT id, content FROM units").fetchall()
        con.executemany(
            "INSERT INTO fts(rowid, body) VALUES (?, ?)", [(i, index_body(c)) for i, c in rows]
        )
        con.execute("DROP TABLE pairs")
        if version == 3:
            con.execute(PAIRS_TABLE)
            con.executemany(
                "INSERT INTO pairs(rowid, body) VALUES (?, ?)",
                [(i, " ".join(re.findall(f"(?=([{CJK_CHARS}]{{2}}))", c))) for i, c in rows],
            )
        con.execute(f"PRAGMA user_version = {version}")
    finally:
        con.close()


@pytest.mark.parametrize("version", [2, 3])
def test_an_index_of_a_previous_schema_is_upgraded_in_place(tmp_path, version) -> None:
    ws, index = _indexed(tmp_path, (*LINES, "- shipped v1.0 on 2026-11-02"))
    queries = ("数据库", "迁移", "数组", "水獭 河边", "deploy 数据库", "v1.0", "2026-11-02 数据库")
    before = [index.search(query, limit=10) for query in queries]
    index.close()
    path = ws.index_dir / "memory_index.db"
    con = sqlite3.connect(path)
    try:
        files = con.execute("SELECT id, path, digest FROM files").fetchall()
    finally:
        con.close()
    _as_version(path, version)
    engine, problem = SqliteEngine.open(path)
    assert engine is not None, problem
    assert engine.damage() is None
    engine.close()
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert con.execute("SELECT id, path, digest FROM files").fetchall() == files  # not rebuilt
        (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'fts'").fetchone()
        assert "detail=none" in sql
    finally:
        con.close()
    index = MemoryIndex(ws).open()
    assert [index.search(query, limit=10) for query in queries] == before
    assert [hit.line_number for hit in index.search("v1.0", limit=10)] == [6]
    index.close()


def test_a_damaged_pairs_table_is_rebuilt_from_the_files(tmp_path) -> None:
    ws, index = _indexed(tmp_path)
    right = [index.search(query, limit=10) for query in ("数据库", "河边", "deploy")]
    index.close()
    con = sqlite3.connect(ws.index_dir / "memory_index.db", isolation_level=None)
    try:  # every leaf of the pairs' posting lists overwritten (the structure record kept)
        con.execute("UPDATE pairs_data SET block = randomblob(length(block)) WHERE id > 10")
    finally:
        con.close()
    index = MemoryIndex(ws).open()
    with pytest.warns(RuntimeWarning, match="rebuilt from the files"):
        assert index.search("数据库", limit=10) == right[0]
    assert [index.search(q, limit=10) for q in ("数据库", "河边", "deploy")] == right
    index.close()
