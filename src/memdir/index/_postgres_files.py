"""The write side of the PostgreSQL engine: the index's files rows and per-file diffs.

Each file is synced in one transaction that first locks the file's row of ``index_files``
(creating it if need be), then reads the file through the workspace, diffs it against its
stored units and writes only what changed. Processes and hosts syncing the same file therefore
take turns, and the last one indexes the newest content; files of other namespaces, or other
files, never wait for each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, LiteralString

from memdir.index._diff import diff_units
from memdir.index._engine import FileInfo, FileSnapshot, SyncResult
from memdir.index._markdown import ParsedFile, Unit
from memdir.index._paths import ledger_day
from memdir.index._pg_terms import tsvector_of
from memdir.index._schema import LINE_BITS
from memdir.index._sqlite_files import file_range

if TYPE_CHECKING:
    import psycopg

    from memdir.index._append import TailRead, TailState

__all__ = ["PgFiles"]

_FILE_COLUMNS = "id, path, mtime_ns, size, digest, day, archived, curated, units, words"
_VACUUM_EVERY = 10_000  # rows written before the postings are vacuumed (index-only scans)
_ANALYZE_EVERY = 50_000  # rows written before the planner's statistics are refreshed


def _statements(schema: str) -> dict[str, str]:
    s = f'"{schema}"'
    f, u, h = f"{s}.index_files", f"{s}.index_units", f"{s}.index_headings"
    p = f"{s}.index_postings"
    # Units are deleted with their postings in one statement (the trigger of migration 5
    # writes the postings of inserted units).
    unpost = (
        f" RETURNING ns, id, terms) DELETE FROM {p} p USING gone g,"
        " unnest(tsvector_to_array(g.terms)) AS l(lexeme)"
        " WHERE p.ns = g.ns AND p.lexeme = l.lexeme AND p.id = g.id"
    )
    return {
        "stamp": f"SELECT count(*), coalesce(max(stamp), 0) FROM {f} WHERE ns = %s",
        "files": f"SELECT {_FILE_COLUMNS} FROM {f} WHERE ns = %s",
        "claim": f"INSERT INTO {f} (ns, path, mtime_ns, size, digest, day, archived, curated)"
        " VALUES (%s, %s, -1, -1, '', %s, %s, %s) ON CONFLICT (ns, path) DO NOTHING RETURNING id",
        "locked": f"SELECT {_FILE_COLUMNS} FROM {f} WHERE ns = %s AND path = %s FOR UPDATE",
        "save": f"UPDATE {f} SET mtime_ns = %s, size = %s, digest = %s, units = %s, words = %s,"
        f" stamp = nextval('{s}.index_stamps') WHERE id = %s",
        "confirm": f"UPDATE {f} SET mtime_ns = %s, stamp = nextval('{s}.index_stamps')"
        " WHERE ns = %s AND path = %s AND digest = %s AND size = %s",
        "drop_file": f"DELETE FROM {f} WHERE id = %s",
        "units": f"SELECT id, line_end, head, content, words FROM {u}"
        " WHERE ns = %s AND id >= %s AND id < %s",
        "drop_units": f"WITH gone AS (DELETE FROM {u} WHERE ns = %s AND id = ANY(%s){unpost}",
        "drop_range": f"WITH gone AS (DELETE FROM {u} WHERE ns = %s AND id >= %s AND id < %s"
        f"{unpost}",
        "heads": f"UPDATE {u} SET head = v.head FROM unnest(%s::int[], %s::bigint[]) AS v(head, id)"
        f" WHERE {u}.ns = %s AND {u}.id = v.id",
        "copy": f"COPY {u} (ns, id, line_end, head, words, content, terms) FROM STDIN",
        "headings": f"SELECT id, text FROM {h} WHERE ns = %s AND id >= %s AND id < %s",
        "drop_headings": f"DELETE FROM {h} WHERE ns = %s AND id >= %s AND id < %s",
        "add_headings": f"INSERT INTO {h} (ns, id, text) SELECT %s, * FROM unnest(%s::bigint[],"
        " %s::text[])",
        "reset_files": f"DELETE FROM {f} WHERE ns = %s",
        "reset_units": f"DELETE FROM {u} WHERE ns = %s",
        "reset_postings": f"DELETE FROM {p} WHERE ns = %s",
        "reset_headings": f"DELETE FROM {h} WHERE ns = %s",
        "vacuum": f"VACUUM {p}",
        "analyze": f"ANALYZE {p}, {u}",
    }


def _info(row: Sequence[Any]) -> FileInfo:
    return FileInfo(
        id=row[0],
        path=row[1],
        mtime_ns=row[2],
        size=row[3],
        digest=bytes(row[4]),
        day=row[5],
        archived=row[6],
        curated=row[7],
        units=row[8],
    )


class PgFiles:
    """Files and their units in PostgreSQL: the engine's writes (and the files it reads)."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str, ns: str) -> None:
        self._conn = conn
        self.ns = ns
        self.schema = schema
        self._sql = _statements(schema)
        self._stamp: tuple[int, int] | None = None
        self._files_by_id: dict[int, FileInfo] = {}
        self._words = 0
        self._in_snapshot = False
        self._checked = False  # the files were checked inside the current snapshot
        self._written = 0  # rows written since the postings were last vacuumed
        self._unanalyzed = 0  # rows written since the statistics were last refreshed

    def q(self, name: str) -> LiteralString:
        """The statement ``name`` (the schema name is checked: only ``[a-z0-9_]``)."""
        return self._sql[name]

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @property
    def broken(self) -> bool:
        """Whether the connection is gone (the engine must be opened again)."""
        return self._conn.closed or self._conn.broken

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self) -> Iterator[psycopg.Cursor[Any]]:
        with self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read-only, repeatable-read transaction: every query inside sees one state."""
        if self._in_snapshot:
            yield
            return
        with self._conn.transaction():
            self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._in_snapshot, self._checked = True, False
            try:
                yield
            finally:
                self._in_snapshot = False

    # -- files --------------------------------------------------------------------------

    def files(self) -> dict[str, FileInfo]:
        """Every indexed file by workspace-relative path."""
        return {info.path: info for info in self._by_id().values()}

    def files_by_id(self) -> dict[int, FileInfo]:
        """Every indexed file by id (cached until the files rows change)."""
        return self._by_id()

    def _by_id(self) -> dict[int, FileInfo]:
        if self._in_snapshot and self._checked:
            return self._files_by_id
        row = self._conn.execute(self.q("stamp"), (self.ns,)).fetchone()
        stamp = (int(row[0]), int(row[1])) if row is not None else (0, 0)
        if stamp != self._stamp:
            rows = self._conn.execute(self.q("files"), (self.ns,)).fetchall()
            self._files_by_id = {r[0]: _info(r) for r in rows}
            self._words = sum(int(r[9]) for r in rows)
            self._stamp = stamp
        self._checked = self._in_snapshot
        return self._files_by_id

    def words(self) -> int:
        """Tokens held by every unit of the namespace (for the average unit length)."""
        self._by_id()
        return self._words

    # -- syncing ------------------------------------------------------------------------

    def sync_file(
        self, path: str, load: Callable[[], FileSnapshot | None], *, force: bool = False
    ) -> SyncResult:
        """Diff one file against its stored rows and write only what changed (one txn)."""
        written = 0
        with self._write() as cur:
            day = ledger_day(path)
            kind = (day, path.startswith("memory/archive/"), path == "MEMORY.md")
            cur.execute(self.q("claim"), (self.ns, path, *kind))
            claimed = cur.fetchone()
            if claimed is not None:
                file_id, info, words = int(claimed[0]), None, 0
            else:
                cur.execute(self.q("locked"), (self.ns, path))
                row = cur.fetchone()
                assert row is not None  # the row exists and is locked by us
                info, words = _info(row), int(row[9])
                file_id = info.id
            snap = load()  # under the row lock: the last writer indexes the newest content
            if snap is None:
                if info is not None:
                    self._drop_rows(cur, file_id)
                cur.execute(self.q("drop_file"), (file_id,))
                return SyncResult(0, 0, changed=info is not None)
            if info is not None and not force and info.digest == snap.digest:
                cur.execute(
                    self.q("save"),
                    (snap.mtime_ns, snap.size, snap.digest, info.units, words, file_id),
                )
                return SyncResult(0, info.units, changed=False)
            parsed = snap.parse()
            inserted, words = self._apply(cur, file_id, parsed, force=force, fresh=info is None)
            written = inserted
            cur.execute(
                self.q("save"),
                (snap.mtime_ns, snap.size, snap.digest, len(parsed.units), words, file_id),
            )
        self._analyze_after(written)
        return SyncResult(inserted, len(parsed.units), changed=True)

    def _apply(
        self,
        cur: psycopg.Cursor[Any],
        file_id: int,
        parsed: ParsedFile,
        *,
        force: bool,
        fresh: bool,
    ) -> tuple[int, int]:
        """Make the file's units and headings equal ``parsed``; ``(inserted, words now)``."""
        lo, hi = file_range(file_id)
        old: dict[int, tuple[int, int, str]] = {}
        old_words: dict[int, int] = {}
        if not fresh:
            for rowid, end, head, content, count in cur.execute(self.q("units"), (self.ns, lo, hi)):
                old[rowid] = (end, head, content)
                old_words[rowid] = count
        diff = diff_units(old, {lo | u.start: u for u in parsed.units}, force=force)
        if diff.gone:
            cur.execute(self.q("drop_units"), (self.ns, [rowid for rowid, _ in diff.gone]))
        if diff.heads:
            heads, ids = zip(*diff.heads, strict=True)
            cur.execute(self.q("heads"), (list(heads), list(ids), self.ns))
        words = sum(old_words.values()) - sum(old_words[rowid] for rowid, _ in diff.gone)
        words += self._insert(cur, file_id, diff.fresh)
        self._write_headings(cur, file_id, parsed.headings, fresh=fresh)
        return len(diff.fresh), words

    def _insert(self, cur: psycopg.Cursor[Any], file_id: int, units: Sequence[Unit]) -> int:
        """Insert ``units`` (one ``COPY``); the tokens they hold."""
        if not units:
            return 0
        base = file_id << LINE_BITS
        total = 0
        with cur.copy(self.q("copy")) as copy:
            for u in units:
                count, terms = tsvector_of(u.content)
                total += count
                copy.write_row((self.ns, base | u.start, u.end, u.head, count, u.content, terms))
        return total

    def _write_headings(
        self, cur: psycopg.Cursor[Any], file_id: int, headings: dict[int, str], *, fresh: bool
    ) -> None:
        lo, hi = file_range(file_id)
        new = {lo | line: text for line, text in headings.items()}
        if not fresh:
            old = dict(cur.execute(self.q("headings"), (self.ns, lo, hi)).fetchall())
            if old == new:
                return
            cur.execute(self.q("drop_headings"), (self.ns, lo, hi))
        if new:
            cur.execute(self.q("add_headings"), (self.ns, list(new), list(new.values())))

    def _drop_rows(self, cur: psycopg.Cursor[Any], file_id: int) -> None:
        lo, hi = file_range(file_id)
        cur.execute(self.q("drop_range"), (self.ns, lo, hi))
        cur.execute(self.q("drop_headings"), (self.ns, lo, hi))

    def _analyze_after(self, written: int) -> None:
        """After many new rows, vacuum the postings and refresh the planner's statistics.

        A posting is read from the index alone only once its table page is marked all-visible
        (by a vacuum); before that every one read costs a visit to the table. A vacuum of
        pages already marked is skipped, so vacuuming often costs little.
        """
        self._written += written
        self._unanalyzed += written
        if self._written < _VACUUM_EVERY or self._conn.info.transaction_status:
            return
        self._written = 0
        names = ["vacuum"]
        if self._unanalyzed >= _ANALYZE_EVERY:
            self._unanalyzed = 0
            names.append("analyze")
        for name in names:
            with contextlib.suppress(Exception):  # not the owner: autovacuum does it
                self._conn.execute(self.q(name))

    def confirm(self, path: str, snap: FileSnapshot) -> bool:
        """Record the stamp of an unchanged file read beforehand, if its rows are as read."""
        with self._write() as cur:
            cur.execute(self.q("confirm"), (snap.mtime_ns, self.ns, path, snap.digest, snap.size))
            return cur.rowcount == 1

    def sync_tail(
        self,
        path: str,
        read: Callable[[int, TailState, int], TailRead | None],
        *,
        mark: int | None = None,
    ) -> SyncResult | None:
        """Always ``None``: a file is read whole and diffed (only changed units are written)."""
        return None

    def remove_file(self, path: str) -> bool:
        """Drop a file's rows; ``False`` when it was not indexed."""
        with self._write() as cur:
            cur.execute(self.q("locked"), (self.ns, path))
            row = cur.fetchone()
            if row is None:
                return False
            self._drop_rows(cur, int(row[0]))
            cur.execute(self.q("drop_file"), (int(row[0]),))
            return True

    def optimize(self, *, above: int = 1, compact: bool = False) -> bool:
        """Nothing to merge: posting lists are rows of one B-tree (PostgreSQL keeps it)."""
        return False

    def reset(self) -> None:
        """Drop every row of the namespace (a full rebuild follows)."""
        with self._write() as cur:
            # Files first: a sync holding a file's row finishes before its units are dropped.
            for name in ("reset_files", "reset_units", "reset_postings", "reset_headings"):
                cur.execute(self.q(name), (self.ns,))
