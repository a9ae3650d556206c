"""SQLite FTS5 engine: per-file diffs in short write transactions, cheap candidate queries."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from memdir.index._engine import FileInfo, FileSnapshot, StoredRow, SyncResult
from memdir.index._markdown import ParsedFile, Unit, ends_in_fence, parse_markdown
from memdir.index._paths import digest, ledger_day
from memdir.index._schema import LINE_BITS, connect, immediate, prepare
from memdir.index._text import index_body

__all__ = ["SqliteEngine"]

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


def _file_range(file_id: int) -> tuple[int, int]:
    return file_id << LINE_BITS, (file_id + 1) << LINE_BITS


def _file_kind(path: str) -> tuple[int | None, bool, bool]:
    """``(day ordinal, archived, curated)`` from a workspace-relative path."""
    day = ledger_day(path)
    return day, path.startswith("memory/archive/"), path == "MEMORY.md"


class SqliteEngine:
    """The :class:`~memdir.index._engine.Engine` on stdlib ``sqlite3`` (FTS5, WAL)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con
        self._files_by_id: dict[int, FileInfo] | None = None
        self._data_version = -1

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

    def close(self) -> None:
        """Close the connection."""
        self._con.close()

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with immediate(self._con) as con:
            yield con
        self._files_by_id = None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction: every query inside sees one consistent state."""
        con = self._con
        con.execute("BEGIN")
        try:
            yield
        finally:
            if con.in_transaction:
                con.execute("COMMIT")

    # -- files --------------------------------------------------------------------------

    def _file_rows(self, where: str = "", args: Sequence[object] = ()) -> list[FileInfo]:
        rows = self._con.execute(
            "SELECT id, path, mtime_ns, size, digest, day, archived, curated, units FROM files "
            + where,
            args,
        ).fetchall()
        return [
            FileInfo(
                id=r[0],
                path=r[1],
                mtime_ns=r[2],
                size=r[3],
                digest=bytes(r[4]),
                day=r[5],
                archived=bool(r[6]),
                curated=bool(r[7]),
                units=r[8],
            )
            for r in rows
        ]

    def files(self) -> dict[str, FileInfo]:
        """Every indexed file by workspace-relative path."""
        return {info.path: info for info in self._file_rows()}

    def files_by_id(self) -> dict[int, FileInfo]:
        """Every indexed file by id (cached until the database changes)."""
        return self._by_id()

    def _by_id(self) -> dict[int, FileInfo]:
        version = self._con.execute("PRAGMA data_version").fetchone()[0]
        if self._files_by_id is None or version != self._data_version:
            self._files_by_id = {info.id: info for info in self._file_rows()}
            self._data_version = version
        return self._files_by_id

    def sync_file(
        self, path: str, load: Callable[[], FileSnapshot | None], *, force: bool = False
    ) -> SyncResult:
        """Diff one file against its stored rows and write only what changed (one txn)."""
        with self._write() as con:
            found = self._file_rows("WHERE path = ?", (path,))
            info = found[0] if found else None
            snap = load()
            if snap is None:
                if info is None:
                    return SyncResult(0, 0, changed=False)
                self._drop_rows(info.id)
                con.execute("DELETE FROM files WHERE id = ?", (info.id,))
                return SyncResult(0, 0, changed=True)
            if info is not None and not force and info.digest == snap.digest:
                con.execute(
                    "UPDATE files SET mtime_ns = ?, size = ? WHERE id = ?",
                    (snap.mtime_ns, snap.size, info.id),
                )
                return SyncResult(0, info.units, changed=False)
            if info is None:
                day, archived, curated = _file_kind(path)
                cursor = con.execute(
                    "INSERT INTO files(path, mtime_ns, size, digest, day, archived, curated, units)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (path, snap.mtime_ns, snap.size, snap.digest, day, archived, curated, 0),
                )
                file_id = int(cursor.lastrowid or 0)
                parsed = snap.parse()
                inserted = self._insert_new(file_id, parsed.units)
                self._write_headings(file_id, parsed.headings)
                count = len(parsed.units)
            else:
                file_id = info.id
                tail = None if force else self._appended_tail(info, snap)
                parsed = tail[1] if tail else snap.parse()
                first = tail[0] if tail else 1
                inserted, replaced = self._apply_diff(file_id, parsed.units, first, force=force)
                self._write_headings(file_id, parsed.headings, first)
                count = (info.units - replaced if tail else 0) + len(parsed.units)
            con.execute(
                "UPDATE files SET mtime_ns = ?, size = ?, digest = ?, units = ? WHERE id = ?",
                (snap.mtime_ns, snap.size, snap.digest, count, file_id),
            )
            return SyncResult(inserted, count, changed=True)

    def _appended_tail(self, info: FileInfo, snap: FileSnapshot) -> tuple[int, ParsedFile] | None:
        """If the file only grew at its end, parse just its tail (from the last old unit).

        Returns ``(first line parsed, parse of the tail)``, or ``None`` when the old content
        is not an unchanged prefix (or its last unit sits inside a code fence): then the whole
        file is parsed and diffed.
        """
        old = info.size
        data = snap.data
        if old <= 0 or len(data) <= old or data[old - 1 : old] != b"\n":
            return None
        if digest(data[:old]) != info.digest:
            return None
        lo, hi = _file_range(info.id)
        last = self._con.execute(
            "SELECT id, head FROM units WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT 1",
            (lo, hi),
        ).fetchone()
        if last is None:
            return None
        first = last[0] - lo
        lines = snap.text.split("\n")
        if ends_in_fence("\n".join(lines[: first - 1])):
            return None  # the last unit is a line of code: the parser state is not fresh
        tail = "\n".join(lines[first - 1 :])
        return first, parse_markdown(tail, first_line=first, head=last[1])

    def _insert_new(self, file_id: int, units: Sequence[Unit]) -> int:
        base = file_id << LINE_BITS
        con = self._con
        con.executemany(
            "INSERT INTO units(id, line_end, head, content) VALUES (?, ?, ?, ?)",
            [(base | u.start, u.end, u.head, u.content) for u in units],
        )
        con.executemany(
            "INSERT INTO fts(rowid, body) VALUES (?, ?)",
            [(base | u.start, index_body(u.content)) for u in units],
        )
        return len(units)

    def _apply_diff(
        self, file_id: int, units: Sequence[Unit], first: int, *, force: bool
    ) -> tuple[int, int]:
        """Make the rows from line ``first`` on equal ``units``; ``(inserted, old rows)``."""
        lo, hi = _file_range(file_id)
        con = self._con
        old = {
            row[0]: (row[1], row[2], row[3])
            for row in con.execute(
                "SELECT id, line_end, head, content FROM units WHERE id >= ? AND id < ?",
                (lo | first, hi),
            )
        }
        new = {lo | u.start: u for u in units}
        gone: list[tuple[int, str]] = []
        heads: list[tuple[int, int]] = []
        for rowid, (end, head, content) in old.items():
            unit = new.get(rowid)
            if force or unit is None or unit.end != end or unit.content != content:
                gone.append((rowid, content))
            elif unit.head != head:
                heads.append((unit.head, rowid))
        dropped = {rowid for rowid, _ in gone}
        fresh = [u for rowid, u in new.items() if rowid not in old or rowid in dropped]
        if gone:
            con.executemany(
                "INSERT INTO fts(fts, rowid, body) VALUES ('delete', ?, ?)",
                [(rowid, index_body(content)) for rowid, content in gone],
            )
            con.executemany("DELETE FROM units WHERE id = ?", [(rowid,) for rowid in dropped])
        if heads:
            con.executemany("UPDATE units SET head = ? WHERE id = ?", heads)
        return self._insert_new(file_id, fresh), len(old)

    def _write_headings(self, file_id: int, headings: dict[int, str], first: int = 1) -> None:
        """Make the headings from line ``first`` on equal ``headings``."""
        lo, hi = _file_range(file_id)
        con = self._con
        old = dict(
            con.execute("SELECT id, text FROM headings WHERE id >= ? AND id < ?", (lo | first, hi))
        )
        new = {lo | line: text for line, text in headings.items()}
        if old != new:
            con.execute("DELETE FROM headings WHERE id >= ? AND id < ?", (lo | first, hi))
            con.executemany("INSERT INTO headings(id, text) VALUES (?, ?)", list(new.items()))

    def _drop_rows(self, file_id: int) -> None:
        lo, hi = _file_range(file_id)
        con = self._con
        rows = con.execute(
            "SELECT id, content FROM units WHERE id >= ? AND id < ?", (lo, hi)
        ).fetchall()
        con.executemany(
            "INSERT INTO fts(fts, rowid, body) VALUES ('delete', ?, ?)",
            [(rowid, index_body(content)) for rowid, content in rows],
        )
        con.execute("DELETE FROM units WHERE id >= ? AND id < ?", (lo, hi))
        con.execute("DELETE FROM headings WHERE id >= ? AND id < ?", (lo, hi))

    def remove_file(self, path: str) -> bool:
        """Drop a file's rows; ``False`` when it was not indexed."""
        with self._write() as con:
            row = con.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
            if row is None:
                return False
            self._drop_rows(row[0])
            con.execute("DELETE FROM files WHERE id = ?", (row[0],))
            return True

    def reset(self) -> None:
        """Drop every row (a full rebuild follows)."""
        with self._write() as con:
            con.execute("INSERT INTO fts(fts) VALUES ('delete-all')")
            con.execute("DELETE FROM units")
            con.execute("DELETE FROM headings")
            con.execute("DELETE FROM files")

    # -- search -------------------------------------------------------------------------

    def newest_day(self) -> int | None:
        """The most recent ledger date in the index (proleptic ordinal), if any."""
        days = [info.day for info in self._by_id().values() if info.day is not None]
        return max(days) if days else None

    def totals(self) -> tuple[int, float]:
        """``(rows, average tokens per row)`` from FTS5's own statistics record."""
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
        _, hi = _file_range(file_id)
        here = self._con.execute(
            "SELECT count(*) FROM units WHERE id >= ? AND id < ?", (rowid, hi)
        ).fetchone()[0]
        return int(later) + int(here)

    def rowids(self, expression: str, limit: int) -> list[int]:
        """Up to ``limit`` matching row ids, highest (newest files) first, unranked."""
        rows = self._con.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (expression, limit),
        ).fetchall()
        return [row[0] for row in rows]

    def neighbors(self, rowids: Sequence[int]) -> dict[int, tuple[int | None, int | None]]:
        """The previous and next unit of the same file for each row id."""
        out: dict[int, tuple[int | None, int | None]] = {}
        for i in range(0, len(rowids), _CHUNK // 3):
            chunk = rowids[i : i + _CHUNK // 3]
            params: list[int] = []
            for rowid in chunk:
                lo, hi = _file_range(rowid >> LINE_BITS)
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

    def units_of(self, file_id: int) -> list[tuple[int, str]]:
        """``(row id, content)`` of every unit of one file, in line order."""
        lo, hi = _file_range(file_id)
        rows = self._con.execute(
            "SELECT id, content FROM units WHERE id >= ? AND id < ? ORDER BY id", (lo, hi)
        )
        return [(row[0], row[1]) for row in rows]

    def fetch(self, rowids: Sequence[int]) -> list[StoredRow]:
        """Stored rows for ``rowids`` (missing ids skipped), with file and heading."""
        files = self._by_id()
        con = self._con
        raw: list[tuple[int, int, int, str]] = []
        for i in range(0, len(rowids), _CHUNK):
            chunk = rowids[i : i + _CHUNK]
            raw.extend(
                con.execute(
                    "SELECT id, line_end, head, content FROM units WHERE id IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                )
            )
        mask = (1 << LINE_BITS) - 1
        head_ids = sorted({(rowid & ~mask) | head for rowid, _, head, _ in raw if head})
        headings: dict[int, str] = {}
        for i in range(0, len(head_ids), _CHUNK):
            chunk = head_ids[i : i + _CHUNK]
            headings.update(
                con.execute(
                    f"SELECT id, text FROM headings WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
            )
        out: list[StoredRow] = []
        for rowid, end, head, content in raw:
            info = files.get(rowid >> LINE_BITS)
            if info is None:
                continue
            out.append(
                StoredRow(
                    rowid=rowid,
                    file=info,
                    line_number=rowid & mask,
                    line_end=end,
                    head=head,
                    heading=headings.get((rowid & ~mask) | head) if head else None,
                    content=content,
                )
            )
        return out
