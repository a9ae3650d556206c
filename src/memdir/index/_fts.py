"""The full-text tables of the SQLite index, and how a query's terms are looked up in them.

* ``fts`` holds every word of every unit (each CJK character a word of its own,
  :func:`memdir.index._text.index_body`), with positions: a query phrase is matched there.
* ``pairs`` holds the adjacent character pairs of each CJK run
  (:func:`memdir.index._text.index_pairs`), without positions (``detail=none``), split at
  spaces only (the ``ascii`` tokenizer: every other character is part of a pair). A Chinese
  word of ``n`` characters is looked up there as the ``AND`` of its ``n - 1`` pairs: a
  two-character word is one posting list of the rows that hold it, where a phrase in
  ``fts`` walks the lists of both characters (each of ``无``, ``不``, ``是``... is in a large
  share of the Chinese rows) and compares positions. The ranking reads each row's text, so a
  longer word whose pairs sit apart in a row only ever costs that row a candidate slot.

Both tables are contentless: deleting a row replays the text it was indexed with, which is
derived from the unit's stored content by pure functions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from memdir.index._text import cjk_pairs, index_body, index_pairs

__all__ = [
    "PAIRS_TABLE",
    "add_pairs",
    "clear",
    "index_rows",
    "integrity_check",
    "match_rowids",
    "merge",
    "segments",
    "unindex_rows",
]

PAIRS_TABLE = (
    "CREATE VIRTUAL TABLE pairs USING fts5("
    "body, content='', detail=none, columnsize=0, tokenize='ascii')"
)
_TABLES = ("fts", "pairs")


def _pair_rows(rows: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """``(row id, pairs)`` for the ``(row id, content)`` rows that hold a pair."""
    return [(rowid, text) for rowid, content in rows if (text := index_pairs(content))]


def add_pairs(con: sqlite3.Connection, rows: Iterable[tuple[int, str]]) -> None:
    """Add the pairs of ``(row id, content)`` rows to ``pairs`` (only)."""
    con.executemany("INSERT INTO pairs(rowid, body) VALUES (?, ?)", _pair_rows(rows))


def index_rows(con: sqlite3.Connection, rows: Sequence[tuple[int, str]]) -> None:
    """Add ``(row id, content)`` rows to both tables."""
    con.executemany(
        "INSERT INTO fts(rowid, body) VALUES (?, ?)",
        [(rowid, index_body(content)) for rowid, content in rows],
    )
    add_pairs(con, rows)


def unindex_rows(con: sqlite3.Connection, rows: Sequence[tuple[int, str]]) -> None:
    """Remove ``(row id, content)`` rows, given the content they were indexed with."""
    con.executemany(
        "INSERT INTO fts(fts, rowid, body) VALUES ('delete', ?, ?)",
        [(rowid, index_body(content)) for rowid, content in rows],
    )
    con.executemany(
        "INSERT INTO pairs(pairs, rowid, body) VALUES ('delete', ?, ?)", _pair_rows(rows)
    )


def clear(con: sqlite3.Connection) -> None:
    """Empty both tables."""
    for table in _TABLES:
        con.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")


def segments(con: sqlite3.Connection) -> int:
    """The most segments either table is made of (a search looks a term up in each)."""
    return max(
        int(con.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0])
        for table in _TABLES
    )


def merge(con: sqlite3.Connection, tables: Sequence[str] = _TABLES) -> None:
    """Merge each of ``tables`` (both by default) into one segment."""
    for table in tables:
        con.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")


def integrity_check(con: sqlite3.Connection) -> None:
    """FTS5's own check of both tables (raises ``sqlite3.DatabaseError`` on damage)."""
    for table in _TABLES:
        con.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")


def _phrase(tokens: Sequence[str]) -> str:
    return '"' + " ".join(tokens) + '"'


def match_rowids(
    terms: Sequence[tuple[str, ...]], limit: int, within: tuple[int, int] | None = None
) -> tuple[str, list[object]]:
    """The statement and parameters for up to ``limit`` ids of rows holding every term.

    Highest ids first; ``within`` is an id range ``[lo, hi)``. Terms that are all CJK words
    of two or more characters are looked up in ``pairs``; any other term sends the whole
    ``AND`` to ``fts`` (its phrases), so the two tables are never joined.
    """
    pairs = [cjk_pairs(tokens) for tokens in terms]
    if None not in pairs:
        table = "pairs"
        expression = " AND ".join(_phrase([p]) for found in pairs if found for p in found)
    else:
        table = "fts"
        expression = " AND ".join(_phrase(tokens) for tokens in terms)
    params: list[object] = [expression]
    bounds = ""
    if within is not None:
        bounds = " AND rowid >= ? AND rowid < ?"
        params.extend(within)
    params.append(limit)
    sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ?{bounds} ORDER BY rowid DESC LIMIT ?"
    return sql, params
