"""SQLite schema of the memory index: registered, idempotent migrations and health checks.

Row ids encode the location: ``units.id = file_id << 24 | first_line``, so one file's rows
are one id range (deleting or diffing a file never scans the table) and FTS5 doclists are
ordered by file. ``fts`` is *contentless*: it stores only the inverted index, the text lives
once in ``units``. Deleting from it replays the tokens that were inserted, which is safe
because :func:`memdir.index._text.index_body` is a pure function whose version is recorded
in ``meta``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from memdir.index._text import ANALYZER_VERSION

__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_S",
    "LINE_BITS",
    "SCHEMA_VERSION",
    "connect",
    "immediate",
    "is_corruption",
    "prepare",
    "remove_database",
]

APPLICATION_ID = 0x6D656D64  # "memd" in the database header: tells our files from others
LINE_BITS = 24
BUSY_TIMEOUT_S = 15.0
TOKENIZER = "porter unicode61 remove_diacritics 2"


def _v1(con: sqlite3.Connection) -> None:
    con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
    con.execute(
        """CREATE TABLE files(
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            mtime_ns INTEGER NOT NULL,
            size INTEGER NOT NULL,
            digest BLOB NOT NULL,
            day INTEGER,
            archived INTEGER NOT NULL,
            curated INTEGER NOT NULL,
            units INTEGER NOT NULL DEFAULT 0)"""
    )
    con.execute(
        """CREATE TABLE units(
            id INTEGER PRIMARY KEY,
            line_end INTEGER NOT NULL,
            head INTEGER NOT NULL,
            content TEXT NOT NULL)"""
    )
    con.execute("CREATE TABLE headings(id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    con.execute(f"CREATE VIRTUAL TABLE fts USING fts5(body, content='', tokenize='{TOKENIZER}')")
    con.execute("INSERT INTO meta(key, value) VALUES ('analyzer', ?)", (ANALYZER_VERSION,))


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1}
"""Schema steps by the version they produce; each runs once, inside one transaction."""
SCHEMA_VERSION = max(MIGRATIONS)
_TABLES = frozenset({"meta", "files", "units", "headings", "fts"})


def is_corruption(exc: BaseException) -> bool:
    """Whether a SQLite error means a damaged or foreign file (not a busy or locked one)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    text = str(exc).lower()
    if any(sign in text for sign in ("malformed", "not a database", "corrupt", "vtable")):
        return True
    # The plain base class (not OperationalError, IntegrityError...) is what damage raises.
    return type(exc) is sqlite3.DatabaseError


@contextlib.contextmanager
def immediate(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction (``BEGIN IMMEDIATE``), rolled back if the block raises."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def remove_database(path: Path) -> None:
    """Delete a database file and its WAL, shared-memory and journal files (absent ones too).

    Raises:
        OSError: a file exists but cannot be removed.
    """
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` in WAL mode with a busy timeout (raises on a garbage file)."""
    con = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        con.execute("PRAGMA journal_mode = WAL").fetchone()
        # The index is derived data: losing the last commits on power loss is fine.
        con.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        con.close()
        raise
    return con


def _header(con: sqlite3.Connection) -> tuple[int, int, set[str]]:
    app = con.execute("PRAGMA application_id").fetchone()[0]
    version = con.execute("PRAGMA user_version").fetchone()[0]
    names = {row[0] for row in con.execute("SELECT name FROM sqlite_master")}
    return app, version, names


def _problem(app: int, version: int, names: set[str], con: sqlite3.Connection) -> str | None:
    if app != APPLICATION_ID:
        return "it is not a memdir index"
    if version > SCHEMA_VERSION:
        return f"it has schema version {version}, newer than this memdir ({SCHEMA_VERSION})"
    if version == SCHEMA_VERSION:
        if not names >= _TABLES:
            return "tables are missing"
        row = con.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
        if row is None or row[0] != ANALYZER_VERSION:
            return "it was built with another text analyzer"
    return None


def prepare(con: sqlite3.Connection) -> str | None:
    """Create or migrate the schema; return why the file is unusable, or ``None`` if fine.

    Checks are read-only when the schema is current, so opening never waits for a writer.
    """
    app, version, names = _header(con)
    fresh = app == 0 and version == 0 and not names
    if not fresh:
        problem = _problem(app, version, names, con)
        if problem is not None or version == SCHEMA_VERSION:
            return problem
    con.execute("BEGIN IMMEDIATE")
    try:
        app, version, names = _header(con)  # another process may have migrated meanwhile
        if not (app == 0 and version == 0 and not names):
            problem = _problem(app, version, names, con)
            if problem is not None:
                con.execute("ROLLBACK")
                return problem
        for step in range(version + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[step](con)
        con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return None
