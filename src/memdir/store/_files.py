"""The file store: a workspace as a directory on one machine (memdir's default).

Reads walk from the root race-free (:mod:`memdir.store._safeopen`), rewrites are temp file +
fsync + ``os.replace``, appends are one ``write`` under an ``flock``, compare-and-swap and
named locks are ``flock``\\ s on lock files under ``.index/locks/`` (a lock lent to a client of
``memdir serve`` is a lease file beside it: :mod:`._lent_locks`). Several processes on one
machine may share the directory; hosts sharing it over NFS are not safe (use PostgreSQL).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import stat
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import ClassVar

from memdir.errors import WorkspaceError
from memdir.store._base import (
    LENT_LOCK_SECONDS,
    Entry,
    FileStat,
    Store,
    Versioned,
    held_too_long,
)
from memdir.store._fileio import (
    async_file_lock,
    atomic_create_in,
    atomic_write_in,
    file_lock,
    fsync_dir,
    locked_append_in,
)
from memdir.store._lent_locks import LentLock
from memdir.store._safeopen import (
    Area,
    PathMissing,
    check_regular,
    locate,
    open_dir,
    open_parent,
    open_regular,
    read_fd,
    warn_skipped,
)
from memdir.store.namespaces import list_namespaces

__all__ = ["FileStore", "content_version", "lock_name"]

logger = logging.getLogger("memdir.store")
_LOCK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
LOCKS_DIR = ".index/locks"
_POLL = (0.02, 0.5)  # seconds between looks at a lock lent elsewhere: first, longest


def lock_name(name: object) -> str:
    """``name`` if it is a valid lock name, else :class:`WorkspaceError`."""
    if not isinstance(name, str) or not _LOCK_NAME.fullmatch(name):
        raise WorkspaceError(
            f"invalid lock name {name!r}: use 1-100 characters of A-Z a-z 0-9 _ . -"
        )
    return name


def content_version(data: bytes) -> str:
    """The version of a file's content in the file store (a hash: equal content, equal
    version, whatever happened to the file in between)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _tag(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def _stat_of(st: os.stat_result) -> FileStat:
    return FileStat(
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        tag=_tag(st),
        identity=f"{st.st_dev}:{st.st_ino}",
    )


class FileStore(Store):
    """Files under ``root`` (the workspace directory, or a namespace's directory in it).

    Args:
        root: where this store's files are.
        base: the workspace directory (holds ``ns/``, listed by :meth:`namespaces`).
    """

    kind: ClassVar[str] = "files"

    def __init__(self, root: Path, base: Path) -> None:
        self.root = root
        self.base = base

    def describe(self) -> str:
        return str(self.root)

    # -- reading ----------------------------------------------------------------------------

    def read(self, rel: str, area: Area) -> bytes:
        with open_regular(self.root, rel, area) as (fd, _):
            return read_fd(fd, rel)

    def read_versioned(self, rel: str, area: Area) -> Versioned | None:
        try:
            data = self.read(rel, area)
        except PathMissing:
            return None
        return Versioned(data=data, version=content_version(data))

    def read_from(self, rel: str, offset: int, area: Area) -> bytes:
        with open_regular(self.root, rel, area) as (fd, _):
            os.lseek(fd, max(0, offset), os.SEEK_SET)
            return read_fd(fd, rel)

    def stat(self, rel: str, area: Area) -> FileStat | None:
        try:
            _, st = locate(self.root, rel, area)
        except PathMissing:
            return None
        if st is None:
            return None
        check_regular(rel, st.st_mode)
        return _stat_of(st)

    def listdir(self, rel_dir: str, area: Area) -> list[Entry]:
        out: list[Entry] = []
        try:
            with open_dir(self.root, rel_dir, area) as dir_fd, os.scandir(dir_fd) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        out.append(Entry(name=entry.name, kind="dir"))
                    elif stat.S_ISREG(st.st_mode):
                        out.append(
                            Entry(
                                name=entry.name,
                                kind="file",
                                stat=_stat_of(st),
                            )
                        )
                    elif not entry.name.startswith("."):
                        # A link (followed within the area only) or a FIFO, socket or
                        # device: listed only if it reads as a regular file; else skipped
                        # with a warning, once.
                        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                        try:
                            found = self.stat(rel, area)
                        except WorkspaceError as exc:
                            warn_skipped(logger, self.root, exc)
                            continue
                        if found is not None:
                            out.append(Entry(name=entry.name, kind="file", stat=found))
        except PathMissing:
            return []
        except OSError as exc:
            raise WorkspaceError(f"cannot list {rel_dir or '.'}: {exc.strerror}") from exc
        out.sort(key=lambda e: e.name)
        return out

    # -- writing ----------------------------------------------------------------------------

    def write(self, rel: str, data: bytes, area: Area) -> None:
        with self._file_lock(rel):
            atomic_write_in(self.root, rel, data, area)

    def create(self, rel: str, data: bytes, area: Area) -> bool:
        return atomic_create_in(self.root, rel, data, area)

    def replace_if(self, rel: str, data: bytes, version: str | None, area: Area) -> bool:
        # Rewrites of one file go through its lock, so the read and the rename here are one
        # step against every other rewrite (appends hold the file's own flock).
        with self._file_lock(rel):
            current = self.read_versioned(rel, area)
            if (current.version if current is not None else None) != version:
                return False
            atomic_write_in(self.root, rel, data, area)
            return True

    def _file_lock(self, rel: str) -> contextlib.AbstractContextManager[None]:
        digest = hashlib.blake2b(rel.encode("utf-8"), digest_size=8).hexdigest()
        return file_lock(self.root / LOCKS_DIR / f"file-{digest}.lock")

    def append(self, rel: str, data: bytes, area: Area, *, fsync: bool = True) -> tuple[int, int]:
        new = fsync and self.stat(rel, area) is None
        span = locked_append_in(self.root, rel, data, area, fsync=fsync)
        if new:  # a new file's directory entry must reach the disk too
            with contextlib.suppress(OSError):
                fsync_dir((self.root / rel).parent)
        return span

    def delete(self, rel: str, area: Area) -> bool:
        try:
            with open_parent(self.root, rel, area, create=False) as (dir_fd, name, _, st):
                if st is None:
                    return False
                os.unlink(name, dir_fd=dir_fd)
                return True
        except PathMissing:
            return False
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise WorkspaceError(f"cannot delete {rel}: {exc.strerror}") from exc

    # -- coordination -----------------------------------------------------------------------

    def lent_lock(self, name: str) -> LentLock:
        return LentLock(self.root / LOCKS_DIR / f"{lock_name(name)}.lock", ttl=LENT_LOCK_SECONDS)

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        lent = self.lent_lock(name)
        wait = _POLL[0]
        while True:
            with file_lock(lent.path):
                if not lent.blocks():
                    yield
                    return
            time.sleep(wait)  # lent to a holder elsewhere: wait for its lease to end
            wait = min(wait * 2, _POLL[1])

    @contextlib.asynccontextmanager
    async def async_lock(self, name: str, *, timeout: float) -> AsyncIterator[None]:
        lent = self.lent_lock(name)
        deadline = time.monotonic() + timeout
        wait = _POLL[0]
        while True:
            left = max(0.0, deadline - time.monotonic())
            async with async_file_lock(lent.path, timeout=left):
                if not lent.blocks():
                    yield
                    return
            if time.monotonic() >= deadline:
                raise held_too_long(name, timeout)
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL[1])

    def exists(self) -> bool:
        return (self.root / "MEMORY.md").is_file() or (self.root / "memory").is_dir()

    def namespaces(self) -> list[str]:
        return list_namespaces(self.base)
