"""The write side of the SQLite engine: the files table and per-file diffs.

Each file is synced in one short write transaction (``BEGIN IMMEDIATE``). A file that only
grew is parsed from its last unit on (:meth:`SqliteFiles.sync_tail` reads only that much of
it, :mod:`memdir.index._append`); anything else is read whole and diffed against its rows, so
only new or changed units are written.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from memdir.index._append import Chain, TailRead, TailState, fence_lines, line_start
from memdir.index._diff import diff_units
from memdir.index._engine import FileInfo, FileSnapshot, SyncResult
from memdir.index._fts import clear, index_rows, merge, segments, unindex_rows
from memdir.index._markdown import ParsedFile, Unit, ends_in_fence, parse_markdown
from memdir.index._paths import digest, ledger_day
from memdir.index._schema import LINE_BITS, immediate, is_busy, is_unwritable
from memdir.index._unit_terms import stored_terms

__all__ = ["SqliteFiles", "file_range", "insert_units"]

logger = logging.getLogger("memdir.index")


def insert_units(con: sqlite3.Connection, units: Sequence[tuple[int, int, int, str]]) -> None:
    """Store ``(row id, line_end, head, content)`` units, with what ranking reads of them
    (:func:`memdir.index._unit_terms.unit_terms`), and index their words."""
    con.executemany(
        "INSERT INTO units(id, line_end, head, content, words, terms) VALUES (?, ?, ?, ?, ?, ?)",
        [(rowid, end, head, text, *stored_terms(text)) for rowid, end, head, text in units],
    )
    index_rows(con, [(rowid, content) for rowid, _, _, content in units])


def file_range(file_id: int) -> tuple[int, int]:
    """The row ids of one file's units: ``[lo, hi)``."""
    return file_id << LINE_BITS, (file_id + 1) << LINE_BITS


def _file_kind(path: str) -> tuple[int | None, bool, bool]:
    """``(day ordinal, archived, curated)`` from a workspace-relative path."""
    day = ledger_day(path)
    return day, path.startswith("memory/archive/"), path == "MEMORY.md"


class SqliteFiles:
    """Files and their units in SQLite: the engine's writes (and the files table it reads)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con
        self._files_by_id: dict[int, FileInfo] | None = None
        self._data_version = -1
        self._reading = False  # inside a snapshot
        self._checked = False  # ... whose data version was read already

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
        self._reading, self._checked = True, False
        try:
            yield
        finally:
            self._reading = self._checked = False
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
        """The files by id, read again when another connection changed the database.

        Inside a :meth:`snapshot` the answer cannot change, so the version is read once.
        """
        if self._checked and self._files_by_id is not None:
            return self._files_by_id
        version = self._con.execute("PRAGMA data_version").fetchone()[0]
        if self._files_by_id is None or version != self._data_version:
            self._files_by_id = {info.id: info for info in self._file_rows()}
            self._data_version = version
        self._checked = self._reading
        return self._files_by_id

    def _last_unit(self, file_id: int) -> tuple[int, int] | None:
        """``(line, head)`` of the last unit of a file, if it has one."""
        lo, hi = file_range(file_id)
        row = self._con.execute(
            "SELECT id, head FROM units WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT 1",
            (lo, hi),
        ).fetchone()
        return None if row is None else (row[0] - lo, row[1])

    def _tail_state(self, path: str) -> tuple[FileInfo, TailState] | None:
        found = self._file_rows("WHERE path = ?", (path,))
        if not found:
            return None
        row = self._con.execute(
            "SELECT inode, chain_at, chain, tail_line, tail_at FROM files WHERE id = ?",
            (found[0].id,),
        ).fetchone()
        if row is None or any(value is None for value in row):
            return None
        inode, chain_at, chain, tail_line, tail_at = row
        return found[0], TailState(inode, Chain(chain_at, bytes(chain)), tail_line, tail_at)

    def _save(
        self,
        file_id: int,
        *,
        mtime_ns: int,
        size: int,
        digest: bytes,
        units: int,
        tail: TailState | None,
    ) -> None:
        values: tuple[object, ...] = (None,) * 5
        if tail is not None:
            chain = tail.chain
            values = (tail.inode, chain.at, chain.state, tail.tail_line, tail.tail_at)
        self._con.execute(
            "UPDATE files SET mtime_ns = ?, size = ?, digest = ?, units = ?, inode = ?,"
            " chain_at = ?, chain = ?, tail_line = ?, tail_at = ? WHERE id = ?",
            (mtime_ns, size, digest, units, *values, file_id),
        )

    def _whole_tail(self, file_id: int, snap: FileSnapshot) -> TailState | None:
        """The tail state of a file read whole (``None``: not from disk, or in a fence)."""
        last = self._last_unit(file_id)
        if snap.size < 0 or snap.inode < 0 or last is None:
            return None
        at = line_start(snap.data, last[0])
        if at is None or fence_lines(memoryview(snap.data)[:at]) % 2:
            return None
        chain = Chain().extend(snap.data, 0)
        return TailState(snap.inode, chain, last[0], at)

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
                stored = self._tail_state(path)
                if stored is not None and snap.inode >= 0:
                    tail: TailState | None = replace(stored[1], inode=snap.inode)
                else:  # same bytes, same rows: a stored state still holds
                    tail = self._whole_tail(info.id, snap)
                self._save(
                    info.id,
                    mtime_ns=snap.mtime_ns,
                    size=snap.size,
                    digest=snap.digest,
                    units=info.units,
                    tail=tail,
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
                grown = None if force else self._appended_tail(info, snap)
                parsed = grown[1] if grown else snap.parse()
                first = grown[0] if grown else 1
                inserted, replaced = self._apply_diff(file_id, parsed.units, first, force=force)
                self._write_headings(file_id, parsed.headings, first)
                count = (info.units - replaced if grown else 0) + len(parsed.units)
            self._save(
                file_id,
                mtime_ns=snap.mtime_ns,
                size=snap.size,
                digest=snap.digest,
                units=count,
                tail=self._whole_tail(file_id, snap),
            )
            return SyncResult(inserted, count, changed=True)

    def confirm(self, path: str, snap: FileSnapshot) -> bool:
        """Record the stat of a file read outside any transaction and found unchanged.

        Only if the stored digest and size are still those of ``snap`` (no other writer
        changed the rows meanwhile); ``False`` otherwise. The file is compared before the
        lock is taken, so the write lock is held for one ``UPDATE``.
        """
        with self._write() as con:
            cursor = con.execute(
                "UPDATE files SET mtime_ns = ?, inode = coalesce(?, inode)"
                " WHERE path = ? AND digest = ? AND size = ?",
                (
                    snap.mtime_ns,
                    snap.inode if snap.inode >= 0 else None,
                    path,
                    snap.digest,
                    snap.size,
                ),
            )
            return cursor.rowcount == 1

    def sync_tail(
        self,
        path: str,
        read: Callable[[int, TailState, int], TailRead | None],
        *,
        mark: int | None = None,
    ) -> SyncResult | None:
        """Index what was appended to a file since it was indexed, reading only its end.

        ``read(offset, state, size)`` returns the file's bytes from ``offset`` on, or
        ``None`` unless it is still the file of ``state`` and at least ``size`` bytes long.
        ``None`` comes back when the stored state does not allow it (no state yet, another
        file, one that shrank or did not grow, or whose old end changed): then
        :meth:`sync_file` must read the file whole. With ``mark`` (a byte offset),
        :attr:`SyncResult.line` is the number of the line that starts there (and a file
        that did not grow is taken as indexed).
        """
        with self._write() as con:
            stored = self._tail_state(path)
            if stored is None:
                return None
            info, state = stored
            start = min(state.chain.at, state.tail_at, info.size if mark is None else mark)
            got = read(start, state, info.size)
            if got is None:
                return None
            data = memoryview(got.data)
            if state.chain.finish(data[state.chain.at - start : info.size - start]) != info.digest:
                return None  # the old end changed: read it whole
            last = self._last_unit(info.id)
            if last is None or last[0] != state.tail_line:
                return None
            tail_bytes = got.data[state.tail_at - start :]
            line = None if mark is None else _line_at(got, mark, state)
            # Only the end was checked: the next staleness check compares the whole file.
            mtime_ns = -1
            if got.size == info.size and mark is None:
                return None  # nothing appended: only a whole comparison says it is unchanged
            if got.size == info.size:
                con.execute("UPDATE files SET mtime_ns = ? WHERE id = ?", (mtime_ns, info.id))
                return SyncResult(0, info.units, changed=False, line=line)
            text = tail_bytes.decode("utf-8", errors="replace")
            parsed = parse_markdown(text, first_line=state.tail_line, head=last[1])
            inserted, replaced = self._apply_diff(
                info.id, parsed.units, state.tail_line, force=False
            )
            self._write_headings(info.id, parsed.headings, state.tail_line)
            count = info.units - replaced + len(parsed.units)
            chain = state.chain.extend(data[state.chain.at - start :], state.chain.at)
            new_tail: TailState | None = None
            if parsed.units:
                new_line = parsed.units[-1].start
                at = line_start(tail_bytes, new_line, first=state.tail_line)
                if at is not None and fence_lines(memoryview(tail_bytes)[:at]) % 2 == 0:
                    new_tail = TailState(state.inode, chain, new_line, state.tail_at + at)
            self._save(
                info.id,
                mtime_ns=mtime_ns,
                size=got.size,
                digest=chain.finish(data[chain.at - start :]),
                units=count,
                tail=new_tail,
            )
            return SyncResult(inserted, count, changed=True, line=line)

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
        last = self._last_unit(info.id)
        if last is None:
            return None
        first = last[0]
        lines = snap.text.split("\n")
        if ends_in_fence("\n".join(lines[: first - 1])):
            return None  # the last unit is a line of code: the parser state is not fresh
        tail = "\n".join(lines[first - 1 :])
        return first, parse_markdown(tail, first_line=first, head=last[1])

    def _insert_new(self, file_id: int, units: Sequence[Unit]) -> int:
        base = file_id << LINE_BITS
        con = self._con
        insert_units(con, [(base | u.start, u.end, u.head, u.content) for u in units])
        return len(units)

    def _apply_diff(
        self, file_id: int, units: Sequence[Unit], first: int, *, force: bool
    ) -> tuple[int, int]:
        """Make the rows from line ``first`` on equal ``units``; ``(inserted, old rows)``."""
        lo, hi = file_range(file_id)
        con = self._con
        old = {
            row[0]: (row[1], row[2], row[3])
            for row in con.execute(
                "SELECT id, line_end, head, content FROM units WHERE id >= ? AND id < ?",
                (lo | first, hi),
            )
        }
        diff = diff_units(old, {lo | u.start: u for u in units}, force=force)
        if diff.gone:
            unindex_rows(con, diff.gone)
            con.executemany("DELETE FROM units WHERE id = ?", [(rowid,) for rowid, _ in diff.gone])
        if diff.heads:
            con.executemany("UPDATE units SET head = ? WHERE id = ?", diff.heads)
        return self._insert_new(file_id, diff.fresh), len(old)

    def _write_headings(self, file_id: int, headings: dict[int, str], first: int = 1) -> None:
        """Make the headings from line ``first`` on equal ``headings``."""
        lo, hi = file_range(file_id)
        con = self._con
        old = dict(
            con.execute("SELECT id, text FROM headings WHERE id >= ? AND id < ?", (lo | first, hi))
        )
        new = {lo | line: text for line, text in headings.items()}
        if old != new:
            con.execute("DELETE FROM headings WHERE id >= ? AND id < ?", (lo | first, hi))
            con.executemany("INSERT INTO headings(id, text) VALUES (?, ?)", list(new.items()))

    def _drop_rows(self, file_id: int) -> None:
        lo, hi = file_range(file_id)
        con = self._con
        rows = con.execute(
            "SELECT id, content FROM units WHERE id >= ? AND id < ?", (lo, hi)
        ).fetchall()
        unindex_rows(con, rows)
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

    def segments(self) -> int:
        """How many segments the full-text index is made of (each search looks in each)."""
        return segments(self._con)

    def optimize(self, *, above: int = 1, compact: bool = False) -> bool:
        """Merge the full-text index into one segment if it has more than ``above``.

        FTS5 adds a segment per write transaction and merges them only in part, so a term is
        looked up once per segment: after a build of a million lines (11 segments) the
        posting reads of a search take a third less time once merged. Holds the write lock
        while it runs (about 1 s per million lines). With ``compact``, the pages the old
        segments held are then given back to the file system (``VACUUM``, when they are over
        2 % of the file; skipped if there is no room for the copy it makes). Returns
        whether it merged.
        """
        if self.segments() <= above:
            return False
        with self._write() as con:
            merge(con)
        if compact:
            self._compact()
        return True

    def _compact(self) -> None:
        con = self._con
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        if free * 50 <= pages:
            return
        try:
            con.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            if not (is_busy(exc) or is_unwritable(exc)):
                raise
            logger.info("index: not compacted after merging (%s)", exc)
        self._files_by_id = None

    def reset(self) -> None:
        """Drop every row (a full rebuild follows)."""
        with self._write() as con:
            clear(con)
            con.execute("DELETE FROM units")
            con.execute("DELETE FROM headings")
            con.execute("DELETE FROM files")


def _line_at(got: TailRead, mark: int, state: TailState) -> int | None:
    """The number of the line starting at byte ``mark``, counted from the last unit's line."""
    if mark < got.offset or mark > got.size:
        return None
    data = got.data
    if mark >= state.tail_at:
        return state.tail_line + data.count(b"\n", state.tail_at - got.offset, mark - got.offset)
    return state.tail_line - data.count(b"\n", mark - got.offset, state.tail_at - got.offset)
