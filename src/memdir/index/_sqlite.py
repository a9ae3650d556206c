"""SQLite FTS5 engine: per-file diffs in short write transactions, cheap candidate queries.

The writes live in :mod:`memdir.index._sqlite_files`; this module opens the database (on
disk, read-only, or a copy in memory) and answers the queries of a search.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from memdir.index._engine import FileInfo, StoredRow, UnitRow, stored_rows
from memdir.index._fts import integrity_check, match_rowids
from memdir.index._markdown import ParsedFile
from memdir.index._schema import (
    APPLICATION_ID,
    LINE_BITS,
    SCHEMA_VERSION,
    connect,
    connect_readonly,
    prepare,
)
from memdir.index._sqlite_files import SqliteFiles, file_range

__all__ = ["SqliteEngine"]

_HEADER = ("application_id", "user_version")
# Every stored text, read back: a damaged cell fails to decode only when it is read.
_TEXTS = ("SELECT content FROM units", "SELECT text FROM headings", "SELECT path FROM files")

_CHUNK = 500  # ids per IN (...) list


def _varints(data: bytes) -> list[int]:
    """Decode SQLite's big-endian varints (as FTS5 writes its averages record)."""
    out: list[int] = []
    i = 0
    while i < len(data):
        value = 0
        for n in range(9):
            if i >= len(data):
                return out
            byte = data[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        out.append(value)
    return out


class SqliteEngine(SqliteFiles):
    """The :class:`~memdir.index._engine.Engine` on stdlib ``sqlite3`` (FTS5, WAL)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        super().__init__(con)
        self._totals: tuple[dict[int, FileInfo], tuple[int, float]] | None = None
        self._within: tuple[int, int] | None = None  # row ids a search may return: [lo, hi)

    @classmethod
    def open(cls, path: Path) -> tuple[SqliteEngine | None, str | None]:
        """Open (creating or migrating) the database; ``(None, reason)`` if it is unusable.

        Raises ``sqlite3.DatabaseError`` for files that are not SQLite databases at all.
        """
        con = connect(path)
        try:
            problem = prepare(con)
        except BaseException:
            con.close()
            raise
        if problem is not None:
            con.close()
            return None, problem
        return cls(con), None

    @classmethod
    def open_readonly(cls, path: Path) -> SqliteEngine:
        """Open an existing database for reading only (a workspace that cannot be written).

        Raises:
            sqlite3.Error: it is missing, unreadable, damaged, or not a current memdir index.
        """
        con = connect_readonly(path)
        try:
            app, version = (con.execute(f"PRAGMA {name}").fetchone()[0] for name in _HEADER)
            if (app, version) != (APPLICATION_ID, SCHEMA_VERSION):
                raise sqlite3.DatabaseError("file is not a database of this memdir version")
        except BaseException:
            con.close()
            raise
        return cls(con)

    @classmethod
    def in_memory(cls, source: SqliteEngine | None = None) -> SqliteEngine:
        """A database in memory: empty, or a copy of ``source`` (read only from it)."""
        con = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            if source is not None:
                source._con.backup(con)
            problem = prepare(con)
        except BaseException:
            con.close()
            raise
        if problem is not None:  # a copy of a database that was not ours after all
            con.close()
            return cls.in_memory()
        return cls(con)

    def damage(self) -> str | None:
        """What an integrity check finds wrong with the database, or ``None``.

        The page structure (``quick_check``), the full-text tables (FTS5 ``integrity-check``)
        and that every stored text decodes.
        """
        con = self._con
        try:
            found = [row[0] for row in con.execute("PRAGMA quick_check(3)")]
            if found != ["ok"]:
                return "; ".join(str(line) for line in found).replace("\n", " ")[:200]
            integrity_check(con)
            for sql in _TEXTS:
                for _ in con.execute(sql):
                    pass
        except sqlite3.DatabaseError as exc:
            return str(exc) or type(exc).__name__
        return None

    # -- search -------------------------------------------------------------------------

    def matches(self, info: FileInfo, parsed: ParsedFile) -> bool:
        """Whether the stored units and headings of a file are exactly ``parsed``."""
        lo, hi = file_range(info.id)
        con = self._con
        rows = con.execute(
            "SELECT id, line_end, head, content FROM units WHERE id >= ? AND id < ? ORDER BY id",
            (lo, hi),
        ).fetchall()
        if rows != [(lo | u.start, u.end, u.head, u.content) for u in parsed.units]:
            return False
        headings = dict(
            con.execute("SELECT id, text FROM headings WHERE id >= ? AND id < ?", (lo, hi))
        )
        wanted = {lo | line: text for line, text in parsed.headings.items()}
        return headings == wanted and info.units == len(rows)

    def newest_day(self) -> int | None:
        """The most recent ledger date in the index (proleptic ordinal), if any."""
        days = [info.day for info in self._by_id().values() if info.day is not None]
        return max(days) if days else None

    def totals(self) -> tuple[int, float]:
        """``(rows, average tokens per row)`` from FTS5's own statistics record.

        Kept with the files mapping it was read beside: both change with every write.
        """
        files = self._by_id()
        known = self._totals
        if known is not None and known[0] is files:
            return known[1]
        found = self._read_totals()
        self._totals = (files, found)
        return found

    def _read_totals(self) -> tuple[int, float]:
        row = self._con.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
        if row is None or not row[0]:
            return 0, 0.0
        values = _varints(bytes(row[0]))
        if len(values) < 2 or values[0] <= 0:
            return 0, 0.0
        return values[0], values[1] / values[0]

    def rows_from(self, rowid: int) -> int:
        """Number of units whose id is ``rowid`` or higher (cheap: per-file counts)."""
        file_id = rowid >> LINE_BITS
        later = self._con.execute(
            "SELECT coalesce(sum(units), 0) FROM files WHERE id > ?", (file_id,)
        ).fetchone()[0]
        _, hi = file_range(file_id)
        here = self._con.execute(
            "SELECT count(*) FROM units WHERE id >= ? AND id < ?", (rowid, hi)
        ).fetchone()[0]
        return int(later) + int(here)

    def rowids(
        self,
        terms: Sequence[tuple[str, ...]],
        limit: int,
        *,
        within: tuple[int, int] | None = None,
    ) -> list[int]:
        """Up to ``limit`` row ids holding every term, highest (newest files) first, unranked.

        Each term is an FTS5 phrase (its tokens are word characters only, so nothing of a
        query's own syntax reaches FTS5); FTS5 stems them as it stemmed the rows. Chinese
        words are looked up by their character pairs (:func:`memdir.index._fts.match_rowids`).
        """
        bounds = self._within
        if within is not None:
            lo, hi = (
                within if bounds is None else (max(within[0], bounds[0]), min(within[1], bounds[1]))
            )
            if lo >= hi:
                return []
            bounds = (lo, hi)
        found = self._con.execute(*match_rowids(terms, limit, bounds)).fetchall()
        return [row[0] for row in found]

    def neighbors(self, rowids: Sequence[int]) -> dict[int, tuple[int | None, int | None]]:
        """The previous and next unit of the same file for each row id."""
        out: dict[int, tuple[int | None, int | None]] = {}
        for i in range(0, len(rowids), _CHUNK // 3):
            chunk = rowids[i : i + _CHUNK // 3]
            params: list[int] = []
            for rowid in chunk:
                lo, hi = file_range(rowid >> LINE_BITS)
                params.extend((rowid, lo, hi))
            values = ",".join("(?, ?, ?)" for _ in chunk)
            rows = self._con.execute(
                f"WITH q(id, lo, hi) AS (VALUES {values}) SELECT q.id,"
                " (SELECT max(u.id) FROM units u WHERE u.id < q.id AND u.id >= q.lo),"
                " (SELECT min(u.id) FROM units u WHERE u.id > q.id AND u.id < q.hi) FROM q",
                params,
            )
            out.update((row[0], (row[1], row[2])) for row in rows)
        return out

    def lengths(self, rowids: Sequence[int], longer: int) -> dict[int, int]:
        """The token count of each row of ``rowids`` longer than ``longer`` tokens."""
        out: dict[int, int] = {}
        for i in range(0, len(rowids), _CHUNK):
            chunk = rowids[i : i + _CHUNK]
            out.update(
                self._con.execute(
                    f"SELECT id, words FROM units WHERE id IN ({','.join('?' * len(chunk))})"
                    " AND words > ?",
                    (*chunk, longer),
                ).fetchall()
            )
        return out

    def units_of(self, file_id: int) -> list[tuple[int, int, str]]:
        """``(row id, head, content)`` of every unit of one file, in line order."""
        lo, hi = file_range(file_id)
        rows = self._con.execute(
            "SELECT id, head, content FROM units WHERE id >= ? AND id < ? ORDER BY id", (lo, hi)
        )
        return [(row[0], row[1], row[2]) for row in rows]

    def fetch(self, rowids: Sequence[int]) -> list[StoredRow]:
        """Stored rows for ``rowids`` (missing ids skipped), with file and heading."""
        files = self._by_id()
        con = self._con
        raw: list[UnitRow] = []
        headings: dict[int, str] = {}
        shift = LINE_BITS
        for i in range(0, len(rowids), _CHUNK):
            chunk = rowids[i : i + _CHUNK]
            rows = con.execute(
                "SELECT u.id, u.line_end, u.head, u.content, u.words, u.terms, h.text FROM units u"
                " LEFT JOIN headings h ON u.head != 0 AND h.id = ((u.id >> ?) << ?) | u.head"
                f" WHERE u.id IN ({','.join('?' * len(chunk))})",
                (shift, shift, *chunk),
            )
            for rowid, end, head, content, words, terms, heading in rows:
                raw.append((rowid, end, head, content, words, terms))
                if heading is not None:
                    headings[((rowid >> shift) << shift) | head] = heading
        return stored_rows(raw, files, headings)
