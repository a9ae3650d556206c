"""The three search engines the scale benchmark compares, behind one small interface.

* ``memdir``: :class:`memdir.index.MemoryIndex`, through its public API only;
* ``fts5``: a plain FTS5 ``unicode61`` table over the raw lines, bm25-ranked ``OR`` query;
* ``substring``: the reference behaviour: read every memory file on each query and keep the
  lines containing the whole query as one case-insensitive literal (no ranking, no limit).

A hit is ``(rel path, first line, last line)``, lines 1-based and inclusive.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from memdir.index import MemoryIndex
from memdir.workspace import Workspace

__all__ = ["Engine", "Fts5Engine", "Hit", "MemdirEngine", "SubstringEngine", "dir_size"]

Hit = tuple[str, int, int]

_FILE_SHIFT = 20  # rowid = file_id << 20 | line number: one file is one rowid range


def dir_size(path: Path) -> int:
    """Total bytes of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Engine(Protocol):
    """What the benchmark needs from an engine."""

    name: str

    def build(self) -> int:
        """Index everything from scratch; return the number of rows/spans indexed."""
        ...

    def search(self, query: str, limit: int) -> list[Hit]:
        """Ranked hits (the best first)."""
        ...

    def reindex(self, rel: str) -> None:
        """Bring one file's rows up to date with the file on disk."""
        ...

    def size_bytes(self) -> int:
        """Bytes on disk used by the engine's own data (0 if it keeps none)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class MemdirEngine:
    """memdir's :class:`MemoryIndex`."""

    name = "memdir"

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws
        self._index = MemoryIndex(ws).open()

    def build(self) -> int:
        stats = self._index.index_all_from_workspace(full=True)
        # Reopen so the size counts a checkpointed database and searches start from a cold
        # connection, as a new process would.
        self._index.close()
        self._index = MemoryIndex(self._ws).open()
        return stats.lines_indexed

    def search(self, query: str, limit: int) -> list[Hit]:
        return [(h.path, h.line_number, h.line_end) for h in self._index.search(query, limit)]

    def reindex(self, rel: str) -> None:
        self._index.index_file(rel)

    def refresh(self) -> int:
        """Run the staleness check + incremental sync; return the number of files re-indexed."""
        return self._index.refresh().files_indexed

    def size_bytes(self) -> int:
        return dir_size(self._ws.index_dir)

    def close(self) -> None:
        self._index.close()


def _fts5_query(query: str) -> str:
    # Every whitespace-separated term becomes a quoted phrase; the phrases are ORed.
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in query.split())


class Fts5Engine:
    """A plain FTS5 table (``unicode61``, raw text) queried with ``OR`` and ranked by bm25."""

    name = "fts5"

    def __init__(self, ws: Workspace, db_path: Path) -> None:
        self._ws = ws
        self._db_path = db_path
        self._db = self._connect()
        self._paths: dict[int, str] = {}
        self._ids: dict[str, int] = {}

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._db_path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _rows(self, rel: str, file_id: int) -> list[tuple[int, str]]:
        text = self._ws.read_text(rel)
        base = file_id << _FILE_SHIFT
        return [
            (base | number, line.strip())
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip()
        ]

    def build(self) -> int:
        db = self._db
        db.execute("DROP TABLE IF EXISTS lines")
        db.execute("CREATE VIRTUAL TABLE lines USING fts5(content, tokenize='unicode61')")
        rels = self._ws.memory_files()
        self._ids = {rel: i + 1 for i, rel in enumerate(rels)}
        self._paths = {i: rel for rel, i in self._ids.items()}
        rows = 0
        db.execute("BEGIN")
        for rel, file_id in self._ids.items():
            batch = self._rows(rel, file_id)
            db.executemany("INSERT INTO lines(rowid, content) VALUES (?, ?)", batch)
            rows += len(batch)
        db.execute("COMMIT")
        db.close()
        self._db = self._connect()
        return rows

    def search(self, query: str, limit: int) -> list[Hit]:
        if not query.strip():
            return []
        try:
            found = self._db.execute(
                "SELECT rowid FROM lines WHERE lines MATCH ? ORDER BY rank LIMIT ?",
                (_fts5_query(query), limit),
            ).fetchall()
        except sqlite3.OperationalError:
            return []  # a query FTS5 cannot parse finds nothing
        mask = (1 << _FILE_SHIFT) - 1
        out: list[Hit] = []
        for (rowid,) in found:
            number = rowid & mask
            out.append((self._paths[rowid >> _FILE_SHIFT], number, number))
        return out

    def reindex(self, rel: str) -> None:
        file_id = self._ids[rel]
        base = file_id << _FILE_SHIFT
        rows = self._rows(rel, file_id)
        db = self._db
        db.execute("BEGIN")
        db.execute(
            "DELETE FROM lines WHERE rowid BETWEEN ? AND ?", (base, base | ((1 << _FILE_SHIFT) - 1))
        )
        db.executemany("INSERT INTO lines(rowid, content) VALUES (?, ?)", rows)
        db.execute("COMMIT")

    def size_bytes(self) -> int:
        return sum(
            p.stat().st_size
            for p in self._db_path.parent.glob(self._db_path.name + "*")
            if p.is_file()
        )

    def close(self) -> None:
        self._db.close()


class SubstringEngine:
    """The reference behaviour: a case-insensitive literal scan of every line of every file."""

    name = "substring"

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws

    def build(self) -> int:
        return 0  # nothing to build: every query reads the files

    def search(self, query: str, limit: int) -> list[Hit]:
        needle = query.strip().lower()
        if not needle:
            return []
        out: list[Hit] = []
        for rel in self._ws.memory_files():
            low = self._ws.read_text(rel).lower()
            pos = low.find(needle)
            number, counted = 1, 0
            while pos >= 0:
                number += low.count("\n", counted, pos)
                counted = pos
                out.append((rel, number, number))
                nl = low.find("\n", pos)
                if nl < 0:
                    break
                pos = low.find(needle, nl + 1)
        # No ranking and no limit, like the reference; the caller keeps the first ``limit``.
        return out

    def reindex(self, rel: str) -> None:
        return None  # nothing is derived from the files

    def size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        return None
