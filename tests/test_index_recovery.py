"""A damaged or foreign index database is rebuilt from the files, with a warning."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memdir.index import MemoryIndex
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-29.md"


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database at all\n" * 200)


def _bad_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:16] = b"NOT SQLITE HDR!\x00"
    path.write_bytes(bytes(data))


def _future_version(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 999")
    con.close()


def _foreign_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO notes(body) VALUES ('someone else''s data')")
    con.commit()
    con.close()


def _missing_table(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("DROP TABLE headings")
    con.commit()
    con.close()


def _empty_file(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"")


@pytest.mark.parametrize(
    "damage", [_garbage, _bad_header, _future_version, _foreign_database, _missing_table]
)
def test_unusable_database_is_rebuilt_from_files(
    ws: Workspace, damage: Callable[[Path], None]
) -> None:
    ws.write_text(LEDGER, "- the pangolin rolled up\n")
    with MemoryIndex(ws) as idx:
        idx.refresh()
        path = idx.path
    damage(path)
    with pytest.warns(RuntimeWarning, match="rebuilt from the files"), MemoryIndex(ws) as idx:
        hits = idx.search("pangolin")
    assert [(h.path, h.line_number) for h in hits] == [(LEDGER, 1)]
    # The new file is healthy: opening it again gives no warning.
    with MemoryIndex(ws) as idx:
        assert idx.refresh().files_indexed == 0


def test_empty_file_is_a_fresh_database(ws: Workspace) -> None:
    ws.write_text(LEDGER, "- a wombat\n")
    _empty_file(ws.index_dir / "memory_index.db")
    with MemoryIndex(ws) as idx:
        idx.refresh()
        assert len(idx.search("wombat")) == 1


def test_corruption_found_while_searching_is_healed(ws: Workspace) -> None:
    ws.write_text(LEDGER, "".join(f"- line {i} of the capybara log\n" for i in range(3000)))
    idx = MemoryIndex(ws)
    idx.refresh()
    idx.close()
    path = ws.index_dir / "memory_index.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(page * 2, len(data), page):  # keep the header and schema page
        data[offset : offset + page] = b"\xff" * page
    path.write_bytes(bytes(data))
    idx = MemoryIndex(ws)
    try:
        # The search rebuilds it, as a damaged header is (files are the truth).
        with pytest.warns(RuntimeWarning, match="rebuilt"):
            assert len(idx.search("capybara", limit=5)) == 5
        assert idx.refresh().files_indexed == 0
    finally:
        idx.close()
