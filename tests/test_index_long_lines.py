"""Long lines (a page of an assistant's answer, code and all) beside short ones.

A long line holds many words by its length alone: it must not outrank the short line that
states what was asked just because it mentions every word somewhere. What ranking needs of a
line (its length, where its words stand) is stored with it when it is indexed, the same in
SQLite and PostgreSQL; an index made before that is upgraded in place.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir.index import MemoryIndex, SearchHit, _rank
from memdir.index._engine import FileInfo, StoredRow
from memdir.index._forms import word_key
from memdir.index._rank import positions_of, query_words
from memdir.index._schema import SCHEMA_VERSION
from memdir.index._sqlite import SqliteEngine
from memdir.index._text import fold
from memdir.index._unit_terms import LONG, fast_tokens, stored_terms, unit_terms
from memdir.workspace import Workspace

DAY = "memory/2026-03-02.md"
FACT = "- user: I moved the nightly backups to the Oslo box last Friday."
FILLER = (
    "Here is a complete walkthrough. First, create the module and import what you need: "
    "`import os, sys, json, logging, pathlib, subprocess, datetime`. Then define a config "
    "class with fields for the host, the port, the retention policy and the schedule; "
    "validate them in `__post_init__` and raise a clear error for a bad value. Next, write "
    "the runner: it opens a connection, streams the dump in chunks, checks each checksum, "
    "retries twice with back-off and logs how long every step took. "
)
ANSWER = (
    "- assistant: Great question! Database backups deserve care. "
    + FILLER * 4
    + "Whether your database lives here or the backups run nightly, the same steps apply; "
    + FILLER * 3
    + "If you ever moved things to another server (Oslo, say) or changed what runs on Friday, "
    + "update the schedule accordingly, and test that the database backups restore. "
    + FILLER * 4
    + "In short: database backups are only as good as the last restore you tried."
)
OTHERS = [
    "- user: can you review my retry logic for the uploader?",
    "- assistant: Sure, here is the review. " + FILLER * 8,
    "- user: the staging server is slow again today",
    "- assistant: Slow servers have many causes. " + FILLER * 9,
    "- user: I prefer short answers with code first",
    "- assistant: Noted: code first, then a short explanation. " + FILLER * 7,
]
QUESTION = "Where did I move the database backups?"


def _write(ws: Workspace) -> None:
    ws.write_text(DAY, "\n".join([*OTHERS, ANSWER, FACT, *OTHERS]) + "\n")


def _lines(hits: list[SearchHit]) -> list[int]:
    return [hit.line_number for hit in hits]


def test_a_short_statement_of_the_fact_beats_a_long_answer_mentioning_every_word(
    ws: Workspace,
) -> None:
    _write(ws)
    with MemoryIndex(ws) as index:
        index.refresh()
        hits = index.search(QUESTION, limit=5)
    assert len(ANSWER.split()) > 300  # a page of an answer: every question word is in it
    assert [hit.content for hit in hits[:1]] == [FACT]
    assert ANSWER in [hit.content for hit in hits]  # still found, below the fact


def test_a_long_line_is_stored_with_where_its_words_stand(ws: Workspace) -> None:
    """A search reads a long line's stored terms, not its text; a short line stores none."""
    _write(ws)
    with MemoryIndex(ws) as index:
        index.refresh()
    con = sqlite3.connect(ws.index_dir / "memory_index.db")
    try:
        rows = con.execute("SELECT content, words, terms FROM units").fetchall()
        stored = {content: (words, terms) for content, words, terms in rows}
    finally:
        con.close()
    words, terms = stored[ANSWER]
    assert words > LONG
    assert terms.startswith("'assist':1 ") and "'oslo':" in terms and "'backup':" in terms
    assert stored[FACT] == (12, "")


def _without_terms(path: Path) -> None:
    """Turn a current index back into what version 4 left: units without words or terms."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("ALTER TABLE units DROP COLUMN words")
        con.execute("ALTER TABLE units DROP COLUMN terms")
        con.execute("PRAGMA user_version = 4")
    finally:
        con.close()


def test_an_index_made_before_the_stored_terms_is_upgraded_in_place(ws: Workspace) -> None:
    _write(ws)
    queries = (QUESTION, "retry back-off", "Oslo", "staging server slow")
    with MemoryIndex(ws) as index:
        index.refresh()
        before = [index.search(query, limit=10) for query in queries]
    path = ws.index_dir / "memory_index.db"
    engine = SqliteEngine.open_readonly(path)
    files = engine.files()
    engine.close()
    _without_terms(path)
    upgraded, problem = SqliteEngine.open(path)
    assert upgraded is not None, problem
    assert upgraded.files() == files  # migrated in place, not rebuilt
    upgraded.close()
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        counts = con.execute(
            "SELECT sum(terms != ''), sum(words > ?) FROM units", (LONG,)
        ).fetchone()
        assert counts == (7, 7)  # the long answers, filled in from their text
    finally:
        con.close()
    with MemoryIndex(ws) as index:
        assert [index.search(query, limit=10) for query in queries] == before


def test_postgresql_ranks_long_lines_as_sqlite_does(tmp_path: Path, pg_url: str) -> None:
    local = Workspace(tmp_path / "ws", tz="UTC")
    remote = Workspace(pg_url, tz="UTC")
    zh = "我们讨论了数据库迁移方案 🎉 先备份再切换，" * 30
    for ws in (local, remote):
        _write(ws)
        ws.write_text("memory/2026-03-03.md", f"- {zh}\n- 数据库迁移推迟到周五 🎉\n")
    queries = (
        QUESTION,
        "retry back-off jitter",
        "Oslo server Friday",
        "code first",
        "数据库迁移 🎉",
    )
    with MemoryIndex(local) as on_files, MemoryIndex(remote) as in_pg:
        on_files.refresh()
        in_pg.refresh()
        for query in queries:
            expected = on_files.search(query, limit=10)
            got = in_pg.search(query, limit=10)
            assert [(h.line_number, h.content) for h in got] == [
                (h.line_number, h.content) for h in expected
            ]
            assert [h.score for h in got] == pytest.approx([h.score for h in expected])
        assert on_files.search(QUESTION, limit=1)[0].content == FACT


_WORDS = ["bought", "buy", "buying", "left", "leaves", "Oslo", "café", "数据", "库", "🎉", "v1.0"]


@given(
    st.lists(st.sampled_from([*_WORDS, "the", "x" * 3000, "and", "code"]), max_size=80),
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4),
)
def test_a_line_read_again_gives_what_its_stored_terms_give(
    words: list[str], asked: list[str]
) -> None:
    """The SQLite index reads a short line's text again where PostgreSQL reads its stored
    terms: both must find the query's words at the same places."""
    content = "- " + " ".join(words)
    keys = list(dict.fromkeys(word_key(fold(t)) for w in asked for t in fast_tokens(w)))
    query = query_words(keys)
    count, terms = unit_terms(content)
    info = FileInfo(id=1, path="memory/2026-03-02.md", mtime_ns=0, size=0, digest=b"",
                    day=None, archived=False, curated=False)  # fmt: skip
    row = StoredRow(rowid=1, file=info, line_number=1, line_end=1, head=0, heading=None,
                    content=content, words=count)  # fmt: skip
    assert positions_of(replace(row, terms=terms), query) == positions_of(row, query)


def _lexemes(literal: str) -> dict[str, str]:
    return dict(item.rsplit(":", 1) for item in literal.split())


@given(st.lists(st.sampled_from([*_WORDS, "runs", "running", "the", "x" * 600]), max_size=300))
def test_sqlite_stores_a_long_lines_words_where_postgresql_does(words: list[str]) -> None:
    """The terms SQLite stores for a long line are PostgreSQL's, less the CJK n-grams."""
    content = " ".join(["padding"] * (LONG + 1) + words)
    count, stored = stored_terms(content)
    pg_count, pg_terms = unit_terms(content)
    grams = {k for k in _lexemes(pg_terms) if len(k) > 3 and not k.strip("'").isascii()}
    assert count == pg_count
    assert _lexemes(stored) == {k: v for k, v in _lexemes(pg_terms).items() if k not in grams}


@pytest.mark.parametrize("pre_length", [True, False])
def test_a_short_statement_is_found_among_many_newer_pages_that_mention_every_word(
    any_ws: Workspace, monkeypatch: pytest.MonkeyPatch, pre_length: bool
) -> None:
    # The candidates a search scores are chosen by the query words each line holds: forty
    # newer pages holding all of them would take every place, and the short line that says
    # it (without "database") would never be scored, unless the choice knows their length.
    monkeypatch.setattr(_rank, "DEFAULT", replace(_rank.DEFAULT, pre_length=pre_length))
    chat = [f"- user: note {n} on the allotment: the beans need water" for n in range(200)]
    any_ws.write_text("memory/2026-03-01.md", "\n".join([*chat, FACT]) + "\n")
    for day in range(2, 6):
        pages = [ANSWER.replace("Great question!", f"Answer {day}-{n}.") for n in range(10)]
        any_ws.write_text(f"memory/2026-03-{day:02d}.md", "\n".join(pages) + "\n")
    with MemoryIndex(any_ws) as index:
        index.refresh()
        hits = index.search(QUESTION, limit=5)
    found = [hit.content for hit in hits]
    if pre_length:
        assert found[0] == FACT
    else:
        assert FACT not in found  # what the length in the choice is for
