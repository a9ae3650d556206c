"""The session index: every logged message made searchable, kept in step with the logs.

It lives beside the memory index, in ``.index/sessions_index.db``, and uses the memory
index's storage (:class:`memdir.index._sqlite.SqliteEngine`: the same tables, the same
FTS5 tokenizer and text analysis), so :mod:`memdir.sessions._search` ranks messages with
the memory search itself. One log is one "file" of that index, one message one unit whose
line is the message's line in the log. Two tables of its own sit beside those:

* ``session_logs``: per log, the file identity and change tag seen, the byte offset up to
  which it was read (the end of its last complete line), the bytes just before that offset,
  the line and message counts, the first and last message times and a one-line summary;
* ``session_units``: per unit, the message's role, tool names and time.

Logs are append-only, so a refresh reads only what was appended to each log
(:meth:`Workspace.read_from`). A log whose identity changed (replaced), that shrank below
the offset read, or whose last 64 bytes before that offset differ (rewritten) is indexed
again from its first line; a log that is gone loses its rows. A line that is not a valid
record is skipped (it keeps its line number), never fatal; an incomplete last line waits
for the write that ends it. The database is derived data: a damaged one is deleted and
built again from the logs.

A workspace kept in PostgreSQL has no local index directory, and a local one whose
``.index/`` cannot be written has none to write: the same index is then kept in memory,
built from the logs read through the workspace on first use and brought up to date the
same way (what was appended) on each refresh.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memdir.errors import SessionLogError, WorkspaceError
from memdir.index._schema import LINE_BITS, immediate, is_corruption
from memdir.index._sqlite import SqliteEngine
from memdir.index._sqlite_files import insert_units
from memdir.messages import SUMMARY_NAME
from memdir.messages._render import clip
from memdir.sessions._catalog_db import FORMAT, SESSIONS_DB, discard, open_index
from memdir.sessions._msgtext import message_text, searchable, tool_names
from memdir.sessions._record import parse_record
from memdir.store._base import FileStat
from memdir.store._safeopen import PathMissing
from memdir.store.workspace import SESSIONS_DIR, Workspace

__all__ = ["FORMAT", "SESSIONS_DB", "SessionIndex", "SessionInfo", "SyncStats"]

logger = logging.getLogger("memdir.sessions")

LOG_SUFFIX = ".log.jsonl"
SUMMARY_CHARS = 120
_TAIL = 64  # bytes before the offset read that must be unchanged for an append
_MAX_LINE = (1 << LINE_BITS) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """One logged session, as :func:`memdir.sessions.list_session_infos` describes it.

    Attributes:
        session_id: the session id.
        path: its log, ``sessions/<id>.log.jsonl``.
        first_at: when its first logged message was written, if any is readable.
        last_at: when its last logged message was written.
        messages: how many readable messages the log holds.
        lines: how many lines the log has (a line that is not a record counts too).
        summary: the first user message, on one line and shortened (``""``: none).
    """

    session_id: str
    path: str
    first_at: datetime | None
    last_at: datetime | None
    messages: int
    lines: int
    summary: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncStats:
    """What one :meth:`SessionIndex.refresh` did.

    Attributes:
        logs_read: logs that had changed and were read (from where they were read up to).
        logs_rebuilt: of those, logs indexed again from their first line (replaced, shrunk
            or rewritten).
        logs_unchanged: logs skipped because nothing had changed.
        logs_removed: logs that are gone, whose messages were dropped.
        messages_indexed: messages added to the index.
    """

    logs_read: int = 0
    logs_rebuilt: int = 0
    logs_unchanged: int = 0
    logs_removed: int = 0
    messages_indexed: int = 0


def log_path(session_id: str) -> str:
    """The workspace-relative log of a session."""
    return f"{SESSIONS_DIR}/{session_id}{LOG_SUFFIX}"


@dataclass(slots=True, kw_only=True)
class _LogState:
    """What ``session_logs`` holds about one log."""

    file_id: int
    identity: str
    upto: int  # end of the last complete line read
    tail: bytes  # the bytes just before ``upto``: unchanged if the log was only appended to
    lines: int
    messages: int
    first_at: str | None = None
    last_at: str | None = None
    summary: str = ""


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


class SessionIndex:
    """The searchable index of a workspace's session logs (see the module notes).

    Share one per workspace (:func:`memdir.sessions.shared_session_index`); it is safe to
    use from several threads, and several processes may refresh one database at once.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.path: Path | None = workspace.index_dir / SESSIONS_DB if workspace.is_local else None
        """The database file (``None``: kept in memory)."""
        self.lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._refused: set[str] = set()  # logs that could not be read (warned once)

    def __repr__(self) -> str:
        return f"SessionIndex({self.workspace.describe()!r})"

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database (idempotent; it opens again on next use)."""
        with self.lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def connection(self) -> sqlite3.Connection:
        """The open database, opened (created, migrated, rebuilt) on first use."""
        with self.lock:
            if self._con is None:
                self._con = self._open()
            return self._con

    def _open(self) -> sqlite3.Connection:
        con, self.path = open_index(self.path)
        return con

    def recover(self, exc: sqlite3.DatabaseError) -> bool:
        """Drop a database found damaged while in use, so the next use rebuilds it.

        Returns whether ``exc`` was damage (the caller then retries once).
        """
        if not is_corruption(exc):
            return False
        with self.lock:
            self.close()
            if self.path is not None:
                discard(self.path, str(exc))
        return True

    # -- refreshing -----------------------------------------------------------------------

    def refresh(self) -> SyncStats:
        """Index what was appended to every log since the last refresh (see the module notes).

        Raises:
            WorkspaceError: the logs cannot be listed or read.
        """
        with self.lock:
            con = self.connection()
            stored = {
                row[0]: (row[1], row[2], row[3])
                for row in con.execute("SELECT session, identity, tag, size FROM session_logs")
            }
            read = rebuilt = unchanged = added = 0
            present: set[str] = set()
            for entry in self.workspace.listdir(SESSIONS_DIR):
                session_id = _session_of(entry.name) if entry.kind == "file" else None
                if session_id is None:
                    continue
                st = entry.stat or self.workspace.stat(log_path(session_id))
                if st is None:
                    continue
                present.add(session_id)
                if stored.get(session_id) == (st.identity, st.tag, st.size):
                    unchanged += 1
                    continue
                try:
                    count, again = self._sync_log(con, session_id, st)
                except WorkspaceError as exc:  # e.g. a symlink out of sessions/: never read
                    present.discard(session_id)
                    if session_id not in self._refused:
                        self._refused.add(session_id)
                        logger.warning("session log %s skipped: %s", session_id, exc)
                    continue
                read += 1
                rebuilt += again
                added += count
            gone = stored.keys() - present
            for session_id in gone:
                with immediate(con):
                    self._drop(con, session_id)
            return SyncStats(
                logs_read=read,
                logs_rebuilt=rebuilt,
                logs_unchanged=unchanged,
                logs_removed=len(gone),
                messages_indexed=added,
            )

    def _sync_log(self, con: sqlite3.Connection, session_id: str, st: FileStat) -> tuple[int, bool]:
        """Index what is new in one log; ``(messages added, indexed again from line 1)``."""
        rel = log_path(session_id)
        with immediate(con):  # the state is read under the write lock: one writer per log
            row = con.execute(
                "SELECT file_id, identity, indexed_upto, tail, lines, messages, first_at,"
                " last_at, summary FROM session_logs WHERE session = ?",
                (session_id,),
            ).fetchone()
            state = None
            if row is not None:
                state = _LogState(
                    file_id=row[0],
                    identity=row[1],
                    upto=row[2],
                    tail=bytes(row[3]),
                    lines=row[4],
                    messages=row[5],
                    first_at=row[6],
                    last_at=row[7],
                    summary=row[8],
                )
            data: bytes | None = None
            again = False
            try:
                if state is not None:
                    if state.identity == st.identity and st.size >= state.upto:
                        tail = state.tail
                        chunk = self.workspace.read_from(rel, state.upto - len(tail))
                        if chunk[: len(tail)] == tail:
                            data = chunk[len(tail) :]
                    if data is None:  # replaced, shrunk or rewritten: from the start
                        self._drop(con, session_id)
                        state, again = None, True
                if data is None:
                    data = self.workspace.read_from(rel, 0)
            except PathMissing:  # removed meanwhile
                self._drop(con, session_id)
                return 0, again
            if state is None:
                cursor = con.execute(
                    "INSERT INTO files(path, mtime_ns, size, digest, day, archived, curated,"
                    " units) VALUES (?, ?, ?, ?, NULL, 0, 0, 0)",
                    (rel, st.mtime_ns, st.size, b""),
                )
                state = _LogState(
                    file_id=int(cursor.lastrowid or 0),
                    identity=st.identity,
                    upto=0,
                    tail=b"",
                    lines=0,
                    messages=0,
                )
            return self._add(con, session_id, st, state, data), again

    def _add(
        self, con: sqlite3.Connection, session_id: str, st: FileStat, state: _LogState, data: bytes
    ) -> int:
        """Index the complete lines of ``data`` (the log from ``state.upto`` on)."""
        complete = data[: data.rfind(b"\n") + 1]
        base = state.file_id << LINE_BITS
        lines, messages = state.lines, state.messages
        first_at, last_at, summary = state.first_at, state.last_at, state.summary
        units: list[tuple[int, int, int, str]] = []
        extra: list[tuple[int, str, str, str]] = []
        for raw in complete.split(b"\n")[:-1]:
            lines += 1
            if not raw.strip() or lines > _MAX_LINE:
                continue
            record, _reason = parse_record(raw, lines)
            if record is None:
                continue  # not a record: skipped, and keeps its line number
            msg = record.msg
            messages += 1
            at = msg.created_at.astimezone(UTC).isoformat()
            first_at = first_at or at
            last_at = at if last_at is None or at > last_at else last_at
            if not summary and msg.role == "user" and msg.name != SUMMARY_NAME:
                summary = clip(" ".join(searchable(msg.text).split()), SUMMARY_CHARS)
            text = message_text(msg)
            if text.strip():
                units.append((base | lines, lines, 0, text))
                extra.append((base | lines, msg.role, searchable(" ".join(tool_names(msg))), at))
        insert_units(con, units)
        con.executemany("INSERT INTO session_units(id, role, tools, at) VALUES (?, ?, ?, ?)", extra)
        upto = state.upto + len(complete)
        day = None
        if last_at is not None:
            day = datetime.fromisoformat(last_at).astimezone(self.workspace.tz).date().toordinal()
        con.execute(
            "UPDATE files SET mtime_ns = ?, size = ?, day = ?, units = units + ? WHERE id = ?",
            (st.mtime_ns, upto, day, len(units), state.file_id),
        )
        con.execute(
            "INSERT OR REPLACE INTO session_logs(file_id, session, identity, tag, size,"
            " indexed_upto, tail, lines, messages, first_at, last_at, summary)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                state.file_id,
                session_id,
                st.identity,
                st.tag,
                st.size,
                upto,
                (state.tail + complete)[-_TAIL:],
                lines,
                messages,
                first_at,
                last_at,
                summary,
            ),
        )
        return len(units)

    def _drop(self, con: sqlite3.Connection, session_id: str) -> None:
        """Remove one log's rows (inside the caller's write transaction)."""
        row = con.execute("SELECT id FROM files WHERE path = ?", (log_path(session_id),)).fetchone()
        con.execute("DELETE FROM session_logs WHERE session = ?", (session_id,))
        if row is None:
            return
        SqliteEngine(con)._drop_rows(row[0])  # its units and their FTS5 rows
        lo, hi = row[0] << LINE_BITS, (row[0] + 1) << LINE_BITS
        con.execute("DELETE FROM session_units WHERE id >= ? AND id < ?", (lo, hi))
        con.execute("DELETE FROM files WHERE id = ?", (row[0],))

    # -- reading --------------------------------------------------------------------------

    def engine(self) -> SqliteEngine:
        """The memory index's engine over this database (for :func:`run_search`)."""
        return SqliteEngine(self.connection())

    def sessions(self) -> list[SessionInfo]:
        """Every indexed session, the most recently active first (call :meth:`refresh` first)."""
        with self.lock:
            rows = (
                self.connection()
                .execute(
                    "SELECT session, first_at, last_at, messages, lines, summary FROM session_logs"
                    " ORDER BY last_at IS NULL, last_at DESC, session"
                )
                .fetchall()
            )
        return [
            SessionInfo(
                session_id=row[0],
                path=log_path(row[0]),
                first_at=_when(row[1]),
                last_at=_when(row[2]),
                messages=row[3],
                lines=row[4],
                summary=row[5],
            )
            for row in rows
        ]


def _session_of(name: str) -> str | None:
    """The session id of a log's file name, or ``None`` for any other name."""
    if not name.endswith(LOG_SUFFIX):
        return None
    from memdir.sessions import validate_session_id

    try:
        return validate_session_id(name[: -len(LOG_SUFFIX)])
    except SessionLogError:
        return None
