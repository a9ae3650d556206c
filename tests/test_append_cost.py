"""memory_add costs what it appends, not what the day's ledger already holds."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

from memdir.index import MemoryIndex
from memdir.tools._core import add_memory, close_shared_indexes, shared_index
from memdir.workspace import Workspace

PROC_IO = Path("/proc/self/io")
LEDGER = "memory/2026-11-30.md"


def _bytes_read() -> int:
    """Bytes this process has read through read/pread calls (page cache included)."""
    for line in PROC_IO.read_text(encoding="ascii").splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _day(blocks: int) -> str:
    return "".join(
        f"\n## Memory Add — 2026-11-30T08:{i % 60:02d}:00Z\n- fact {i} about the pangolin plan\n"
        for i in range(blocks)
    )


def _read_per_add(tmp: Path, blocks: int, clock: object) -> tuple[int, int]:
    """``(bytes read per add, ledger size)`` for adds to a ledger of ``blocks`` blocks."""
    ws = Workspace(tmp / f"ws{blocks}", tz="UTC", clock=clock)  # type: ignore[arg-type]
    ws.write_text(LEDGER, _day(blocks))
    shared_index(ws).refresh()
    for i in range(3):
        add_memory(ws, f"warm-up {i}")
    adds = 20
    before = _bytes_read()
    for i in range(adds):
        result = add_memory(ws, f"otter fact {i}")
        assert result.index_error is None
    per_add = (_bytes_read() - before) // adds
    lines = (ws.root / LEDGER).read_text(encoding="utf-8").split("\n")
    assert lines[result.first_line - 1] == f"- otter fact {adds - 1}"  # the citation is right
    return per_add, (ws.root / LEDGER).stat().st_size


@pytest.mark.skipif(not PROC_IO.exists(), reason="needs /proc/self/io (Linux)")
def test_an_add_reads_the_same_at_1000_and_40000_blocks(tmp_path: Path, clock: object) -> None:
    try:
        small, _ = _read_per_add(tmp_path, 1_000, clock)
        large, size = _read_per_add(tmp_path, 40_000, clock)
    finally:
        close_shared_indexes()
    # At most the last 68 KiB of the old file (memdir.index._append) and what was appended,
    # plus a few index pages; a whole read of the 40,000-block ledger is 3.8 MB per add.
    bound = 256 * 1024
    assert size > 3_000_000
    assert small < bound and large < bound, (small, large)


def _rows(ws: Workspace) -> dict[str, list[tuple[int, int, str | None, str]]]:
    """Every indexed unit by file, read back through search-visible fields."""
    with MemoryIndex(ws, embedder=False) as index:
        index.open()
        engine = index._store.engine
        assert engine is not None
        out: dict[str, list[tuple[int, int, str | None, str]]] = {}
        for info in engine.files_by_id().values():
            ids = [rowid for rowid, _, _ in engine.units_of(info.id)]
            rows = sorted(engine.fetch(ids), key=lambda row: row.line_number)
            out[info.path] = [(r.line_number, r.line_end, r.heading, r.content) for r in rows]
    return out


def _fresh_rows(ws: Workspace, tmp: Path) -> dict[str, list[tuple[int, int, str | None, str]]]:
    copy = Workspace(tmp / "fresh", tz="UTC")
    for rel in ws.memory_files():
        copy.write_text(rel, (ws.root / rel).read_text(encoding="utf-8"))
    with MemoryIndex(copy, embedder=False) as index:
        index.refresh()
    return _rows(copy)


APPENDS = [
    "- plain bullet {n}\n",
    "## Section {n}\n- under a heading {n}\n",
    "continuation of the last bullet {n}\n",
    "\n\n- after blank lines {n}\n",
    "```\ncode line {n}\n```\n",
    "```\nan open fence {n}\n",
    "~~~\nclosing tilde {n}\n~~~\n",
    "| a | table {n} |\n",
    "x" * 3000 + " {n}\n",
]


def test_appends_leave_the_index_equal_to_a_full_rebuild(ws: Workspace, tmp_path: Path) -> None:
    rng = random.Random(11)
    ws.write_text(LEDGER, _day(700))  # past the first chained chunk
    try:
        for n in range(150):
            if rng.random() < 0.4:
                add_memory(ws, f"added fact {n}\nsecond line {n}")
            else:  # a write that is not indexed at once (another tool, another process)
                ws.append_text(LEDGER, rng.choice(APPENDS).format(n=n))
                if rng.random() < 0.5:
                    shared_index(ws).refresh()
    finally:
        close_shared_indexes()
    with MemoryIndex(ws, embedder=False) as index:
        index.refresh()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a rebuild would warn
            index.index_all_from_workspace(check=True)
    assert _rows(ws) == _fresh_rows(ws, tmp_path)


def _edit(ws: Workspace, old: str, new: str) -> None:
    """Edit the ledger in place, as an editor that truncates and rewrites does."""
    path = ws.root / LEDGER
    data = path.read_bytes()
    assert data.count(old.encode()) == 1
    with path.open("r+b") as handle:
        handle.write(data.replace(old.encode(), new.encode()))
        handle.truncate()


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        ("fact 10 about", "fact 10 abort", "abort"),  # same size, early in the file
        ("- fact 10 about the pangolin plan\n", "", None),  # a line removed early
        ("fact 699 about", "fact 699 abort", "abort"),  # same size, near the end
        ("fact 699 about the", "fact 699 and a lot more about the", "lot"),
    ],
)
def test_an_edit_before_an_add_is_indexed(
    ws: Workspace, old: str, new: str, query: str | None
) -> None:
    ws.write_text(LEDGER, _day(700))
    try:
        index = shared_index(ws)
        index.refresh()
        _edit(ws, old, new)
        result = add_memory(ws, "the otter fact")
        assert result.index_error is None
        lines = (ws.root / LEDGER).read_text(encoding="utf-8").split("\n")
        assert lines[result.first_line - 1] == "- the otter fact"
        index.refresh()  # what memory_search does first
        assert [hit.line_number for hit in index.search("otter", 5)] == [result.first_line]
        if query is not None:
            (hit,) = index.search(query, 5)
            assert hit.content == lines[hit.line_number - 1] and new in hit.content
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # rows that differ from the file: a rebuild
            index.index_all_from_workspace(check=True)
    finally:
        close_shared_indexes()


def test_a_replaced_or_shortened_ledger_is_read_whole(ws: Workspace) -> None:
    ws.write_text(LEDGER, _day(700))
    try:
        index = shared_index(ws)
        index.refresh()
        ws.write_text(LEDGER, _day(5))  # a new file (another inode), far shorter
        result = add_memory(ws, "after the rewrite")
        assert result.first_line == 5 * 3 + 3 and result.index_error is None
        assert len(index.search("pangolin", 50)) == 5  # the old 700 blocks are gone
        assert [h.line_number for h in index.search("rewrite", 5)] == [result.first_line]
    finally:
        close_shared_indexes()
