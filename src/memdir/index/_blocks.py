"""The stored units of the SQLite index, compressed in blocks of consecutive units of a file.

Each unit is kept with its last line, the line of its heading and its text: the ranking reads
the text, a hit shows it, and deleting a unit's full-text rows replays it (both tables are
contentless). Kept as one row per unit they were most of the index (150 of 187 MB at a
million lines). Here up to :data:`BLOCK_UNITS` consecutive units of one file (and about
:data:`BLOCK_BYTES` of text, unless one unit is larger) share one row of ``blocks``,
compressed with zstd, keyed by the row id of its first unit: a unit's block is the one with
the highest id not above its own, and the first unit of the next block follows the last of
this one. Every block also records how many units it holds, so counting a file's units from
a line on reads one block.

Once the index holds :data:`TRAIN_UNITS` units, :meth:`UnitBlocks.train` builds a zstd
dictionary from a sample of the texts (kept in ``block_dicts``) and compresses every block
again with it: short blocks of similar lines share most of what they would otherwise each
spell out. It is trained again when the index has grown :data:`RETRAIN_GROWTH` times since.
Each block starts with the number of the dictionary it was compressed with (0: none), so a
process that has not seen a new dictionary yet still reads every block, and writers look the
current dictionary up inside their write transaction.

A block is one zstd frame with its checksum (a damaged block fails to read, and the index is
rebuilt, rather than show other text). Uncompressed it is: a flags byte, the number of units,
three columns of that many numbers (offsets of the row ids from the block's id, lines each
unit spans beyond its first, heading lines), each of 1, 2 or 4 bytes per number as the flags
say, then the texts (UTF-8, lone surrogates kept) joined by NUL, or, if a text holds a NUL,
a fourth column of their lengths and the texts one after the other.
"""

from __future__ import annotations

import sqlite3
import struct
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import zstandard

if TYPE_CHECKING:  # the engine's module imports the schema, which imports this one
    from memdir.index._engine import UnitRow

__all__ = [
    "BLOCKS_TABLE",
    "BLOCK_BYTES",
    "BLOCK_UNITS",
    "DICTS_TABLE",
    "RETRAIN_GROWTH",
    "TRAIN_UNITS",
    "Block",
    "UnitBlocks",
    "decode_block",
    "encode_block",
]

BLOCKS_TABLE = (
    "CREATE TABLE blocks(id INTEGER PRIMARY KEY, units INTEGER NOT NULL, data BLOB NOT NULL)"
)
DICTS_TABLE = (
    "CREATE TABLE block_dicts(id INTEGER PRIMARY KEY, units INTEGER NOT NULL, data BLOB NOT NULL)"
)
BLOCK_UNITS = 8
"""Units per block at most: reading one unit costs decompressing its whole block (2-3 us)."""
BLOCK_BYTES = 4096
"""Text per block at most (in characters), unless its first unit alone is longer."""
TRAIN_UNITS = 8_000
"""Units the index holds before a dictionary is trained (sampled from at most 20k of them)."""
RETRAIN_GROWTH = 16
"""The dictionary is trained again once the index holds this many times the units it was
trained on."""
LINE_MASK = (1 << 24) - 1  # the line of a row id (memdir.index._schema.LINE_BITS)

_SAMPLE_UNITS = 20_000
_MIN_SAMPLE_BYTES = 256 * 1024  # zstd's trainer wants far more samples than its dictionary
_DICT_BYTES = 112 * 1024
_LEVEL = 9  # with a dictionary: 8 % smaller blocks than level 3, read as fast
_PLAIN_LEVEL = 3  # without one (a small index, or blocks compressed again once it is trained)
_CACHED = 1024  # decoded blocks kept per connection (about 1.5 MB)
_CHUNK = 500  # ids per IN (...) list
_ENCODING = ("utf-8", "surrogatepass")
_WIDTHS = ((1, "B"), (2, "H"), (4, "I"))
_WITH_LENGTHS = 0x40


def _width(values: Sequence[int]) -> int:
    top = max(values)
    if min(values) < 0 or top >= 1 << 32:
        raise ValueError("a unit's numbers do not fit a block")
    return 0 if top < 1 << 8 else 1 if top < 1 << 16 else 2


def encode_block(units: Sequence[UnitRow]) -> bytes:
    """The uncompressed block of ``units`` (``(row id, line end, head, text)``, ascending,
    one to 255 of them, all of one file)."""
    base = units[0][0]
    columns = [
        [rowid - base for rowid, _, _, _ in units],
        [end - (rowid & LINE_MASK) for rowid, end, _, _ in units],
        [head for _, _, head, _ in units],
    ]
    texts = [text.encode(*_ENCODING) for _, _, _, text in units]
    joined = not any(b"\0" in text for text in texts)
    if not joined:
        columns.append([len(text) for text in texts])
    widths = [_width(column) for column in columns[:3]] + [2] * (len(columns) - 3)
    flags = widths[0] | widths[1] << 2 | widths[2] << 4 | (0 if joined else _WITH_LENGTHS)
    parts = [bytes((flags, len(units)))]
    for code, column in zip(widths, columns, strict=True):
        parts.append(struct.pack(f"<{len(column)}{_WIDTHS[code][1]}", *column))
    parts.append(b"\0".join(texts) if joined else b"".join(texts))
    return b"".join(parts)


class Block:
    """One block, decompressed: its units' ids and numbers, their texts decoded when asked.

    Raises:
        ValueError: the bytes are not a block.
    """

    __slots__ = ("_heads", "_offsets", "_spans", "_texts", "base")

    def __init__(self, base: int, raw: bytes) -> None:
        if len(raw) < 2:
            raise ValueError("a block is truncated")
        flags, count = raw[0], raw[1]
        layout = _layout(flags, count)
        if layout is None or layout[-1] > len(raw):
            raise ValueError("a block has a wrong header" if layout is None else "is truncated")
        offsets, spans, heads, lengths, at = layout
        self.base = base
        self._offsets = offsets.unpack_from(raw, 2)
        self._spans = spans.unpack_from(raw, 2 + offsets.size)
        self._heads = heads.unpack_from(raw, 2 + offsets.size + spans.size)
        if lengths is None:
            texts = raw[at:].split(b"\0")
            if len(texts) != count:
                raise ValueError("a block has a wrong length")
        else:
            texts, start = [], at
            for length in lengths.unpack_from(raw, at - lengths.size):
                texts.append(raw[start : start + length])
                start += length
            if start != len(raw):
                raise ValueError("a block has a wrong length")
        self._texts = texts

    @property
    def ids(self) -> list[int]:
        """The units' row ids, ascending."""
        base = self.base
        return [base + offset for offset in self._offsets]

    def find(self, rowid: int) -> int | None:
        """Where the unit ``rowid`` is in the block, if it is in it."""
        offset = rowid - self.base
        offsets = self._offsets
        return offsets.index(offset) if offset in offsets else None

    def __len__(self) -> int:
        return len(self._offsets)

    def unit(self, i: int) -> UnitRow:
        """The ``i``-th unit (raises ``ValueError`` if its text is not UTF-8)."""
        rowid = self.base + self._offsets[i]
        text = self._texts[i].decode(*_ENCODING)
        return rowid, (rowid & LINE_MASK) + self._spans[i], self._heads[i], text

    def units(self) -> list[UnitRow]:
        """Every unit, in id order."""
        return [self.unit(i) for i in range(len(self._offsets))]


_Layout = tuple[struct.Struct, struct.Struct, struct.Struct, struct.Struct | None, int]
_LAYOUTS: dict[tuple[int, int], _Layout | None] = {}


def _layout(flags: int, count: int) -> _Layout | None:
    """The column readers of a block's header and where its texts start (``None``: not a
    header)."""
    key = (flags, count)
    if key in _LAYOUTS:
        return _LAYOUTS[key]
    codes = (flags & 3, flags >> 2 & 3, flags >> 4 & 3, 2)
    found: _Layout | None = None
    if count and not flags & 0x80 and 3 not in codes[:3]:
        columns = [struct.Struct(f"<{count}{_WIDTHS[code][1]}") for code in codes]
        lengths = columns[3] if flags & _WITH_LENGTHS else None
        at = 2 + sum(column.size for column in columns[:3]) + (lengths.size if lengths else 0)
        found = (columns[0], columns[1], columns[2], lengths, at)
    if len(_LAYOUTS) < 4096:
        _LAYOUTS[key] = found
    return found


def decode_block(base: int, raw: bytes) -> list[UnitRow]:
    """The units of the uncompressed block ``raw`` whose id is ``base``.

    Raises:
        ValueError: ``raw`` is not a block.
    """
    return Block(base, raw).units()


def _chunks(units: Sequence[UnitRow]) -> Iterator[Sequence[UnitRow]]:
    """``units`` cut into blocks of at most :data:`BLOCK_UNITS` units and about
    :data:`BLOCK_BYTES` of text."""
    start = size = 0
    for i, unit in enumerate(units):
        length = len(unit[3])
        if i > start and (i - start >= BLOCK_UNITS or size + length > BLOCK_BYTES):
            yield units[start:i]
            start, size = i, 0
        size += length
    if start < len(units):
        yield units[start:]


class UnitBlocks:
    """The ``blocks`` table of one connection: read, write and recompress stored units."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con
        self._readers: dict[int, zstandard.ZstdDecompressor] = {0: zstandard.ZstdDecompressor()}
        self._writer: tuple[int, zstandard.ZstdCompressor] | None = None
        self._cache: OrderedDict[int, Block] = OrderedDict()
        self._version = -1  # the data version the cache was filled at

    # -- codec --------------------------------------------------------------------------

    def _reader(self, number: int) -> zstandard.ZstdDecompressor:
        reader = self._readers.get(number)
        if reader is None:
            row = self._con.execute(
                "SELECT data FROM block_dicts WHERE id = ?", (number,)
            ).fetchone()
            if row is None:
                raise sqlite3.DatabaseError(f"the block dictionary {number} is missing")
            reader = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(row[0]))
            self._readers[number] = reader
        return reader

    def _open(self, base: int, data: bytes) -> Block:
        """A stored block, decompressed (raises ``sqlite3.DatabaseError`` if it is damaged)."""
        try:
            return Block(base, self._reader(data[0]).decompress(data[1:]))
        except (IndexError, ValueError, zstandard.ZstdError) as exc:
            raise sqlite3.DatabaseError(f"the block of row {base} is damaged: {exc}") from exc

    def _unpack(self, base: int, data: bytes) -> list[UnitRow]:
        """The units of a stored block (raises ``sqlite3.DatabaseError`` if it is damaged)."""
        block = self._open(base, data)
        try:
            return block.units()
        except ValueError as exc:
            raise sqlite3.DatabaseError(f"the block of row {base} is damaged: {exc}") from exc

    def _compressor(self) -> tuple[int, zstandard.ZstdCompressor]:
        """The current dictionary's number and compressor, as the database has it now."""
        number = int(self._con.execute("SELECT max(id) FROM block_dicts").fetchone()[0] or 0)
        if self._writer is None or self._writer[0] != number:
            trained = None
            if number:
                row = self._con.execute(
                    "SELECT data FROM block_dicts WHERE id = ?", (number,)
                ).fetchone()
                trained = zstandard.ZstdCompressionDict(row[0])
            level = _LEVEL if trained is not None else _PLAIN_LEVEL
            writer = zstandard.ZstdCompressor(level=level, dict_data=trained, write_checksum=True)
            self._writer = (number, writer)
        return self._writer

    def _insert(self, units: Sequence[UnitRow]) -> None:
        """Store ``units`` (ascending, all within one block's range) as new blocks."""
        if not units:
            return
        number, writer = self._compressor()
        prefix = bytes((number,))
        self._con.executemany(
            "INSERT INTO blocks(id, units, data) VALUES (?, ?, ?)",
            [
                (chunk[0][0], len(chunk), prefix + writer.compress(encode_block(chunk)))
                for chunk in _chunks(units)
            ],
        )

    # -- reads --------------------------------------------------------------------------

    def _fresh(self) -> None:
        """Forget the decoded blocks if another connection has written since."""
        version = self._con.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._cache.clear()
            self._version = version

    def _load(self, bases: Iterable[int]) -> dict[int, Block]:
        """The blocks whose ids are ``bases`` (those that exist), from the cache or read."""
        cache = self._cache
        out: dict[int, Block] = {}
        missing = []
        for base in bases:
            block = cache.get(base)
            if block is None:
                missing.append(base)
            else:
                cache.move_to_end(base)
                out[base] = block
        for i in range(0, len(missing), _CHUNK):
            part = missing[i : i + _CHUNK]
            rows = self._con.execute(
                f"SELECT id, data FROM blocks WHERE id IN ({','.join('?' * len(part))})", part
            )
            for base, data in rows:
                out[base] = cache[base] = self._open(base, data)
        while len(cache) > _CACHED:
            cache.popitem(last=False)
        return out

    def get(self, rowids: Sequence[int]) -> dict[int, UnitRow]:
        """The stored units of ``rowids`` (ids without one are left out)."""
        self._fresh()
        cache = self._cache
        ids = sorted(set(rowids))
        out: dict[int, UnitRow] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            values = ",".join("(?)" for _ in chunk)
            rows = self._con.execute(
                f"WITH q(id) AS (VALUES {values}) SELECT q.id, b.id, b.data FROM q JOIN blocks b"
                " ON b.id = (SELECT max(c.id) FROM blocks c WHERE c.id <= q.id)",
                chunk,
            )
            for rowid, base, data in rows:
                block = cache.get(base)
                if block is None:
                    block = cache[base] = self._open(base, data)
                at = block.find(rowid)
                if at is not None:
                    out[rowid] = self._unit(block, at)
        while len(cache) > _CACHED:
            cache.popitem(last=False)
        return out

    def _unit(self, block: Block, i: int) -> UnitRow:
        try:
            return block.unit(i)
        except ValueError as exc:
            raise sqlite3.DatabaseError(f"the block of row {block.base} is damaged: {exc}") from exc

    def between(self, lo: int, hi: int, floor: int) -> list[UnitRow]:
        """The units whose ids are in ``[lo, hi)``, ascending; ``floor`` is the first row id of
        their file (no block of it starts lower)."""
        row = self._con.execute(
            "SELECT max(id) FROM blocks WHERE id <= ? AND id >= ?", (lo, floor)
        ).fetchone()
        start = lo if row[0] is None else int(row[0])
        rows = self._con.execute(
            "SELECT id, data FROM blocks WHERE id >= ? AND id < ? ORDER BY id", (start, hi)
        )
        return [unit for base, data in rows for unit in self._unpack(base, data) if unit[0] >= lo]

    def last(self, lo: int, hi: int) -> UnitRow | None:
        """The last unit of the file whose row ids are ``[lo, hi)``."""
        row = self._con.execute(
            "SELECT id, data FROM blocks WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT 1",
            (lo, hi),
        ).fetchone()
        if row is None:
            return None
        block = self._open(row[0], row[1])
        return self._unit(block, len(block) - 1)

    def count_from(self, rowid: int, hi: int) -> int:
        """How many units have an id in ``[rowid, hi)`` (``hi``: the end of its file)."""
        floor = rowid & ~LINE_MASK
        row = self._con.execute(
            "SELECT id, data FROM blocks WHERE id <= ? AND id >= ? ORDER BY id DESC LIMIT 1",
            (rowid, floor),
        ).fetchone()
        here = 0
        if row is not None:
            here = sum(1 for unit in self._unpack(row[0], row[1]) if unit[0] >= rowid)
        later = self._con.execute(
            "SELECT coalesce(sum(units), 0) FROM blocks WHERE id > ? AND id < ?",
            (rowid if row is None else row[0], hi),
        ).fetchone()[0]
        return here + int(later)

    def neighbors(self, rowids: Sequence[int]) -> dict[int, tuple[int | None, int | None]]:
        """The previous and next unit of the same file for each row id (of a unit or not).

        The previous unit is the last one below the id in the last block starting below it;
        the next one is in the block the id falls in, or else starts the block after it.
        """
        self._fresh()
        out: dict[int, tuple[int | None, int | None]] = {}
        ids = list(dict.fromkeys(rowids))
        for i in range(0, len(ids), _CHUNK // 3):
            chunk = ids[i : i + _CHUNK // 3]
            params: list[int] = []
            for rowid in chunk:
                params.extend((rowid, rowid & ~LINE_MASK, (rowid | LINE_MASK) + 1))
            values = ",".join("(?, ?, ?)" for _ in chunk)
            found = self._con.execute(
                f"WITH q(id, lo, hi) AS (VALUES {values}) SELECT q.id,"
                " (SELECT max(b.id) FROM blocks b WHERE b.id < q.id AND b.id >= q.lo),"
                " (SELECT max(b.id) FROM blocks b WHERE b.id <= q.id AND b.id >= q.lo),"
                " (SELECT min(b.id) FROM blocks b WHERE b.id > q.id AND b.id < q.hi) FROM q",
                params,
            ).fetchall()
            blocks = self._load({base for row in found for base in row[1:3] if base is not None})
            for rowid, before, home, after in found:
                prev = nxt = None
                if before in blocks:
                    prev = max(unit for unit in blocks[before].ids if unit < rowid)
                if home in blocks:
                    nxt = next((unit for unit in blocks[home].ids if unit > rowid), after)
                else:
                    nxt = after
                out[rowid] = (prev, nxt)
        return out

    def every(self) -> Iterator[list[UnitRow]]:
        """Every block's units, block by block (raises ``sqlite3.DatabaseError`` if damaged)."""
        for base, data in self._con.execute("SELECT id, data FROM blocks ORDER BY id"):
            yield self._unpack(base, data)

    # -- writes (inside the caller's write transaction) ---------------------------------

    def write(self, lo: int, hi: int, changes: Mapping[int, UnitRow | None]) -> None:
        """Apply ``changes`` (``row id: unit``, ``None`` to delete) to the file ``[lo, hi)``.

        Only the blocks the changed ids fall in are written again: an append rewrites the
        file's last block (filling it up) and adds new ones after it.
        """
        self._cache.clear()
        todo = sorted(changes)
        con = self._con
        i = 0
        while i < len(todo):
            row = con.execute(
                "SELECT id, data FROM blocks WHERE id <= ? AND id >= ? ORDER BY id DESC LIMIT 1",
                (todo[i], lo),
            ).fetchone()
            after = con.execute(
                "SELECT min(id) FROM blocks WHERE id > ? AND id < ?", (todo[i], hi)
            ).fetchone()[0]
            end = hi if after is None else int(after)
            units = {u[0]: u for u in self._unpack(row[0], row[1])} if row is not None else {}
            while i < len(todo) and todo[i] < end:
                unit = changes[todo[i]]
                if unit is None:
                    units.pop(todo[i], None)
                else:
                    units[todo[i]] = unit
                i += 1
            if row is not None:
                con.execute("DELETE FROM blocks WHERE id = ?", (row[0],))
            self._insert([units[rowid] for rowid in sorted(units)])

    def drop(self, lo: int, hi: int) -> None:
        """Delete the units in ``[lo, hi)`` (a whole file's range)."""
        self._cache.clear()
        self._con.execute("DELETE FROM blocks WHERE id >= ? AND id < ?", (lo, hi))

    def clear(self) -> None:
        """Delete every unit and dictionary."""
        self._cache.clear()
        self._con.execute("DELETE FROM blocks")
        self._con.execute("DELETE FROM block_dicts")

    # -- dictionary ---------------------------------------------------------------------

    def needs_training(self, units: int) -> bool:
        """Whether an index of ``units`` units should train its dictionary (again)."""
        if units < TRAIN_UNITS:
            return False
        row = self._con.execute("SELECT units FROM block_dicts ORDER BY id DESC LIMIT 1").fetchone()
        return row is None or units >= row[0] * RETRAIN_GROWTH

    def train(self, units: int) -> bool:
        """Train a dictionary on a sample of the stored texts and compress every block again
        with it (inside the caller's write transaction; about 4 s per million units).

        ``False`` when the sample is too small or zstd cannot train on it: the blocks then
        stay as they are.
        """
        con = self._con
        blocks = con.execute("SELECT count(*) FROM blocks").fetchone()[0]
        step = max(1, blocks * BLOCK_UNITS // _SAMPLE_UNITS)
        sample: list[bytes | bytearray | memoryview] = [
            unit[3].encode(*_ENCODING)
            for i, (base, data) in enumerate(con.execute("SELECT id, data FROM blocks"))
            if i % step == 0
            for unit in self._unpack(base, data)
        ]
        if sum(map(len, sample)) < _MIN_SAMPLE_BYTES:
            return False
        try:
            trained = zstandard.train_dictionary(_DICT_BYTES, sample, k=200, d=8, level=_LEVEL)
        except zstandard.ZstdError:
            return False
        number = int(con.execute("SELECT max(id) FROM block_dicts").fetchone()[0] or 0) % 255 + 1
        con.execute("DELETE FROM block_dicts WHERE id = ?", (number,))
        con.execute(
            "INSERT INTO block_dicts(id, units, data) VALUES (?, ?, ?)",
            (number, units, trained.as_bytes()),
        )
        self._readers.pop(number, None)
        prefix = bytes((number,))
        writer = zstandard.ZstdCompressor(level=_LEVEL, dict_data=trained, write_checksum=True)
        last = -1
        while batch := con.execute(
            "SELECT id, data FROM blocks WHERE id > ? ORDER BY id LIMIT 2000", (last,)
        ).fetchall():
            con.executemany(
                "UPDATE blocks SET data = ? WHERE id = ?",
                [
                    (prefix + writer.compress(encode_block(self._unpack(base, data))), base)
                    for base, data in batch
                ],
            )
            last = batch[-1][0]
        con.execute("DELETE FROM block_dicts WHERE id != ?", (number,))
        self._writer = None
        self._cache.clear()
        return True
