"""Opening workspace files without following a symlink out of what a reader may see.

A path is checked and opened in one walk from a descriptor of the workspace root: every
directory is opened from its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` and the
file itself with ``O_NOFOLLOW | O_NONBLOCK``, so a symlink or directory swapped in after a
check is never followed by the kernel. Symlinks are resolved here instead, one hop at a time
(at most :data:`MAX_LINKS`, so a loop is an error of its own): a link is followed only while
its target stays inside the workspace, and the file finally reached must lie in the reader's
:class:`Area`. A target outside the workspace is never looked at, so no answer depends on
what exists there. Only regular files are opened: a FIFO, socket, device or directory is
refused (``O_NONBLOCK``: a FIFO swapped in at the last moment cannot block the open).

Errors are :class:`~memdir.errors.WorkspaceError`: :class:`PathMissing` (also a
``FileNotFoundError``) when nothing is there, :class:`PathRefused` (with a ``reason``) when
something is there that this reader may not open.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from memdir.errors import WorkspaceError

__all__ = [
    "MAX_LINKS",
    "Area",
    "PathMissing",
    "PathRefused",
    "below_root",
    "check_regular",
    "locate",
    "open_dir",
    "open_parent",
    "open_regular",
    "read_fd",
    "read_regular",
    "shown_path",
    "warn_skipped",
]

MAX_LINKS: Final = 40
"""Symlinks followed for one path at most (the kernel's own limit); more is a loop."""

_RETRIES: Final = 40  # a component that keeps changing between two system calls
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SHOWN_CHARS: Final = 160

Reason = Literal["outside", "area", "loop", "directory", "special"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Area:
    """The workspace paths one reader may reach, by their first component.

    Attributes:
        label: what the area is, for messages ("the memory files (MEMORY.md, memory/)").
        only: first components inside the area (empty: every one).
        never: first components outside it, even when ``only`` is empty.
    """

    label: str
    only: frozenset[str] = frozenset()
    never: frozenset[str] = frozenset()

    def holds(self, rel: str) -> bool:
        """Whether the workspace-relative POSIX path ``rel`` lies in this area."""
        top = rel.split("/", 1)[0]
        return (not self.only or top in self.only) and top not in self.never


class PathMissing(WorkspaceError, FileNotFoundError):
    """Nothing is at the path (or one of its directories is missing or not a directory)."""


class PathRefused(WorkspaceError):
    """Something is at the path that this reader may not open.

    ``reason`` is ``"outside"`` (a symlink leads out of the workspace), ``"area"`` (into a
    part of it this reader may not see), ``"loop"`` (too many links), ``"directory"`` or
    ``"special"`` (a FIFO, socket or device).
    """

    def __init__(self, message: str, *, reason: Reason) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def shown_path(rel: str) -> str:
    """``rel`` as messages show it: control characters escaped, clipped when very long."""
    shown = rel if rel.isprintable() else repr(rel)[1:-1]
    return shown if len(shown) <= _SHOWN_CHARS else shown[: _SHOWN_CHARS - 1] + "…"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _os_error(shown: str, exc: OSError) -> WorkspaceError:
    return WorkspaceError(f"cannot open {shown}: {exc.strerror or exc}")


@dataclass(slots=True)
class _Found:
    rel: str
    st: os.stat_result | None
    dir_fd: int
    name: str


class _Walk:
    """Directory descriptors from the workspace root down to the current directory."""

    def __init__(self, root: Path, rel: str, area: Area) -> None:
        self.root = root
        self.shown = shown_path(rel)
        self.area = area
        self.names: list[str] = []
        self.links = 0
        self.retries = 0
        try:
            self.fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
        except (FileNotFoundError, NotADirectoryError):
            raise PathMissing(f"file not found: {self.shown}") from None
        except OSError as exc:
            raise _os_error(self.shown, exc) from None

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()

    @property
    def here(self) -> int:
        return self.fds[-1]

    def down(self, name: str, fd: int) -> None:
        self.fds.append(fd)
        self.names.append(name)

    def up(self) -> None:
        if not self.names:
            raise self.outside()
        os.close(self.fds.pop())
        self.names.pop()

    def outside(self) -> PathRefused:
        return PathRefused(
            f"path {self.shown!r} leads outside the workspace through a symlink", reason="outside"
        )

    def retry(self) -> None:
        self.retries += 1
        if self.retries > _RETRIES:
            raise WorkspaceError(f"{self.shown} kept changing while it was opened; try again")

    def follow(self, name: str, todo: deque[str]) -> None:
        """Queue the target of the symlink ``name`` in the current directory."""
        self.links += 1
        if self.links > MAX_LINKS:
            raise PathRefused(
                f"{self.shown} is a symlink loop (more than {MAX_LINKS} links to follow); "
                "fix or remove the link",
                reason="loop",
            )
        try:
            target = os.readlink(name, dir_fd=self.here)
        except OSError:  # no longer a link: look at the name again
            todo.appendleft(name)
            self.retry()
            return
        if target.startswith("/"):
            inner = below_root(self.root, target)
            if inner is None:
                raise self.outside()
            while self.names:
                self.up()
            target = inner
        todo.extendleft(reversed([p for p in target.split("/") if p not in ("", ".")]))


def below_root(root: Path, absolute: str) -> str | None:
    """The part of an absolute path below ``root`` (as given, or resolved), else ``None``.

    Purely textual: nothing outside the workspace is looked at.
    """
    for base in (str(root), os.path.realpath(root)):
        if absolute == base or absolute.startswith(base.rstrip("/") + "/"):
            return absolute[len(base) :].lstrip("/")
    return None


def _walk(walk: _Walk, rel: str, *, mode: Literal["leaf", "dir", "create"]) -> _Found:
    """Resolve ``rel`` to the directory holding its last component (``walk`` is positioned).

    ``dir`` resolves every component as a directory and returns the last one as ``dir_fd``;
    ``create`` makes missing directories on the way. A missing directory raises
    :class:`PathMissing`; a missing last component comes back with ``st=None``.
    """
    todo = deque(p for p in rel.split("/") if p not in ("", "."))
    while todo:
        part = todo.popleft()
        if part == "..":
            walk.up()
            continue
        last = not todo and mode != "dir"
        try:
            st: os.stat_result | None = os.stat(part, dir_fd=walk.here, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as exc:
            raise _os_error(walk.shown, exc) from None
        if st is not None and stat.S_ISLNK(st.st_mode):
            walk.follow(part, todo)
            continue
        if last:
            return _Found(rel="/".join([*walk.names, part]), st=st, dir_fd=walk.here, name=part)
        if st is None and mode == "create":
            _check_area(walk, "/".join([*walk.names, part]))  # no directory made elsewhere
            with contextlib.suppress(FileExistsError):
                try:
                    os.mkdir(part, 0o777, dir_fd=walk.here)
                except OSError as exc:
                    raise WorkspaceError(
                        f"cannot create {walk.shown}: {exc.strerror or exc}"
                    ) from None
        elif st is None or not stat.S_ISDIR(st.st_mode):
            if mode == "create":
                here = shown_path("/".join([*walk.names, part]))
                raise WorkspaceError(f"cannot write {walk.shown}: {here} is not a directory")
            raise PathMissing(f"file not found: {walk.shown}")
        try:
            fd = os.open(part, _DIR_FLAGS, dir_fd=walk.here)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR):
                raise _os_error(walk.shown, exc) from None
            todo.appendleft(part)  # replaced since the stat: look again
            walk.retry()
            continue
        walk.down(part, fd)
    resolved = "/".join(walk.names)
    if mode == "dir":
        return _Found(rel=resolved, st=os.fstat(walk.here), dir_fd=walk.here, name="")
    # The path ended in ".." or a link to a directory: it names a directory.
    raise PathRefused(f"{walk.shown} is a directory, not a file", reason="directory")


def _check_area(walk: _Walk, resolved: str) -> None:
    if walk.area.holds(resolved):
        return
    how = f" leads through a symlink to {shown_path(resolved)}," if walk.links else " is"
    raise PathRefused(
        f"{walk.shown}{how} outside {walk.area.label}; it cannot be opened here", reason="area"
    )


@contextlib.contextmanager
def _walking(root: Path, rel: str, area: Area) -> Iterator[_Walk]:
    walk = _Walk(root, rel, area)
    try:
        yield walk
    finally:
        walk.close()


def locate(root: Path, rel: str, area: Area) -> tuple[str, os.stat_result | None]:
    """Resolve ``rel`` (workspace-relative) without opening it: ``(resolved rel, lstat)``.

    The stat is ``None`` when nothing is there; a missing directory on the way leaves the
    rest of the path as written. Links are followed only inside the workspace.

    Raises:
        PathRefused: a link leads outside the workspace or ``area``, or loops.
        WorkspaceError: the path cannot be looked at (a name too long, no permission).
    """
    try:
        with _walking(root, rel, area) as walk:
            try:
                found = _walk(walk, rel, mode="leaf")
            except PathRefused as exc:
                if exc.reason != "directory":
                    raise
                found = _Found(rel="/".join(walk.names), st=os.fstat(walk.here), dir_fd=-1, name="")
            _check_area(walk, found.rel)
            return found.rel, found.st
    except PathMissing:
        return rel, None


@contextlib.contextmanager
def open_regular(root: Path, rel: str, area: Area) -> Iterator[tuple[int, str]]:
    """Open the regular file at ``rel`` read-only: ``(fd, resolved rel)`` for the block.

    Raises:
        PathMissing: nothing is there.
        PathRefused: a link leads outside the workspace or ``area`` or loops, or the path is a
            directory, FIFO, socket or device (which is never opened).
        WorkspaceError: the file cannot be opened (no permission, a name too long).
    """
    with _walking(root, rel, area) as walk:
        fd, resolved = _open_leaf(walk, rel)
        try:
            yield fd, resolved
        finally:
            os.close(fd)


def _open_leaf(walk: _Walk, rel: str) -> tuple[int, str]:
    while True:
        found = _walk(walk, rel, mode="leaf")
        _check_area(walk, found.rel)
        if found.st is None:
            raise PathMissing(f"file not found: {walk.shown}")
        _check_regular(walk, found.st.st_mode)
        try:
            fd = os.open(found.name, _FILE_FLAGS, dir_fd=found.dir_fd)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a socket
                raise PathRefused(
                    f"{walk.shown} is not a regular file (it is a socket); only regular files "
                    "can be read",
                    reason="special",
                ) from None
            if exc.errno not in (errno.ELOOP, errno.ENOENT):
                raise _os_error(walk.shown, exc) from None
            walk.retry()  # replaced since the stat (by a link, or removed): walk again
            while walk.names:
                walk.up()
            continue
        try:
            _check_regular(walk, os.fstat(fd).st_mode)
        except BaseException:
            os.close(fd)
            raise
        return fd, found.rel


def _check_regular(walk: _Walk, mode: int) -> None:
    check_regular(walk.shown, mode)


def check_regular(shown: str, mode: int) -> None:
    """Raise :class:`PathRefused` unless ``mode`` (``st_mode``) is a regular file's."""
    if stat.S_ISDIR(mode):
        raise PathRefused(f"{shown} is a directory, not a file", reason="directory")
    if not stat.S_ISREG(mode):
        raise PathRefused(
            f"{shown} is not a regular file (it is {_kind(mode)}); only regular files can be read",
            reason="special",
        )


def read_regular(root: Path, rel: str, area: Area) -> bytes:
    """The bytes of the regular file at ``rel`` (see :func:`open_regular` for the errors)."""
    with open_regular(root, rel, area) as (fd, _):
        return read_fd(fd, rel)


def read_fd(fd: int, rel: str) -> bytes:
    """Everything left to read from ``fd``; an error names ``rel``."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:
        raise _os_error(shown_path(rel), exc) from None
    return b"".join(chunks)


@contextlib.contextmanager
def open_dir(root: Path, rel: str, area: Area) -> Iterator[int]:
    """A descriptor of the directory at ``rel`` (links followed inside ``area`` only).

    Raises:
        PathMissing: the directory does not exist, or is not a directory.
        PathRefused: a link leads outside the workspace or ``area``, or loops.
    """
    with _walking(root, rel, area) as walk:
        found = _walk(walk, rel, mode="dir")
        _check_area(walk, found.rel)
        yield found.dir_fd


@contextlib.contextmanager
def open_parent(
    root: Path, rel: str, area: Area, *, create: bool = True
) -> Iterator[tuple[int, str, str, os.stat_result | None]]:
    """For a write: ``(directory fd, name in it, resolved rel, lstat of the name or None)``.

    A symlink at ``rel`` is followed (inside the workspace and ``area`` only), so a write
    lands on the file it names; missing directories are created when ``create``.

    Raises:
        PathRefused: a link leads outside the workspace or ``area`` or loops, or the target
            is a directory, FIFO, socket or device.
        WorkspaceError: a directory cannot be created or looked at.
    """
    with _walking(root, rel, area) as walk:
        found = _walk(walk, rel, mode="create" if create else "leaf")
        _check_area(walk, found.rel)
        if found.st is not None:
            _check_regular(walk, found.st.st_mode)
        yield found.dir_fd, found.name, found.rel, found.st


_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()
_WARNED_MAX = 10_000


def warn_skipped(logger: logging.Logger, root: Path | str, exc: WorkspaceError) -> None:
    """Log that a file was skipped (``exc`` says why), once per path and reason per process."""
    key = (str(root), str(exc))
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        if len(_WARNED) >= _WARNED_MAX:
            _WARNED.clear()
        _WARNED.add(key)
    logger.warning("%s (skipped)", exc)
