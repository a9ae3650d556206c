"""File primitives the workspace is built on: atomic rewrites, locked appends, file locks.

Rewrites go through a synced temp file and ``os.replace``; appends are one ``write`` under an
``fcntl`` lock and are rolled back if they fail part-way; both keep a file's permissions and
write through symlinks. :func:`atomic_write_in`, :func:`atomic_create_in` and
:func:`locked_append_in` do the same for a workspace-relative path walked from the workspace
root (:mod:`memdir.store._safeopen`): they never write through a symlink that leads out of the
workspace or out of the given area, even one swapped in while they run. Errors are
:class:`~memdir.errors.WorkspaceError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import functools
import os
import secrets
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from memdir.errors import WorkspaceError
from memdir.store._base import held_too_long
from memdir.store._safeopen import Area, open_parent

__all__ = [
    "async_file_lock",
    "atomic_create",
    "atomic_create_in",
    "atomic_write",
    "atomic_write_in",
    "file_lock",
    "fsync_dir",
    "locked_append",
    "locked_append_in",
]


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry to disk (a new or renamed file survives a crash); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(target: Path, data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically (temp + fsync + ``os.replace`` + dir fsync).

    An existing file keeps its permission bits (a private ``MEMORY.md`` stays private), and a
    symlink is written through to the file it names.
    """
    target = _through_link(target)
    tmp = _write_temp(target, data)
    try:
        os.replace(tmp, target)
    except OSError as exc:
        _discard(tmp)
        raise WorkspaceError(f"cannot write {target}: {exc.strerror or exc}") from exc
    fsync_dir(target.parent)
    return target


def atomic_create(target: Path, data: bytes) -> bool:
    """Create ``target`` holding ``data`` unless it exists; returns whether it was created.

    The file appears complete or not at all (``os.link`` of a synced temp file), and an
    existing file, even one created a moment ago by another process, is never replaced.
    """
    target = _through_link(target)
    tmp = _write_temp(target, data)
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    except OSError as exc:
        raise WorkspaceError(f"cannot create {target}: {exc.strerror or exc}") from exc
    finally:
        _discard(tmp)
    fsync_dir(target.parent)
    return True


def atomic_write_in(root: Path, rel: str, data: bytes, area: Area) -> Path:
    """:func:`atomic_write` of the workspace file ``rel``, walked race-free from ``root``.

    A symlink at ``rel`` is written through only when it leads to a file inside the
    workspace and inside ``area``; the temp file and the rename happen in the directory that
    was walked to, so a directory swapped for a symlink meanwhile is not followed.
    Returns the path written (the link's target for a symlink).
    """
    with open_parent(root, rel, area) as (dir_fd, name, resolved, st):
        tmp = _write_temp_at(dir_fd, name, data, st, shown=resolved)
        try:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            _discard_at(dir_fd, tmp)
            raise WorkspaceError(f"cannot write {resolved}: {exc.strerror or exc}") from exc
        _fsync_fd(dir_fd)
    return root / resolved


def atomic_create_in(root: Path, rel: str, data: bytes, area: Area) -> bool:
    """:func:`atomic_create` of the workspace file ``rel``, walked like :func:`atomic_write_in`."""
    with open_parent(root, rel, area) as (dir_fd, name, resolved, st):
        if st is not None:
            return False
        tmp = _write_temp_at(dir_fd, name, data, None, shown=resolved)
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            return False
        except OSError as exc:
            raise WorkspaceError(f"cannot create {resolved}: {exc.strerror or exc}") from exc
        finally:
            _discard_at(dir_fd, tmp)
        _fsync_fd(dir_fd)
    return True


def _through_link(target: Path) -> Path:
    return target.resolve() if target.is_symlink() else target


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _discard_at(dir_fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def _fsync_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _write_temp(target: Path, data: bytes) -> Path:
    """A synced temp file next to ``target`` holding ``data``, with ``target``'s mode."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise WorkspaceError(f"cannot create {target.parent}: {exc.strerror}") from exc
    try:
        try:
            st: os.stat_result | None = target.stat()
        except OSError:
            st = None
        return target.with_name(_write_temp_at(dir_fd, target.name, data, st, shown=str(target)))
    finally:
        os.close(dir_fd)


def _write_temp_at(
    dir_fd: int, name: str, data: bytes, st: os.stat_result | None, *, shown: str
) -> str:
    """A synced temp file in ``dir_fd`` holding ``data``, with the mode of ``st`` if given."""
    tmp = f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dir_fd,
        )
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        _discard_at(dir_fd, tmp)
        raise WorkspaceError(f"cannot write {shown}: {exc.strerror or exc}") from exc
    return tmp


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def locked_append(target: Path, data: bytes, *, fsync: bool = True) -> tuple[int, int]:
    """Append ``data`` to ``target`` in one write under ``fcntl.flock``; repair a torn tail.

    If the write fails part-way (disk full, an interrupt), the file is truncated back to its
    old size, so no partial line is left behind. If the file was removed or replaced while this
    call waited for the lock (an archive move, an atomic rewrite), the append goes to the file
    now at ``target`` instead of the unlinked one. Returns the byte offsets ``(start, end)`` of
    ``data`` in the file.
    """
    for _ in range(_APPEND_ATTEMPTS):
        result = _append_once(target, data, fsync=fsync)
        if result is not None:
            return result
    raise WorkspaceError(f"cannot append to {target}: it keeps being replaced while appending")


_APPEND_ATTEMPTS = 20


def locked_append_in(
    root: Path, rel: str, data: bytes, area: Area, *, fsync: bool = True
) -> tuple[int, int]:
    """:func:`locked_append` to the workspace file ``rel``, walked race-free from ``root``.

    A symlink at ``rel`` is appended through only when it leads to a regular file inside the
    workspace and inside ``area``; the file is opened with ``O_NOFOLLOW`` in the directory
    walked to, so a link swapped in meanwhile is not followed.
    """
    for _ in range(_APPEND_ATTEMPTS):
        with open_parent(root, rel, area) as (dir_fd, name, resolved, _):
            try:
                fd = os.open(name, _APPEND_FLAGS | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    continue  # became a symlink since the walk: walk again
                raise WorkspaceError(f"cannot open {resolved} for append: {exc.strerror}") from exc
            result = _append_fd(
                fd,
                data,
                fsync=fsync,
                shown=resolved,
                current=functools.partial(_lstat_at, dir_fd, name),
            )
        if result is not None:
            return result
    raise WorkspaceError(f"cannot append to {rel}: it keeps being replaced while appending")


_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _stat_of(target: Path) -> os.stat_result | None:
    try:
        return target.stat()
    except FileNotFoundError:
        return None


def _append_once(target: Path, data: bytes, *, fsync: bool) -> tuple[int, int] | None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, _APPEND_FLAGS, 0o644)
    except OSError as exc:
        raise WorkspaceError(f"cannot open {target} for append: {exc.strerror}") from exc
    current = functools.partial(_stat_of, target)
    return _append_fd(fd, data, fsync=fsync, shown=str(target), current=current)


def _append_fd(
    fd: int,
    data: bytes,
    *,
    fsync: bool,
    shown: str,
    current: Callable[[], os.stat_result | None],
) -> tuple[int, int] | None:
    """Append to the open ``fd`` under its lock (and close it); ``None``: it was replaced.

    ``current`` stats what is at the file's name now, to see whether ``fd`` is still it.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise WorkspaceError(f"cannot append to {shown}: it is not a regular file")
            now = current()
            if info.st_nlink == 0 or now is None or _ident(now) != _ident(info):
                return None  # removed or replaced while we waited: append to the new file
            size = info.st_size
            prefix = b""
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                prefix = b"\n"
            try:
                _write_all(fd, prefix + data)
                if fsync:
                    os.fsync(fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
            start = size + len(prefix)
            return start, start + len(data)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        raise WorkspaceError(f"cannot append to {shown}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _open_lock_file(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise WorkspaceError(f"cannot create lock file {path}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an ``fcntl.flock`` on ``path`` (created if missing) for the ``with`` block.

    Raises:
        WorkspaceError: the lock file cannot be created or locked.
    """
    fd = _open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError as exc:
            raise WorkspaceError(f"cannot lock {path}: {exc.strerror or exc}") from exc
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


_POLL_SECONDS = 0.02


@contextlib.asynccontextmanager
async def async_file_lock(path: Path, *, timeout: float) -> AsyncIterator[None]:
    """Hold an exclusive ``flock`` on ``path`` without blocking the event loop.

    ``flock`` is polled with ``LOCK_NB`` and the coroutine sleeps between tries, so waiting never
    freezes the loop and a cancelled waiter leaves nothing behind. ``flock`` locks belong to an
    open file description: two holders in one process exclude each other just like two
    processes do, and the kernel drops the lock when its holder dies.

    Raises:
        MemdirError: the lock was not free within ``timeout`` seconds.
        WorkspaceError: the lock file cannot be created.
    """
    fd = _open_lock_file(path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise held_too_long(path.stem, timeout) from None
                await asyncio.sleep(_POLL_SECONDS)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
