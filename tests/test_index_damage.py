"""Page-level damage to the index (flipped bytes) is rebuilt from the files, never raised."""

from __future__ import annotations

import random
import sqlite3
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.index import MemoryIndex
from memdir.index._blocks import UnitBlocks
from memdir.workspace import Workspace

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "mike"]
QUERIES = [
    "alpha",
    "bravo charlie",
    "数据库",
    "迁移 echo",
    "mike lima golf hotel",
    "line 1400 golf",
    *(f"capybara{i * 97}" for i in range(15)),
]
FLIPPED = 400


def _hits(index: MemoryIndex) -> list[list[tuple[str, int, str]]]:
    return [[(h.path, h.line_number, h.content) for h in index.search(q, 20)] for q in QUERIES]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, list[object]]:
    """A workspace, the bytes of its checkpointed index, and the right answers."""
    ws = Workspace(tmp_path_factory.mktemp("damage") / "ws", tz="UTC")
    rng = random.Random(0)
    for day in range(1, 6):
        ws.write_text(
            f"memory/2026-11-0{day}.md",
            "## Day\n"
            + "".join(
                f"- line {i} {' '.join(rng.choices(WORDS, k=8))} 数据库迁移 capybara{i}\n"
                for i in range(1500)
            ),
        )
    with MemoryIndex(ws) as index:
        index.refresh()
        answers: list[object] = list(_hits(index))
    db = ws.index_dir / "memory_index.db"
    assert not Path(f"{db}-wal").exists()  # the last close checkpointed everything
    return ws.root, db.read_bytes(), answers


def _restore(root: Path, data: bytes) -> Workspace:
    ws = Workspace(root, tz="UTC")
    db = ws.index_dir / "memory_index.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(data)
    return ws


def _flip(data: bytes, seed: int) -> bytes:
    """``FLIPPED`` consecutive bytes changed, somewhere past the schema pages."""
    rng = random.Random(seed)
    damaged = bytearray(data)
    at = rng.randrange(len(data) // 5, len(data) - FLIPPED)
    for i in range(at, at + FLIPPED):
        damaged[i] ^= rng.randrange(1, 256)
    return bytes(damaged)


@pytest.mark.parametrize("seed", range(12))
def test_flipped_bytes_never_break_search_and_memdir_index_heals_them(
    built: tuple[Path, bytes, list[object]], seed: int
) -> None:
    root, good, answers = built
    ws = _restore(root, _flip(good, seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "rebuilt from the files"
        with MemoryIndex(ws) as index:
            _hits(index)  # whatever a damaged page does, no query raises
        result = CliRunner().invoke(cli, ["--workspace", str(root), "index"])
    assert result.exit_code == 0, result.output
    with MemoryIndex(ws) as index:
        assert _hits(index) == answers
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # healthy now: nothing to rebuild
            index.index_all_from_workspace(check=True)


def test_a_damaged_text_block_found_by_a_search_is_rebuilt(
    built: tuple[Path, bytes, list[object]],
) -> None:
    root, good, answers = built
    ws = _restore(root, good)
    con = sqlite3.connect(ws.index_dir / "memory_index.db")
    rows = con.execute("SELECT id, data FROM blocks ORDER BY id").fetchall()
    base, data = next(
        row
        for row, units in zip(rows, UnitBlocks(con).every(), strict=True)
        if any(unit[3].endswith(" capybara970") for unit in units)
    )
    con.close()
    at = good.index(data)  # where the block is stored in the file
    damaged = bytearray(good)
    middle = at + len(data) // 2
    damaged[middle : middle + 4] = bytes(b ^ 0x5A for b in damaged[middle : middle + 4])
    ws = _restore(root, bytes(damaged))
    with MemoryIndex(ws) as index:
        con = sqlite3.connect(ws.index_dir / "memory_index.db")
        with pytest.raises(sqlite3.DatabaseError, match="damaged"):
            UnitBlocks(con).get([base])
        con.close()
        with pytest.warns(RuntimeWarning, match="rebuilt from the files"):
            assert _hits(index) == answers


@pytest.mark.parametrize("seed", range(6))
def test_flipped_bytes_in_the_vector_store_never_break_search(ws: Workspace, seed: int) -> None:
    pytest.importorskip("numpy")
    from memdir.testing import ConceptEmbedder

    embedder = ConceptEmbedder({"db": ["database", "数据库"], "move": ["migration", "迁移"]})
    ws.write_text(
        "memory/2026-11-29.md", "".join(f"- 第{i}次讨论了数据库迁移 item{i}\n" for i in range(400))
    )
    with MemoryIndex(ws, embedder=embedder) as index:
        index.refresh()
        index.embed_pending()
    store = ws.index_dir / "vectors.db"
    store.write_bytes(_flip(store.read_bytes(), seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "vector store ... was reset"
        with MemoryIndex(ws, embedder=embedder) as index:
            index.search("database migration", 5)
            stats = index.embed_pending()
            assert stats.pending == 0 and stats.total == 400
            hits = index.search("database migration", 5)
    assert len(hits) == 5
