"""The storage engine behind :class:`~memdir.index.MemoryIndex` (a small internal protocol).

:class:`MemoryIndex` owns the workspace side (which files, when to look, ranking); an engine
owns storage: per-file rows, incremental diffs in one short write transaction per file, and
cheap candidate retrieval. SQLite FTS5 (:mod:`memdir.index._sqlite`) is the embedded default;
another backend only has to implement :class:`Engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memdir.index._markdown import ParsedFile, parse_markdown
from memdir.index._schema import LINE_BITS

if TYPE_CHECKING:
    from memdir.index._append import TailRead, TailState

__all__ = [
    "Engine",
    "FileInfo",
    "FileSnapshot",
    "StoredRow",
    "SyncResult",
    "heading_ids",
    "stored_rows",
]


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What the engine remembers about one indexed file.

    ``mtime_ns`` is ``-1`` when the recorded stat cannot be trusted (the file was modified
    within the file system's timestamp granularity, or indexed from a string): the next check
    then compares content hashes.
    """

    id: int
    path: str
    mtime_ns: int
    size: int
    digest: bytes
    day: int | None  # proleptic ordinal of the ledger's date, if the name is a date
    archived: bool
    curated: bool  # MEMORY.md
    units: int = 0  # searchable units the file holds


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    """A file's content as read for indexing, with the stat taken before the read.

    ``size`` and ``inode`` are ``-1`` when the content did not come from disk.
    """

    text: str
    data: bytes
    digest: bytes
    mtime_ns: int
    size: int
    inode: int = -1

    def parse(self) -> ParsedFile:
        """Units and headings of the whole file."""
        return parse_markdown(self.text)


@dataclass(frozen=True, slots=True)
class SyncResult:
    """Outcome of syncing one file: units inserted or replaced, units now held, changed.

    ``line``: the number of the line starting at the byte offset the caller asked about.
    """

    inserted: int
    units: int
    changed: bool
    line: int | None = None


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A unit as stored: file, lines, heading and text."""

    rowid: int
    file: FileInfo
    line_number: int
    line_end: int
    head: int  # line of the heading above (0: none); equal values = same section
    heading: str | None
    content: str
    words: int = 0  # tokens in ``content``
    terms: str = ""  # where each of them stands (:mod:`memdir.index._unit_terms`)


UnitRow = tuple[int, int, int, str, int, str]
"""A unit as an engine reads it for a search: ``(row id, line_end, head, content, words,
terms)`` (the last two: :func:`memdir.index._unit_terms.unit_terms` of the content)."""

_LINE_MASK = (1 << LINE_BITS) - 1


def heading_ids(raw: Sequence[UnitRow]) -> list[int]:
    """Row ids of the headings the units of ``raw`` sit under, sorted."""
    return sorted({(row[0] & ~_LINE_MASK) | row[2] for row in raw if row[2]})


def stored_rows(
    raw: Sequence[UnitRow], files: dict[int, FileInfo], headings: dict[int, str]
) -> list[StoredRow]:
    """:class:`StoredRow` of each unit of ``raw`` whose file is in ``files``."""
    out: list[StoredRow] = []
    for rowid, end, head, content, words, terms in raw:
        info = files.get(rowid >> LINE_BITS)
        if info is None:
            continue
        out.append(
            StoredRow(
                rowid=rowid,
                file=info,
                line_number=rowid & _LINE_MASK,
                line_end=end,
                head=head,
                heading=headings.get((rowid & ~_LINE_MASK) | head) if head else None,
                content=content,
                words=words,
                terms=terms,
            )
        )
    return out


class Engine(Protocol):
    """Storage operations :class:`MemoryIndex` needs."""

    def close(self) -> None:
        """Release the connection."""

    def snapshot(self) -> AbstractContextManager[None]:
        """A read transaction: queries inside it see one consistent state."""

    def files(self) -> dict[str, FileInfo]:
        """Every indexed file by workspace-relative path."""

    def files_by_id(self) -> dict[int, FileInfo]:
        """Every indexed file by id."""

    def sync_file(
        self, path: str, load: Callable[[], FileSnapshot | None], *, force: bool = False
    ) -> SyncResult:
        """Bring one file's rows in line with ``load()`` (``None``: the file is gone).

        ``load`` runs inside the write transaction, so the last writer indexes the newest
        content. Unchanged units are kept; only new or changed units are written. ``force``
        rewrites every unit even if the content hash is unchanged.
        """

    def confirm(self, path: str, snap: FileSnapshot) -> bool:
        """Record the stat of an unchanged file read beforehand, if its rows are still as read.

        ``False`` when the stored digest or size differ from ``snap`` (sync it instead).
        """

    def sync_tail(
        self,
        path: str,
        read: Callable[[int, TailState, int], TailRead | None],
        *,
        mark: int | None = None,
    ) -> SyncResult | None:
        """Index what was appended to a file, reading only its end; ``None``: read it whole.

        ``read(offset, state, size)`` gives the file's bytes from ``offset`` on, or ``None``
        unless it is still the file of ``state`` and at least ``size`` bytes long. With
        ``mark``, :attr:`SyncResult.line` is the number of the line starting at that byte.
        """

    def damage(self) -> str | None:
        """What an integrity check of the storage finds wrong, or ``None`` when it is sound."""

    def matches(self, info: FileInfo, parsed: ParsedFile) -> bool:
        """Whether the stored units and headings of a file are exactly ``parsed``."""

    def remove_file(self, path: str) -> bool:
        """Drop a file's rows; ``False`` when it was not indexed."""

    def optimize(self, *, above: int = 1, compact: bool = False) -> bool:
        """Merge the search structures if they are split in more than ``above`` parts.

        Results stay the same; searches get faster. ``compact`` also gives the space freed
        back to the file system. Returns whether anything was merged.
        """

    def reset(self) -> None:
        """Drop every row (a full rebuild follows)."""

    def newest_day(self) -> int | None:
        """The most recent ledger date in the index (proleptic ordinal), if any."""

    def totals(self) -> tuple[int, float]:
        """``(rows, average tokens per row)`` of the whole index."""

    def rows_from(self, rowid: int) -> int:
        """Number of units whose id is ``rowid`` or higher."""

    def rowids(
        self,
        terms: Sequence[tuple[str, ...]],
        limit: int,
        *,
        within: tuple[int, int] | None = None,
    ) -> list[int]:
        """Up to ``limit`` ids of rows holding every term, newest files first, unranked.

        A term is a phrase of folded, unstemmed tokens (:attr:`memdir.index._query.Term.tokens`):
        its tokens, stemmed, in a row in that order and next to each other (a word of CJK
        characters: within one run of them; the SQLite engine does not match it across
        punctuation). ``within`` keeps the ids of a range ``[lo, hi)``.
        """

    def neighbors(self, rowids: Sequence[int]) -> dict[int, tuple[int | None, int | None]]:
        """The previous and next unit of the same file for each row id."""

    def fetch(self, rowids: Sequence[int]) -> list[StoredRow]:
        """The stored rows for ``rowids`` (missing ids are skipped), in no particular order."""

    def lengths(self, rowids: Sequence[int], longer: int) -> dict[int, int]:
        """The token count of each row of ``rowids`` that is longer than ``longer`` tokens
        (:attr:`StoredRow.words`; missing ids and shorter rows are left out)."""

    def units_of(self, file_id: int) -> list[tuple[int, int, str]]:
        """``(row id, head, content)`` of every unit of one file, in line order (``head``: the
        line of the heading above, 0 for none; equal values = same section)."""
