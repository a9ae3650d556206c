"""Opening the session index's database: on disk beside the memory index, or in memory.

The database has the memory index's schema (:func:`memdir.index._schema.prepare`: the
``files``, ``units`` and full-text tables the ranking reads) plus two tables of its own,
``session_logs`` and ``session_units`` (see :mod:`memdir.sessions._catalog`). It is derived
from the logs: one that is damaged, foreign or of another :data:`FORMAT` is emptied or
deleted, with a warning, and built again by the next refresh.
"""

from __future__ import annotations

import logging
import sqlite3
import warnings
from pathlib import Path

from memdir.errors import SessionLogError
from memdir.index._fts import clear
from memdir.index._schema import (
    connect,
    immediate,
    is_corruption,
    is_unwritable,
    prepare,
    remove_database,
)

__all__ = ["FORMAT", "SESSIONS_DB", "discard", "open_index"]

logger = logging.getLogger("memdir.sessions")

SESSIONS_DB = "sessions_index.db"
FORMAT = "sessions/1"
"""Changes whenever a log would give other units (forces a rebuild)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_logs(
    file_id INTEGER PRIMARY KEY,
    session TEXT NOT NULL UNIQUE,
    identity TEXT NOT NULL,
    tag TEXT NOT NULL,
    size INTEGER NOT NULL,
    indexed_upto INTEGER NOT NULL,
    tail BLOB NOT NULL,
    lines INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    first_at TEXT,
    last_at TEXT,
    summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS session_units(
    id INTEGER PRIMARY KEY,
    role TEXT NOT NULL,
    tools TEXT NOT NULL,
    at TEXT);
"""


def open_index(path: Path | None) -> tuple[sqlite3.Connection, Path | None]:
    """The database at ``path``, or (``None``, or a file that cannot be written) in memory.

    Returns the connection and the path it is kept at (``None``: in memory).

    Raises:
        SessionLogError: the file stays unusable after it was built again.
        sqlite3.Error: it cannot be opened for another reason.
    """
    if path is not None:
        try:
            return _open_file(path), path
        except (sqlite3.Error, OSError) as exc:
            if not is_unwritable(exc):
                raise
            _warn(f"{path} cannot be written ({exc}); it is kept in memory")
    con = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    _prepare(con)
    return con, None


def _open_file(path: Path) -> sqlite3.Connection:
    for attempt in (1, 2):
        try:
            con = connect(path)
        except sqlite3.DatabaseError as exc:
            if attempt == 2 or not is_corruption(exc):
                raise
            discard(path, str(exc))
            continue
        try:
            problem = _prepare(con)
        except sqlite3.DatabaseError as exc:
            con.close()
            if attempt == 2 or not is_corruption(exc):
                raise
            problem = str(exc)
        if problem is None:
            return con
        con.close()
        if attempt == 2:
            break
        discard(path, problem)
    raise SessionLogError(f"cannot open the session index {path}; delete it and retry")


def _prepare(con: sqlite3.Connection) -> str | None:
    """Create or migrate the schema; why the database is unusable, or ``None``."""
    problem = prepare(con)
    if problem is not None:
        return problem
    con.executescript(_SCHEMA)
    row = con.execute("SELECT value FROM meta WHERE key = 'sessions'").fetchone()
    if row is None or row[0] != FORMAT:
        with immediate(con):
            row = con.execute("SELECT value FROM meta WHERE key = 'sessions'").fetchone()
            if row is None or row[0] != FORMAT:  # not reset by another process meanwhile
                _reset(con)
    return None


def _reset(con: sqlite3.Connection) -> None:
    """Drop every row and record this :data:`FORMAT` (inside a write transaction)."""
    clear(con)
    for table in ("units", "headings", "files", "session_logs", "session_units"):
        con.execute(f"DELETE FROM {table}")
    con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('sessions', ?)", (FORMAT,))


def discard(path: Path, reason: str) -> None:
    """Delete an unusable database (with a warning); the next use builds it again."""
    _warn(f"{path} was unusable ({reason}); it is built again from the logs")
    remove_database(path)


def _warn(message: str) -> None:
    text = f"memdir session index: {message}"
    warnings.warn(text, RuntimeWarning, stacklevel=5)
    logger.warning("%s", text)
