"""Bringing an engine in line with the workspace's memory files (the work of a refresh)."""

from __future__ import annotations

import time
from collections.abc import Callable

from memdir.index._engine import Engine, FileInfo, SyncResult
from memdir.index._paths import ledger_day
from memdir.index._source import FileSource, source_of
from memdir.index._types import IndexStats
from memdir.store.workspace import Workspace

__all__ = [
    "MAX_SEGMENTS",
    "MERGE_AFTER_UNITS",
    "SMALL_INDEX_UNITS",
    "Damaged",
    "sync_one",
    "sync_workspace",
]

MERGE_AFTER_UNITS = 10_000
"""A sync that wrote this many units (a build, an import) ends by merging the search index."""
SMALL_INDEX_UNITS = 100_000
"""An index of at most this many units is merged after any sync that leaves it in more than
:data:`MAX_SEGMENTS` segments: it takes milliseconds (about 1 ms per thousand units), and a
search looks every term up in every segment (a memory of a few dozen days built file by file
is a dozen segments: long queries took 2.7 ms instead of 1.8)."""
MAX_SEGMENTS = 4
"""More segments than this are worth merging (after a sync of a small index, and in
maintenance: :meth:`memdir.index.MemoryIndex.optimize`)."""


class Damaged(Exception):
    """The database was found damaged while in use (it is rebuilt from the files)."""


def _index_order(rel: str) -> tuple[bool, int, str]:
    # Oldest ledgers first (archive included), then other files: row ids then grow with time.
    day = ledger_day(rel)
    return (day is None, day or 0, rel)


def sync_one(
    workspace: Workspace | FileSource,
    engine: Engine,
    rel: str,
    *,
    tail: bool,
    mark: int | None = None,
) -> SyncResult:
    """Sync one file: from its old end when it only grew (``tail``), else read whole."""
    source = source_of(workspace) if isinstance(workspace, Workspace) else workspace
    if tail:
        result = engine.sync_tail(
            rel,
            lambda offset, state, size: source.tail(rel, offset, state.inode, size),
            mark=mark,
        )
        if result is not None:
            return result
    return engine.sync_file(rel, lambda: source.load(rel))


def _check_file(source: FileSource, engine: Engine, info: FileInfo) -> None:
    """Raise :class:`Damaged` unless the rows of an unchanged file match the file."""
    snap = source.load(info.path)
    if snap is None or snap.digest != info.digest:
        return  # it changed meanwhile: the next sync diffs it
    if not engine.matches(info, snap.parse()):
        raise Damaged(f"it is damaged (the rows of {info.path} differ from the file)")


def sync_workspace(
    workspace: Workspace,
    engine: Engine,
    *,
    full: bool = False,
    check: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> IndexStats:
    """Sync every memory file into ``engine`` (see :meth:`MemoryIndex.index_all_from_workspace`).

    Raises:
        Damaged: ``check`` found rows that differ from their unchanged file.
    """
    started = time.perf_counter()
    source = source_of(workspace)
    if full:
        engine.reset()
    stored = {info.path: info for info in engine.files_by_id().values()}
    found = source.listing()
    on_disk = list(found)
    if full or len(on_disk) != len(stored) or any(rel not in stored for rel in on_disk):
        on_disk.sort(key=_index_order)  # new files get ids in date order
    indexed = unchanged = removed = lines = 0
    total = len(on_disk)
    for done, rel in enumerate(on_disk, start=1):
        info = stored.get(rel)
        stamp, size = found[rel]
        here = size >= 0
        if here and info is not None and (info.mtime_ns, info.size) == (stamp, size):
            unchanged += 1
            if check:
                _check_file(source, engine, info)
            if progress is not None:
                progress(done, total)
            continue
        grown = here and info is not None and size > info.size
        if here and info is not None and size == info.size:
            # Most often a file whose last write was too recent to trust its time: compare
            # it before taking the write lock, and hold the lock only to record that.
            snap = source.load(rel)
            if snap is not None and snap.digest == info.digest and engine.confirm(rel, snap):
                unchanged += 1
                if check and not engine.matches(info, snap.parse()):
                    raise Damaged(f"it is damaged (the rows of {rel} differ from the file)")
                if progress is not None:
                    progress(done, total)
                continue
            # It changed, or grew and was indexed by another process meanwhile: the tail
            # path takes an append, and leaves anything else to a whole read.
            grown = snap is not None
        result = sync_one(source, engine, rel, tail=grown)
        if result.changed:
            indexed += 1
            lines += result.inserted
        else:
            unchanged += 1
        if progress is not None:
            progress(done, total)
    for rel in sorted(set(stored) - set(on_disk)):
        if source.gone(rel) and engine.remove_file(rel):
            removed += 1
    if lines >= MERGE_AFTER_UNITS:
        engine.optimize(compact=True)
    elif indexed and engine.totals()[0] <= SMALL_INDEX_UNITS:
        engine.optimize(above=MAX_SEGMENTS)
    return IndexStats(
        files_indexed=indexed,
        files_unchanged=unchanged,
        files_removed=removed,
        lines_indexed=lines,
        seconds=time.perf_counter() - started,
    )
