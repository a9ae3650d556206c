"""Export and import as one ``.tar.gz`` stream: the same layout as a plain export, in a file.

:func:`write_archive` streams a workspace's files (one namespace, or the root and every
namespace under ``ns/``) as a gzip-compressed tar to any binary sink: a file, a socket, an
HTTP response. Nothing is staged on disk, one file is held in memory at a time. The members
are the files of :func:`~memdir.store.transfer.export_workspace`'s directory, under the same
names; the index and the server's keys are not in it.

:func:`import_archive` reads one back from any binary source, as an archive from a stranger:
it is unpacked into a new temporary directory first, member by member, and loaded with
:func:`~memdir.store.transfer.import_workspace` only once all of it was found sound. Refused,
with :class:`ArchiveError` and nothing written to the workspace:

- a member that is not a regular file or a directory: symlinks, hard links, devices, FIFOs;
- a name that is absolute, holds ``..``, an empty or ``.`` part, a backslash, a control
  character or invalid UTF-8, is longer than a path may be, or comes twice;
- more than ``max_files`` members, or more than ``max_bytes`` unpacked: a member's declared
  size is checked before its bytes are read, and the whole decompressed stream (headers
  included) is bounded, so a gzip bomb stops at the limit;
- data that is not a gzip-compressed tar.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Any, Literal, Protocol

from memdir.errors import WorkspaceError
from memdir.store.transfer import (
    TransferReport,
    export_sources,
    import_workspace,
    workspace_files,
)
from memdir.store.workspace import Workspace

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "ArchiveError",
    "Sink",
    "Source",
    "import_archive",
    "is_archive_path",
    "unpack_archive",
    "write_archive",
]

DEFAULT_MAX_FILES = 200_000
"""Members an archive may hold at most, by default."""
DEFAULT_MAX_BYTES = 4 << 30
"""Bytes an archive may unpack to at most, by default (4 GiB)."""

_NAME_MAX = 255  # bytes in one part of a path
_PATH_MAX = 4_095
_HEADER_ROOM = 16_384  # headers and padding of one member (a long name takes a pax header)
_CHUNK = 1 << 16

Reason = Literal["format", "member", "files", "bytes"]


class Sink(Protocol):
    """Where an archive is written: anything with ``write(bytes)``."""

    def write(self, data: bytes, /) -> Any: ...


class Source(Protocol):
    """Where an archive is read from: anything with ``read(size)``."""

    def read(self, size: int = ..., /) -> bytes: ...


class ArchiveError(WorkspaceError):
    """An archive that is not imported: malformed, unsafe, or over a limit.

    Attributes:
        reason: ``"format"`` (not a gzip-compressed tar), ``"member"`` (an unsafe member),
            ``"files"`` (too many members) or ``"bytes"`` (too large unpacked).
    """

    def __init__(self, message: str, *, reason: Reason) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def is_archive_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names an archive (``.tar.gz`` or ``.tgz``) rather than a directory."""
    return os.fspath(path).lower().endswith((".tar.gz", ".tgz"))


# -- export ---------------------------------------------------------------------------------


def write_archive(
    ws: Workspace,
    sink: Sink,
    *,
    all_namespaces: bool = False,
    leave_out: tuple[str, ...] = (),
) -> TransferReport:
    """Write the files of ``ws`` (or, with ``all_namespaces``, of its root and every
    namespace, as ``ns/<name>/``) to ``sink`` as a gzip-compressed tar, streamed.

    ``sink`` needs only ``write(bytes)``; it is not closed. ``leave_out``: directories whose
    files the archive does not hold (``memory/.forget`` in an archive a server serves).

    Raises:
        WorkspaceError: a file cannot be read.
        OSError: ``sink`` cannot be written.
    """
    report = TransferReport()
    stamp = int(ws.utc_now().timestamp())
    out: Any = sink  # tarfile's stream mode only calls write()
    with tarfile.open(fileobj=out, mode="w|gz", format=tarfile.PAX_FORMAT) as tar:
        for source, prefix in export_sources(ws, all_namespaces=all_namespaces):
            report.namespaces.append(source.namespace)
            for rel in workspace_files(source, leave_out=leave_out):
                data = source.read_bytes(rel)
                member = tarfile.TarInfo(prefix + rel)
                member.size, member.mtime, member.mode = len(data), stamp, 0o644
                tar.addfile(member, io.BytesIO(data))
                report.files += 1
                report.bytes += len(data)
    return report


# -- import ---------------------------------------------------------------------------------


def import_archive(
    source: Source,
    ws: Workspace,
    *,
    all_namespaces: bool = False,
    replace: bool = False,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    scratch: str | os.PathLike[str] | None = None,
) -> TransferReport:
    """Load a ``.tar.gz`` (such as :func:`write_archive` makes) into ``ws``.

    The archive is unpacked into a temporary directory (in ``scratch``, default the system's),
    checked whole, then imported as :func:`~memdir.store.transfer.import_workspace` imports a
    directory (``all_namespaces``, ``replace`` and the conflicts work the same), and the
    directory removed.

    Raises:
        ArchiveError: the archive is malformed, unsafe or over a limit; nothing was written.
        ConfigError: it holds namespaces without ``all_namespaces``, or an invalid one.
    """
    with tempfile.TemporaryDirectory(prefix="memdir-import-", dir=scratch) as tmp:
        unpack_archive(source, tmp, max_files=max_files, max_bytes=max_bytes)
        return import_workspace(tmp, ws, all_namespaces=all_namespaces, replace=replace)


def unpack_archive(
    source: Source,
    directory: str | os.PathLike[str],
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> TransferReport:
    """Unpack a ``.tar.gz`` into the empty directory ``directory``, refusing what is unsafe.

    Returns the files and bytes unpacked. On :class:`ArchiveError` the directory may hold part
    of the archive: unpack into a directory of your own and remove it.

    Raises:
        ArchiveError: see the module docstring.
    """
    for name, value in (("max_files", max_files), ("max_bytes", max_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkspaceError(f"{name} must be a positive integer, not {value!r}")
    root = Path(directory)
    report = TransferReport()
    stream = _Bounded(source)
    seen: set[str] = set()
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if len(seen) >= max_files:
                    raise ArchiveError(
                        f"the archive holds more than {max_files:,} members", reason="files"
                    )
                name = _member_name(member, seen)
                if member.isdir():
                    if name:  # "./", the top of a tar made with `tar -C dir .`: nothing to make
                        _make_dir(root / name, member.name)
                    stream.allow(_HEADER_ROOM)
                    continue
                if report.bytes + member.size > max_bytes:
                    raise ArchiveError(
                        f"the archive unpacks to more than {max_bytes:,} bytes", reason="bytes"
                    )
                stream.allow(member.size + _HEADER_ROOM)
                _extract(tar, member, root / name)
                report.files += 1
                report.bytes += member.size
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise ArchiveError(
            f"not a gzip-compressed tar archive, or a damaged one ({_why(exc)})", reason="format"
        ) from None
    except _Overflow:
        raise ArchiveError(
            f"the archive unpacks to more than {max_bytes:,} bytes", reason="bytes"
        ) from None
    return report


def _member_name(member: tarfile.TarInfo, seen: set[str]) -> str:
    """The member's path, if it is a safe, new workspace path of a file or a directory."""
    shown = repr(member.name[:200])
    if not (member.isfile() or member.isdir()):
        kind = _KINDS.get(member.type, "a special file")
        raise ArchiveError(
            f"archive member {shown} is {kind}; only files are imported", reason="member"
        )
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    if member.isdir():
        name = name.rstrip("/")
        if name in ("", "."):
            return ""
    problem = _name_problem(name)
    if problem is not None:
        raise ArchiveError(f"archive member {shown} {problem}", reason="member")
    if name in seen:
        raise ArchiveError(f"archive member {shown} comes twice", reason="member")
    seen.add(name)
    return name


def _name_problem(name: str) -> str | None:
    if not name:
        return "has no name"
    if name.startswith("/"):
        return "has an absolute name"
    if "\\" in name:
        return "has a backslash in its name"
    if not name.isprintable():
        return "has a control character in its name"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "has a name that is not valid UTF-8"
    parts = name.split("/")
    if ".." in parts:
        return "leads out of the archive (..)"
    if "" in parts or "." in parts:
        return "has an empty or '.' part in its name"
    if size > _PATH_MAX or any(len(p.encode("utf-8")) > _NAME_MAX for p in parts):
        return "has a name too long for a file"
    return None


_KINDS = {
    tarfile.SYMTYPE: "a symlink",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a device",
    tarfile.BLKTYPE: "a device",
    tarfile.FIFOTYPE: "a FIFO",
}


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    """Copy the member's bytes into a new file (never through anything already there)."""
    data = tar.extractfile(member)
    if data is None:
        raise ArchiveError(f"archive member {member.name[:200]!r} has no data", reason="member")
    _make_dir(path.parent, member.name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise _unpackable(member.name, exc) from None
    with data, open(fd, "wb") as out:
        while chunk := data.read(_CHUNK):  # an error here is the archive's: damaged
            try:
                out.write(chunk)
            except OSError as exc:  # and here the disk's (full, say)
                raise _unpackable(member.name, exc) from None


def _make_dir(path: Path, name: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of the archive where a directory of it must go
        raise _unpackable(name, exc) from None


def _unpackable(name: str, exc: OSError) -> ArchiveError:
    why = exc.strerror or type(exc).__name__
    return ArchiveError(
        f"archive member {name[:200]!r} cannot be unpacked ({why})", reason="member"
    )


class _Overflow(Exception):
    """The decompressed stream went past what its members were allowed."""


class _Bounded(io.RawIOBase):
    """The decompressed bytes of a gzip source, cut off past what was allowed so far.

    Each member admitted raises the allowance by its size and room for its headers; reading
    beyond it (huge headers, padding that never ends) stops the unpacking.
    """

    def __init__(self, source: Source) -> None:
        super().__init__()
        raw: Any = source  # GzipFile only calls read()
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self._read = 0
        self._allowed = _HEADER_ROOM

    def allow(self, more: int) -> None:
        self._allowed += more

    def close(self) -> None:
        self._gzip.close()  # not the source: the caller's
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        want = len(buffer)
        if self._read + want > self._allowed:
            want = self._allowed - self._read
            if want <= 0:
                raise _Overflow
        data = self._gzip.read(want)
        buffer[: len(data)] = data
        self._read += len(data)
        return len(data)


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]
