"""The stored units in compressed blocks: exact round trips, writes that keep every block in
its file, a trained dictionary that other processes read, and damage that is found."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir.index import MemoryIndex
from memdir.index._blocks import (
    BLOCK_UNITS,
    BLOCKS_TABLE,
    DICTS_TABLE,
    TRAIN_UNITS,
    Block,
    UnitBlocks,
    decode_block,
    encode_block,
)
from memdir.index._schema import LINE_BITS
from memdir.index._sqlite import SqliteEngine
from memdir.workspace import Workspace

FILE = 3 << LINE_BITS  # the first row id of file 3
NEXT = 4 << LINE_BITS

texts = st.text(
    st.characters(exclude_categories=("Cs",)) | st.sampled_from(["\0", "\n", "数", "🦄", "\ud800"]),
    max_size=60,
)


@st.composite
def unit_lists(draw, max_size: int = BLOCK_UNITS):
    """Up to a block of units of one file, with numbers of every width."""
    top = (1 << LINE_BITS) - 70_000
    lines = sorted(draw(st.sets(st.integers(1, top), min_size=1, max_size=max_size)))
    n = len(lines)
    spans = draw(st.lists(st.sampled_from([0, 0, 1, 300, 65_536]), min_size=n, max_size=n))
    heads = draw(st.lists(st.sampled_from([0, 1, 250, 70_000, 9_000_000]), min_size=n, max_size=n))
    words = draw(st.lists(texts, min_size=n, max_size=n))
    return [
        (FILE | line, line + span, head, text)
        for line, span, head, text in zip(lines, spans, heads, words, strict=True)
    ]


@settings(max_examples=300, deadline=None)
@given(units=unit_lists())
def test_a_block_gives_back_exactly_the_units_it_was_made_of(units) -> None:
    raw = encode_block(units)
    assert decode_block(units[0][0], raw) == units
    block = Block(units[0][0], raw)
    assert block.ids == [unit[0] for unit in units]
    for i, unit in enumerate(units):
        assert block.find(unit[0]) == i
    assert block.find(units[-1][0] + 1) is None


@pytest.mark.parametrize("cut", [0, 1, 3, 7])
def test_a_cut_or_padded_block_is_not_read_as_units(cut: int) -> None:
    raw = encode_block([(FILE | 1, 1, 0, "alpha"), (FILE | 2, 2, 0, "bravo")])
    damaged = raw[:cut]
    with pytest.raises(ValueError):
        decode_block(FILE | 1, damaged)


def _blocks_db() -> tuple[sqlite3.Connection, UnitBlocks]:
    con = sqlite3.connect(":memory:", isolation_level=None)
    con.execute(BLOCKS_TABLE)
    con.execute(DICTS_TABLE)
    return con, UnitBlocks(con)


def _check_layout(con: sqlite3.Connection, blocks: UnitBlocks) -> None:
    """Every block lies in one file, starts at its first unit and counts its units."""
    for (base, count), units in zip(
        con.execute("SELECT id, units FROM blocks ORDER BY id"), blocks.every(), strict=True
    ):
        assert units[0][0] == base
        assert len(units) == count <= BLOCK_UNITS
        assert {unit[0] >> LINE_BITS for unit in units} == {base >> LINE_BITS}


changes = st.lists(
    st.tuples(
        st.lists(st.integers(1, 120), max_size=30),  # lines written (new or changed)
        st.lists(st.integers(1, 120), max_size=10),  # lines deleted
        st.sampled_from(["", "x" * 3000, "同一行", "a\0b"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=changes)
def test_writes_keep_every_unit_and_every_block_in_its_file(steps) -> None:
    con, blocks = _blocks_db()
    neighbour = {NEXT | line: (NEXT | line, line, 0, f"other {line}") for line in (1, 2, 3)}
    blocks.write(NEXT, NEXT + (1 << LINE_BITS), neighbour)
    model: dict[int, tuple[int, int, int, str]] = {}
    for step, (written, deleted, filler) in enumerate(steps):
        change: dict[int, tuple[int, int, int, str] | None] = {FILE | n: None for n in deleted}
        for n in written:
            change[FILE | n] = (FILE | n, n, step, f"line {n} step {step} {filler}")
        blocks.write(FILE, NEXT, change)
        for rowid, unit in change.items():
            if unit is None:
                model.pop(rowid, None)
            else:
                model[rowid] = unit
        assert blocks.between(FILE, NEXT, FILE) == [model[r] for r in sorted(model)]
        _check_layout(con, blocks)
        probes = [FILE | n for n in range(0, 125, 7)]
        assert blocks.get(probes) == {r: model[r] for r in probes if r in model}
        ids = sorted(model)
        for probe in probes:
            before = [r for r in ids if r < probe]
            after = [r for r in ids if r > probe]
            expected = (before[-1] if before else None, after[0] if after else None)
            assert blocks.neighbors([probe])[probe] == expected
            assert blocks.count_from(probe, NEXT) == len([r for r in ids if r >= probe])
        last = blocks.last(FILE, NEXT)
        assert last == (model[ids[-1]] if ids else None)
    assert blocks.between(NEXT, NEXT + (1 << LINE_BITS), NEXT) == list(neighbour.values())


def _memory(lines: int, offset: int = 0) -> str:
    topics = (
        "the otter family moved down the river",
        "我们讨论了数据库迁移方案",
        "deploy on friday",
    )
    return "".join(
        f"- {topics[i % 3]} note {i + offset} for project {i % 97}\n" for i in range(lines)
    )


def _db(ws: Workspace) -> Path:
    return ws.index_dir / "memory_index.db"


def _lines(index: MemoryIndex, query: str) -> list[tuple[str, int, str]]:
    return [(hit.path, hit.line_number, hit.content) for hit in index.search(query, limit=1)]


def test_a_grown_index_trains_a_dictionary_and_finds_the_same_lines(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", tz="UTC")
    ws.write_text("memory/2026-11-01.md", _memory(TRAIN_UNITS // 2))
    queries = ("note 1234 for", "note 321 project", "otter river note 3999")
    with MemoryIndex(ws) as index:
        index.refresh()
        before = [_lines(index, q) for q in queries]
    con = sqlite3.connect(_db(ws))
    assert con.execute("SELECT count(*) FROM block_dicts").fetchone()[0] == 0
    plain = con.execute("SELECT sum(length(data)) FROM blocks").fetchone()[0]
    con.close()
    ws.write_text("memory/2026-11-02.md", _memory(TRAIN_UNITS, offset=TRAIN_UNITS))
    with MemoryIndex(ws) as index:
        index.refresh()
        assert index.optimize() is True
        assert [_lines(index, q) for q in queries] == before
    con = sqlite3.connect(_db(ws))
    try:
        (number,) = con.execute("SELECT id FROM block_dicts").fetchone()
        prefixes = {row[0] for row in con.execute("SELECT substr(data, 1, 1) FROM blocks")}
        assert prefixes == {bytes([number])}  # every block compressed with it
        first_day = con.execute(
            "SELECT sum(length(data)) FROM blocks WHERE id < ?", (2 << LINE_BITS,)
        ).fetchone()[0]
        assert first_day < plain * 0.75
    finally:
        con.close()


def _file_one(blocks: UnitBlocks, lines: range) -> None:
    lo = 1 << LINE_BITS
    blocks.write(lo, 2 << LINE_BITS, {lo | n: (lo | n, n, 0, f"added line {n}") for n in lines})


def test_a_connection_keeps_reading_and_writing_after_another_trains(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", tz="UTC")
    ws.write_text("memory/2026-11-01.md", _memory(TRAIN_UNITS + 500))  # below a build's merge
    with MemoryIndex(ws) as index:
        index.refresh()
    mine = sqlite3.connect(_db(ws), isolation_level=None)
    other = sqlite3.connect(_db(ws), isolation_level=None)
    try:
        blocks = UnitBlocks(mine)
        assert blocks.get([(1 << LINE_BITS) | 5])  # blocks and a reader cached
        with mine:
            mine.execute("BEGIN IMMEDIATE")
            _file_one(blocks, range(20_000, 20_003))  # a compressor without dictionary cached
        other.execute("BEGIN IMMEDIATE")
        assert UnitBlocks(other).train(TRAIN_UNITS * 20)
        other.execute("COMMIT")
        (number,) = other.execute("SELECT id FROM block_dicts").fetchone()
        lo = 1 << LINE_BITS
        got = blocks.get([lo | 5, lo | 20_001])
        assert got[lo | 5][3] == "- " + _memory(5).splitlines()[4][2:]
        assert got[lo | 20_001][3] == "added line 20001"
        with mine:
            mine.execute("BEGIN IMMEDIATE")
            _file_one(blocks, range(20_003, 20_010))
        prefixes = other.execute(
            "SELECT substr(data, 1, 1) FROM blocks WHERE id >="
            " (SELECT max(id) FROM blocks WHERE id <= ?) AND id < ?",
            (lo | 20_003, 2 << LINE_BITS),
        ).fetchall()
        assert prefixes == [(bytes([number]),)] * len(prefixes)  # the dictionary it had not seen
        assert UnitBlocks(other).between(lo | 20_000, 2 << LINE_BITS, lo) == [
            (lo | n, n, 0, f"added line {n}") for n in range(20_000, 20_010)
        ]
    finally:
        mine.close()
        other.close()


def test_blocks_whose_dictionary_is_gone_are_damage_and_rebuilt(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", tz="UTC")
    ws.write_text("memory/2026-11-01.md", _memory(TRAIN_UNITS * 2))
    with MemoryIndex(ws) as index:
        index.refresh()
        right = index.search("note 17 for project", limit=3)
    con = sqlite3.connect(_db(ws), isolation_level=None)
    assert con.execute("SELECT count(*) FROM block_dicts").fetchone()[0] == 1
    con.execute("DELETE FROM block_dicts")
    con.close()
    _found_and_rebuilt(ws, "dictionary", "note 17 for project", right)


def _found_and_rebuilt(ws: Workspace, problem: str, query: str, right: list) -> None:
    """The check names ``problem``; a search rebuilds the index and finds what it did."""
    engine, _ = SqliteEngine.open(_db(ws))
    assert engine is not None
    assert problem in (engine.damage() or "")
    engine.close()
    with MemoryIndex(ws) as index, pytest.warns(RuntimeWarning, match="rebuilt from the files"):
        assert index.search(query, limit=len(right)) == right


@pytest.mark.parametrize(
    "sample", [[], ["a"], ["same line"] * 20_000, ["x" * 8] * 3000, ["\0"] * 9000]
)
def test_training_on_a_poor_sample_leaves_the_blocks_as_they_are(sample: list[str]) -> None:
    con, blocks = _blocks_db()
    con.execute("BEGIN")
    units = {FILE | i: (FILE | i, i, 0, text) for i, text in enumerate(sample, start=1)}
    blocks.write(FILE, NEXT, units)
    trained = blocks.train(len(sample))
    con.execute("COMMIT")
    assert trained is (sum(len(text) for text in sample) >= 256 * 1024)
    assert blocks.between(FILE, NEXT, FILE) == list(units.values())


def test_a_damaged_block_is_reported_and_rebuilt_from_the_files(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", tz="UTC")
    ws.write_text("memory/2026-11-01.md", _memory(300))
    with MemoryIndex(ws) as index:
        index.refresh()
        right = index.search("otter note 120", limit=5)
    con = sqlite3.connect(_db(ws), isolation_level=None)
    blocks = UnitBlocks(con)
    rows = con.execute("SELECT id, data FROM blocks ORDER BY id").fetchall()
    base, data = next(
        row
        for row, units in zip(rows, blocks.every(), strict=True)
        if any(" note 120 " in unit[3] for unit in units)
    )
    flipped = data[:-8] + bytes(b ^ 0x21 for b in data[-8:])
    con.execute("UPDATE blocks SET data = ? WHERE id = ?", (flipped, base))
    con.close()
    _found_and_rebuilt(ws, "damaged", "otter note 120", right)
