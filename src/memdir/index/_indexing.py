"""Bringing an engine in line with the workspace's memory files (the work of a refresh)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable

from memdir.index._append import read_tail
from memdir.index._engine import Engine, FileInfo, SyncResult
from memdir.index._paths import is_plain_file, ledger_day, load_snapshot
from memdir.index._types import IndexStats
from memdir.store.workspace import Workspace

__all__ = ["Damaged", "sync_one", "sync_workspace"]


class Damaged(Exception):
    """The database was found damaged while in use (it is rebuilt from the files)."""


def _index_order(rel: str) -> tuple[bool, int, str]:
    # Oldest ledgers first (archive included), then other files: row ids then grow with time.
    day = ledger_day(rel)
    return (day is None, day or 0, rel)


def sync_one(
    workspace: Workspace, engine: Engine, rel: str, *, tail: bool, mark: int | None = None
) -> SyncResult:
    """Sync one file: from its old end when it only grew (``tail``), else read whole."""
    root = workspace.root
    if tail:
        result = engine.sync_tail(
            rel,
            lambda offset, state, size: read_tail(
                root, rel, offset, inode=state.inode, min_size=size
            ),
            mark=mark,
        )
        if result is not None:
            return result
    return engine.sync_file(rel, functools.partial(load_snapshot, root, rel))


def _check_file(workspace: Workspace, engine: Engine, info: FileInfo) -> None:
    """Raise :class:`Damaged` unless the rows of an unchanged file match the file."""
    snap = load_snapshot(workspace.root, info.path)
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
    if full:
        engine.reset()
    stored = {info.path: info for info in engine.files_by_id().values()}
    on_disk = workspace.memory_files()
    if full or len(on_disk) != len(stored) or any(rel not in stored for rel in on_disk):
        on_disk.sort(key=_index_order)  # new files get ids in date order
    indexed = unchanged = removed = lines = 0
    total = len(on_disk)
    root = str(workspace.root)
    for done, rel in enumerate(on_disk, start=1):
        path = f"{root}/{rel}"
        info = stored.get(rel)
        try:
            st: os.stat_result | None = os.stat(path)  # noqa: PTH116 - hot loop
        except OSError:
            st = None
        if (
            st is not None
            and info is not None
            and (info.mtime_ns, info.size) == (st.st_mtime_ns, st.st_size)
        ):
            unchanged += 1
            if check:
                _check_file(workspace, engine, info)
            if progress is not None:
                progress(done, total)
            continue
        grown = st is not None and info is not None and st.st_size > info.size
        if st is not None and info is not None and st.st_size == info.size:
            # Most often a file whose last write was too recent to trust its time: compare
            # it before taking the write lock, and hold the lock only to record that.
            snap = load_snapshot(workspace.root, rel)
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
        result = sync_one(workspace, engine, rel, tail=grown)
        if result.changed:
            indexed += 1
            lines += result.inserted
        else:
            unchanged += 1
        if progress is not None:
            progress(done, total)
    for rel in sorted(set(stored) - set(on_disk)):
        if not is_plain_file(workspace.root, rel) and engine.remove_file(rel):
            removed += 1
    return IndexStats(
        files_indexed=indexed,
        files_unchanged=unchanged,
        files_removed=removed,
        lines_indexed=lines,
        seconds=time.perf_counter() - started,
    )
