"""SQLite schema of the memory index: registered, idempotent migrations and health checks.

Row ids encode the location: ``units.id = file_id << 24 | first_line``, so one file's rows
are one id range (deleting or diffing a file never scans the table) and FTS5 doclists are
ordered by file. The full-text tables (``fts`` and ``pairs``, :mod:`memdir.index._fts`) are
*contentless*: they store only the inverted index, the text lives once in ``units``. Deleting
from them replays the tokens that were inserted, which is safe because the functions that
derive them are pure and their version is recorded in ``meta``.

Writers take the lock with ``BEGIN IMMEDIATE`` (never a read transaction upgraded to a write,
which SQLite fails at once to avoid a deadlock), and wait for it in short slices with a
jittered back-off in between, for at most :data:`BUSY_TIMEOUT_S` in all: SQLite's own busy
wait polls ever more slowly, so under a stream of writers a long waiter loses every race to
newcomers and gives up with ``database is locked``.
"""

from __future__ import annotations

import contextlib
import errno
import random
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

from memdir.index._fts import FTS_TABLE, PAIRS_TABLE, TOKENIZER, add_pairs, index_rows, merge
from memdir.index._text import ANALYZER_VERSION
from memdir.index._unit_terms import stored_terms

__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_S",
    "LINE_BITS",
    "SCHEMA_VERSION",
    "begin_immediate",
    "connect",
    "connect_readonly",
    "immediate",
    "is_busy",
    "is_corruption",
    "is_unwritable",
    "prepare",
    "remove_database",
]

APPLICATION_ID = 0x6D656D64  # "memd" in the database header: tells our files from others
LINE_BITS = 24
BUSY_TIMEOUT_S = 15.0
"""The busy window: how long one statement or one write transaction waits for a lock."""
_BUSY_SLICE_MS = 50  # SQLite's own wait per attempt to take the write lock
_BACKOFF_S = (0.002, 0.05)  # first and largest pause between two attempts


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
    # No sizes table (columnsize=0): the ranking counts a row's tokens in its text. Databases
    # made before keep theirs, unused.
    con.execute(
        "CREATE VIRTUAL TABLE fts USING fts5("
        f"body, content='', columnsize=0, tokenize='{TOKENIZER}')"  # positions: see _v4
    )
    con.execute("INSERT INTO meta(key, value) VALUES ('analyzer', ?)", (ANALYZER_VERSION,))


def _v2(con: sqlite3.Connection) -> None:
    # What an append needs to index only what it appended (memdir.index._append): the file's
    # identity, the chained digest up to its last whole chunk, and where its last unit starts.
    columns = ("inode INTEGER", "chain_at INTEGER", "chain BLOB", "tail_line INTEGER")
    for column in (*columns, "tail_at INTEGER"):
        con.execute(f"ALTER TABLE files ADD COLUMN {column}")


def _v3(con: sqlite3.Connection) -> None:
    # The CJK character pairs of every stored unit (memdir.index._fts), filled from units.
    con.execute(PAIRS_TABLE)
    rows = con.execute("SELECT id, content FROM units")
    while batch := rows.fetchmany(10_000):
        add_pairs(con, batch)
    merge(con, ("pairs",))  # one segment, as a search wants


def _v4(con: sqlite3.Connection) -> None:
    # Words without positions, and written words with a digit beside the CJK pairs
    # (memdir.index._fts): both tables rebuilt from units.
    for table, definition in (("fts", FTS_TABLE), ("pairs", PAIRS_TABLE)):
        con.execute(f"DROP TABLE {table}")
        con.execute(definition)
    rows = con.execute("SELECT id, content FROM units")
    while batch := rows.fetchmany(10_000):
        index_rows(con, batch)
    merge(con)


def _v5(con: sqlite3.Connection) -> None:
    # What ranking reads of each unit, stored beside it (memdir.index._unit_terms): its token
    # count and where each stemmed token stands, filled from units.
    have = {row[1] for row in con.execute("PRAGMA table_info(units)")}
    for column in ("words INTEGER NOT NULL DEFAULT 0", "terms TEXT NOT NULL DEFAULT ''"):
        if column.split()[0] not in have:
            con.execute(f"ALTER TABLE units ADD COLUMN {column}")
    last = -1
    read = "SELECT id, content FROM units WHERE id > ? ORDER BY id LIMIT 10000"
    while batch := con.execute(read, (last,)).fetchall():
        con.executemany(
            "UPDATE units SET words = ?, terms = ? WHERE id = ?",
            [(*stored_terms(content), rowid) for rowid, content in batch],
        )
        last = batch[-1][0]


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _v1,
    2: _v2,
    3: _v3,
    4: _v4,
    5: _v5,
}
"""Schema steps by the version they produce; each runs once, inside one transaction."""
SCHEMA_VERSION = max(MIGRATIONS)
_TABLES = frozenset({"meta", "files", "units", "headings", "fts", "pairs"})


_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT (any extended code), SQLITE_NOTADB
_UNWRITABLE_CODES = (3, 8, 10, 13, 14)  # PERM, READONLY, IOERR, FULL, CANTOPEN
_UNWRITABLE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)
_CORRUPT_SIGNS = ("malformed", "not a database", "corrupt", "vtable", "could not decode")
_UNWRITABLE_SIGNS = (
    "readonly",
    "read-only",
    "disk is full",
    "disk i/o error",
    "unable to open database file",
)


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def is_corruption(exc: BaseException) -> bool:
    """Whether an error means a damaged or foreign file (not a busy or locked one).

    Damage shows as ``database disk image is malformed``, ``file is not a database``, FTS5's
    ``vtable constructor failed`` or, for a damaged text cell, ``Could not decode to UTF-8``.
    """
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if _code(exc) in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    if any(sign in text for sign in _CORRUPT_SIGNS):
        return True
    # The plain base class (not OperationalError, IntegrityError...) is what damage raises.
    return type(exc) is sqlite3.DatabaseError


def is_unwritable(exc: BaseException) -> bool:
    """Whether an error means the database cannot be written or created here.

    A read-only file, directory or file system, a full disk (or quota), an I/O error, or a
    database file (or its ``-wal``/``-shm``) that cannot be opened.
    """
    if isinstance(exc, OSError):
        return exc.errno in _UNWRITABLE_ERRNOS
    if not isinstance(exc, sqlite3.Error) or is_corruption(exc):
        return False
    if _code(exc) in _UNWRITABLE_CODES:
        return True
    text = str(exc).lower()
    return any(sign in text for sign in _UNWRITABLE_SIGNS)


def is_busy(exc: BaseException) -> bool:
    """Whether a SQLite error means another connection holds the lock (``database is locked``)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    if _code(exc) in (5, 6):  # SQLITE_BUSY, SQLITE_LOCKED
        return True
    return "is locked" in str(exc).lower()


def begin_immediate(con: sqlite3.Connection, *, window: float | None = None) -> None:
    """``BEGIN IMMEDIATE``, waiting for the write lock for at most ``window`` seconds in all.

    Each attempt lets SQLite wait a short slice; between attempts the pause doubles from
    2 ms up to 50 ms, with jitter. So a writer that has waited long still tries as often as
    one that just came, and a burst of writers is served instead of starving one of them.

    Raises:
        sqlite3.OperationalError: still locked when the window (default
            :data:`BUSY_TIMEOUT_S`) is over, or another error.
    """
    con.execute(f"PRAGMA busy_timeout = {_BUSY_SLICE_MS}")
    try:
        _when_free(con, "BEGIN IMMEDIATE", BUSY_TIMEOUT_S if window is None else window)
    finally:
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


def _when_free(con: sqlite3.Connection, statement: str, window: float) -> None:
    """Run ``statement`` again while it finds the database locked, for at most ``window``
    seconds, the pause between attempts doubling from 2 to 50 ms, with jitter."""
    deadline = time.monotonic() + window
    pause = _BACKOFF_S[0]
    while True:
        try:
            con.execute(statement).fetchall()
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if not is_busy(exc) or left <= 0:
                raise
        time.sleep(min(left, pause * random.uniform(0.5, 1.5)))
        pause = min(pause * 2, _BACKOFF_S[1])


@contextlib.contextmanager
def immediate(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction (:func:`begin_immediate`), rolled back if the block raises."""
    begin_immediate(con)
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


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only, for a workspace whose index cannot be written.

    A WAL database needs its ``-shm`` file, which a read-only directory may not let SQLite
    create; it is then opened as ``immutable`` (no locks, no WAL: the state of the last
    checkpoint, which is what a read-only workspace holds).

    Raises:
        sqlite3.Error: the file is missing or cannot be read.
    """
    if not path.is_file():
        raise sqlite3.OperationalError(f"unable to open database file: {path} is missing")
    uri = "file:" + urllib.parse.quote(str(path))
    last: sqlite3.Error | None = None
    for query in ("?mode=ro", "?mode=ro&immutable=1"):
        try:
            con = sqlite3.connect(
                uri + query,
                uri=True,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            last = exc
            continue
        try:
            con.execute("PRAGMA query_only = 1")
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            con.close()
            if is_corruption(exc):
                raise
            last = exc
            continue
        return con
    assert last is not None
    raise last


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` in WAL mode with a busy timeout (raises on a garbage file)."""
    con = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # Turning a new file to WAL takes a lock that SQLite does not wait for: when several
        # processes create the index at once, all but one find it locked.
        _when_free(con, "PRAGMA journal_mode = WAL", BUSY_TIMEOUT_S)
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
    begin_immediate(con)
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
