"""Where the index reads memory files from: the disk, or the workspace's store.

A workspace in a directory is read the fast way (one ``O_NOFOLLOW`` walk from the root and a
shared ``flock`` per read, :func:`memdir.index._paths.load_snapshot`); one kept elsewhere
(PostgreSQL) is read through :class:`~memdir.store.workspace.Workspace`, whose store reads a
file's bytes and version in one transaction. Either way the index sees whole files, never half
an append.

A store's file version changes with every write or append, so it stands in for the change time
there: an unchanged ``(version, size)`` means an unchanged file, with no timestamp to distrust.
"""

from __future__ import annotations

import os
from typing import Protocol

from memdir.errors import WorkspaceError
from memdir.index._append import TailRead, read_tail
from memdir.index._engine import FileSnapshot
from memdir.index._paths import digest, is_plain_file, load_snapshot
from memdir.store.workspace import ARCHIVE_DIR, MEMORY_DIR, MEMORY_MD, Workspace

__all__ = ["FileSource", "LocalSource", "StoreSource", "source_of"]


class FileSource(Protocol):
    """The reads an index sync needs."""

    def listing(self) -> dict[str, tuple[int, int]]:
        """Every memory file, with ``(change stamp, size)`` (stamp ``-1``: unknown)."""

    def load(self, rel: str) -> FileSnapshot | None:
        """The whole file, or ``None`` when there is nothing to index."""

    def tail(self, rel: str, offset: int, identity: int, min_size: int) -> TailRead | None:
        """The bytes from ``offset`` on, if it is still file ``identity`` of ``min_size`` bytes."""

    def gone(self, rel: str) -> bool:
        """Whether an indexed file the listing left out is to lose its rows."""


class LocalSource:
    """Memory files in a directory."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.root = workspace.root

    def listing(self) -> dict[str, tuple[int, int]]:
        root = str(self.root)
        out: dict[str, tuple[int, int]] = {}
        for rel in self.workspace.memory_files():
            try:
                st = os.stat(f"{root}/{rel}")  # noqa: PTH116 - hot loop
            except OSError:
                out[rel] = (-1, -1)
                continue
            out[rel] = (st.st_mtime_ns, st.st_size)
        return out

    def load(self, rel: str) -> FileSnapshot | None:
        return load_snapshot(self.root, rel)

    def tail(self, rel: str, offset: int, identity: int, min_size: int) -> TailRead | None:
        return read_tail(self.root, rel, offset, inode=identity, min_size=min_size)

    def gone(self, rel: str) -> bool:
        return not is_plain_file(self.root, rel)


def _number(tag: str) -> int:
    """A store's version or identity tag as a non-negative integer (``-1``: not a number)."""
    return int(tag) if tag.isdigit() else -1


class StoreSource:
    """Memory files kept by the workspace's store (PostgreSQL), read through the workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def listing(self) -> dict[str, tuple[int, int]]:
        ws = self.workspace
        out: dict[str, tuple[int, int]] = {}
        top = ws.stat(MEMORY_MD)
        if top is not None:
            out[MEMORY_MD] = (_number(top.tag), top.size)
        for rel_dir in (MEMORY_DIR, ARCHIVE_DIR):
            for entry in ws.listdir(rel_dir):
                if entry.kind != "file" or entry.stat is None or entry.name.startswith("."):
                    continue
                if entry.name.endswith(".md"):
                    out[f"{rel_dir}/{entry.name}"] = (_number(entry.stat.tag), entry.stat.size)
        return dict(sorted(out.items()))

    def load(self, rel: str) -> FileSnapshot | None:
        found = self.workspace.read_versioned(rel)
        if found is None:
            return None
        data = found.data
        return FileSnapshot(
            text=data.decode("utf-8", errors="replace"),
            data=data,
            digest=digest(data),
            mtime_ns=_number(found.version),
            size=len(data),
        )

    def tail(self, rel: str, offset: int, identity: int, min_size: int) -> TailRead | None:
        ws = self.workspace
        st = ws.stat(rel)
        if st is None or _number(st.identity) != identity or st.size < min_size:
            return None
        try:
            data = ws.read_from(rel, offset)
        except WorkspaceError:
            return None
        if offset + len(data) < min_size:
            return None  # replaced by a shorter file meanwhile
        return TailRead(offset, data)

    def gone(self, rel: str) -> bool:
        return self.workspace.stat(rel) is None


def source_of(workspace: Workspace) -> FileSource:
    """The source for ``workspace``: its directory, or its store."""
    return LocalSource(workspace) if workspace.is_local else StoreSource(workspace)
