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


def test_a_damaged_text_cell_found_by_a_search_is_rebuilt(
    built: tuple[Path, bytes, list[object]],
) -> None:
    root, good, answers = built
    line = next(
        text
        for text in (root / "memory/2026-11-03.md").read_bytes().split(b"\n")
        if text.endswith(b" capybara970")
    )
    at = good.index(line)  # where the line's text is stored
    damaged = bytearray(good)
    damaged[at + 10 : at + 14] = b"\xff\xfe\xff\xfe"  # not UTF-8 any more
    ws = _restore(root, bytes(damaged))
    with MemoryIndex(ws) as index:
        con = sqlite3.connect(ws.index_dir / "memory_index.db")
        with pytest.raises(sqlite3.OperationalError, match="decode"):
            con.execute("SELECT content FROM units").fetchall()
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
