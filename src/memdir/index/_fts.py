"""The full-text tables of the SQLite index, and how a query's terms are looked up in them.

* ``fts`` holds every word of every unit (each CJK character a word of its own,
  :func:`memdir.index._text.index_body`), without positions (``detail=none``, 40 % of the
  size with them).
* ``pairs`` holds the words written as one that are several tokens in ``fts``
  (:func:`memdir.index._text.index_pairs`), without positions (``detail=none``), split at
  spaces only (the ``ascii`` tokenizer: every other character is part of a word): the
  adjacent character pairs of each CJK run, and Latin words with a digit joined by
  ``-./:@`` (``2026-01-05``, ``gpt-4o``, ``1.0``), each as one joined word, which is how a
  query looks such a word up. A word of letters only (``ice-cream``) is looked up in ``fts``
  as the ``AND`` of its tokens: it is also written apart (``ice cream``). A Chinese
  word of ``n`` characters is looked up there as the ``AND`` of its ``n - 1`` pairs: a
  two-character word is one posting list of the rows that hold it, where ``fts`` only knows
  the rows that hold both characters (each of ``无``, ``不``, ``是``... is in a large share of
  the Chinese rows), anywhere. The ranking reads each row's text, so a longer word whose pairs
  sit apart in a row only ever costs that row a candidate slot.

Both tables are contentless: deleting a row replays the text it was indexed with, which is
derived from the unit's stored content by pure functions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from memdir.index._text import JOINER, cjk_pairs, index_body, index_pairs, joined_word

__all__ = [
    "FTS_TABLE",
    "PAIRS_TABLE",
    "TOKENIZER",
    "add_pairs",
    "clear",
    "index_rows",
    "integrity_check",
    "match_rowids",
    "merge",
    "segments",
    "unindex_rows",
]

TOKENIZER = "porter unicode61 remove_diacritics 2"
FTS_TABLE = (
    "CREATE VIRTUAL TABLE fts USING fts5("
    f"body, content='', detail=none, columnsize=0, tokenize='{TOKENIZER}')"
)
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


def _quoted(word: str) -> str:
    return f'"{word}"'


def _written(joined: str) -> str:
    """The written word ``joined`` or one it starts (``3.11`` in ``3.11.7``, ``2026-11`` in
    ``2026-11-30``), to a joiner: an FTS5 ``OR`` of the word and a prefix query."""
    return f'("{joined}" OR "{joined}{JOINER}"*)'


def match_rowids(
    terms: Sequence[tuple[str, ...]], limit: int, within: tuple[int, int] | None = None
) -> tuple[str, list[object]]:
    """The statement and parameters for up to ``limit`` ids of rows holding every term.

    Highest ids first; ``within`` is an id range ``[lo, hi)``. CJK words of two or more
    characters are looked up in ``pairs`` (the ``AND`` of their pairs), and so are written
    words of several tokens with a digit (:func:`~memdir.index._text.joined_word`, or a
    longer written word it starts); every other term in ``fts`` (the ``AND`` of its tokens).
    When a query has both, the two ordered id lists are intersected as they are read
    (SQLite's merge of two ``ORDER BY rowid`` scans), so the walk stops at ``limit`` common
    ids.

    Raises:
        ValueError: ``terms`` holds no token.
    """
    pairs: list[str] = []
    words: list[str] = []
    for tokens in terms:
        found = cjk_pairs(tokens)
        if found is not None:
            pairs.extend(map(_quoted, found))
        elif (joined := joined_word(tokens)) is not None:
            pairs.append(_written(joined))
        else:
            words.extend(map(_quoted, tokens))
    bounds = "" if within is None else " AND rowid >= ? AND rowid < ?"
    params: list[object] = []
    scans: list[str] = []
    for table, wanted in (("pairs", pairs), ("fts", words)):
        if wanted:
            scans.append(f"SELECT rowid FROM {table} WHERE {table} MATCH ?{bounds}")
            params.append(" AND ".join(dict.fromkeys(wanted)))  # repeats dropped
            params.extend(within or ())
    if not scans:
        raise ValueError("a lookup needs at least one term")
    params.append(limit)
    return " INTERSECT ".join(scans) + " ORDER BY 1 DESC LIMIT ?", params
