"""The storage seam: what memdir's memory code needs from where the files are kept.

A :class:`Store` holds one workspace's files (one namespace of it) under workspace-relative
POSIX paths that :class:`~memdir.store.workspace.Workspace` has already confined. Two stores
implement it: plain files on one machine (:mod:`memdir.store._files`, the default) and
PostgreSQL for many hosts (:mod:`memdir.store.postgres`). Every operation is atomic on its
own, so several processes (and, with PostgreSQL, several hosts) may share one memory:

- :meth:`append` adds bytes at the end in one step: concurrent appends never tear or
  interleave, and each lands whole or not at all;
- :meth:`write` replaces a file whole; readers see the old or the new content;
- :meth:`replace_if` replaces it only if it still has the version that was read
  (compare-and-swap), which is how state records and leases are updated without a lock;
- :meth:`lock` is an exclusive section that holds across processes (and hosts) and is given
  up by a holder that dies (the kernel drops a file lock; a PostgreSQL lock row expires);
  :meth:`take_lock` lends the same lock to a holder elsewhere (a client of ``memdir serve``),
  known by a token, which renews it itself and loses it when it stops.
"""

from __future__ import annotations

import abc
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, Protocol

from memdir.errors import MemdirError, WorkspaceError
from memdir.store._safeopen import Area

__all__ = [
    "LENT_LOCK_SECONDS",
    "Entry",
    "FileStat",
    "LendableLock",
    "Store",
    "Versioned",
    "held_too_long",
]

LENT_LOCK_SECONDS: Final = 30.0
"""How long a lock lent by :meth:`Store.take_lock` lasts after its last renewal."""


@dataclass(frozen=True, slots=True)
class FileStat:
    """What a store knows about a file without reading it.

    Attributes:
        size: bytes.
        mtime_ns: last change, nanoseconds since the epoch.
        tag: changes whenever the file does (an opaque token to compare for equality; not the
            version :meth:`Store.replace_if` takes, which comes from
            :meth:`Store.read_versioned`).
    """

    size: int
    mtime_ns: int
    tag: str
    identity: str = ""
    """Changes when the file is replaced or re-created, not when it is appended to (a reader
    of an append-only file may then go on from where it stopped)."""


def held_too_long(name: str, timeout: float) -> MemdirError:
    """The error of a wait for the lock ``name`` given up after ``timeout`` seconds."""
    return MemdirError(
        f"lock {name!r} is held by another writer for over {timeout:g} s; try again later"
    )


class LendableLock(Protocol):
    """A store's named lock as lent to holders elsewhere, each known by a token."""

    def take(self, token: str) -> bool:
        """Take it for ``token`` if nobody holds it (never waits)."""

    def renew(self, token: str) -> bool:
        """Extend ``token``'s hold; whether it still held it."""

    def drop(self, token: str) -> bool:
        """Give it up; whether ``token`` still held it."""


@dataclass(frozen=True, slots=True)
class Versioned:
    """A file's content and the version it was read at (for :meth:`Store.replace_if`)."""

    data: bytes
    version: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One name in a directory listing: a file (with its stat) or a sub-directory."""

    name: str
    kind: Literal["file", "dir"]
    stat: FileStat | None = None


class Store(abc.ABC):
    """Where one workspace's (or one namespace's) files are kept.

    Paths are workspace-relative and already confined. ``area`` says which part of the
    workspace the caller may reach (a file store follows a symlink only within it); a store
    without symlinks ignores it.
    """

    kind: ClassVar[str]
    """``"files"``, ``"postgresql"`` or ``"remote"`` (a ``memdir serve`` server)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the files are, for messages (a directory, or a database and namespace)."""

    def init(self) -> None:  # noqa: B027 - optional: most stores need nothing
        """Prepare the store for use (directories, schema); idempotent."""

    def close(self) -> None:  # noqa: B027 - optional: most stores hold nothing open
        """Release connections and threads (the store may not be used afterwards)."""

    # -- reading ----------------------------------------------------------------------------

    @abc.abstractmethod
    def read(self, rel: str, area: Area) -> bytes:
        """The whole file.

        Raises:
            PathMissing: no such file.
            WorkspaceError: it cannot be read (refused, or the store failed).
        """

    @abc.abstractmethod
    def read_versioned(self, rel: str, area: Area) -> Versioned | None:
        """The whole file and its version, read together; ``None`` if it does not exist."""

    @abc.abstractmethod
    def read_from(self, rel: str, offset: int, area: Area) -> bytes:
        """The file's bytes from ``offset`` to its end (``b""`` past the end).

        Raises:
            PathMissing: no such file.
        """

    @abc.abstractmethod
    def stat(self, rel: str, area: Area) -> FileStat | None:
        """The file's size, change time and version; ``None`` if it does not exist."""

    @abc.abstractmethod
    def listdir(self, rel_dir: str, area: Area) -> list[Entry]:
        """The files and sub-directories directly in ``rel_dir`` (``""``: the top), by name.

        A missing directory lists as empty; dot-names are included (the caller filters).
        """

    # -- writing ----------------------------------------------------------------------------

    @abc.abstractmethod
    def write(self, rel: str, data: bytes, area: Area) -> None:
        """Replace (or create) the file with ``data``, atomically."""

    @abc.abstractmethod
    def create(self, rel: str, data: bytes, area: Area) -> bool:
        """Create the file with ``data`` unless it exists; whether this call created it."""

    @abc.abstractmethod
    def replace_if(self, rel: str, data: bytes, version: str | None, area: Area) -> bool:
        """Replace the file only if its version is still ``version`` (``None``: it must not
        exist yet); whether it was replaced. Atomic with respect to every other writer."""

    @abc.abstractmethod
    def append(self, rel: str, data: bytes, area: Area, *, fsync: bool = True) -> tuple[int, int]:
        """Append ``data`` at the end (creating the file), as one atomic step.

        When the file does not end in a newline (a torn earlier write), a newline goes first.
        Returns the ``(start, end)`` byte offsets of ``data``.
        """

    @abc.abstractmethod
    def delete(self, rel: str, area: Area) -> bool:
        """Remove the file; whether it existed."""

    # -- coordination -----------------------------------------------------------------------

    @abc.abstractmethod
    def lock(self, name: str) -> AbstractContextManager[None]:
        """An exclusive section named ``name``, across processes (and hosts); blocks."""

    @abc.abstractmethod
    def async_lock(self, name: str, *, timeout: float) -> AbstractAsyncContextManager[None]:
        """:meth:`lock` for async code, given up after ``timeout`` seconds of waiting.

        Raises:
            MemdirError: the lock was not free within ``timeout`` seconds.
        """

    def lent_lock(self, name: str) -> LendableLock:
        """The lock ``name`` (as :meth:`lock` takes it) as lent to holders elsewhere.

        Raises:
            WorkspaceError: the name is not valid, or this store does not lend its locks.
        """
        raise WorkspaceError(f"the {self.kind} store does not lend its locks")

    def take_lock(self, name: str, token: str) -> bool:
        """Take the lock ``name`` for a holder elsewhere known by ``token`` (a UUID), if
        nobody holds it; never waits.

        The holder renews it with :meth:`renew_lock` within every :data:`LENT_LOCK_SECONDS`
        and gives it up with :meth:`drop_lock`; one that stops renewing loses it when that
        time is up. It excludes the users of :meth:`lock` as they exclude it. Taking it again
        with the same token (a retry after a lost answer) succeeds and renews it.

        Raises:
            WorkspaceError: the name or token is not valid, the store cannot be reached, or
                it does not lend its locks.
        """
        return self.lent_lock(name).take(token)

    def renew_lock(self, name: str, token: str) -> bool:
        """Hold the lock lent to ``token`` :data:`LENT_LOCK_SECONDS` more; whether ``token``
        still held it (``False``: it was lost, stop what it guarded)."""
        return self.lent_lock(name).renew(token)

    def drop_lock(self, name: str, token: str) -> bool:
        """Give up the lock lent to ``token``; whether ``token`` still held it."""
        return self.lent_lock(name).drop(token)

    @abc.abstractmethod
    def exists(self) -> bool:
        """Whether a workspace was set up here (by :meth:`init`, or by writing to it)."""

    @abc.abstractmethod
    def namespaces(self) -> list[str]:
        """The namespaces of this store's workspace, sorted."""
