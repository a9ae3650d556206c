"""Indexing an append in proportion to what was appended, not to the file.

A file's content digest is *chained*: its bytes are hashed in chunks of :data:`CHUNK`, each
chunk's digest folded into the next, and the last few kilobytes added at the end. The index
keeps the chain's state at the last chunk boundary (:class:`Chain`), so after an append it
reads only from there (at most ``CHUNK + MIN_TAIL`` bytes before the old end, plus what was
appended): it checks that those bytes still give the recorded digest, carries the chain on
over the new bytes, and parses from the start of the file's last unit.

That check sees a file that was cut, rewritten, replaced or edited near its end, but not an
edit of the same length further back. Such a file is caught by the next full comparison:
an append indexed this way leaves the file's recorded time unknown, so the next staleness
check that finds the file unchanged since reads it whole and compares the digests (as it
does for any file modified within the file system's timestamp granularity), and diffs it if
they differ.

Files shorter than ``CHUNK + MIN_TAIL`` have no chained chunk: their digest is the plain
BLAKE2b digest of their bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from memdir.errors import WorkspaceError
from memdir.store._safeopen import PathMissing, PathRefused, open_regular
from memdir.store.workspace import MEMORY_AREA

__all__ = [
    "CHUNK",
    "MIN_TAIL",
    "Chain",
    "TailRead",
    "TailState",
    "chain_of",
    "content_digest",
    "fence_lines",
    "line_start",
    "read_tail",
]

CHUNK = 1 << 16
"""Bytes per chained chunk."""
MIN_TAIL = 1 << 12
"""Bytes at the end of a file always hashed last (and so checked again by an append)."""
_DIGEST = 16
_FENCE = re.compile(rb"^ {0,3}(?:```|~~~)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Chain:
    """The chained digest of a file's first ``at`` bytes (``at`` a multiple of :data:`CHUNK`)."""

    at: int = 0
    state: bytes = b""

    def extend(self, data: bytes | memoryview, offset: int) -> Chain:
        """The chain carried over ``data`` (the file's bytes from ``offset <= self.at``).

        It stops at the boundary a file of ``offset + len(data)`` bytes is chained to.
        """
        view = memoryview(data)
        target = chained_length(offset + len(view))
        at, state = self.at, self.state
        while at < target:
            chunk = hashlib.blake2b(state, digest_size=_DIGEST, person=b"memdir.chunk")
            chunk.update(view[at - offset : at - offset + CHUNK])
            at, state = at + CHUNK, chunk.digest()
        return Chain(at, state)

    def finish(self, rest: bytes | memoryview) -> bytes:
        """The digest of a file whose bytes after ``self.at`` are ``rest``."""
        if self.at == 0:
            return hashlib.blake2b(rest, digest_size=_DIGEST).digest()
        final = hashlib.blake2b(self.state, digest_size=_DIGEST, person=b"memdir.final")
        final.update(rest)
        return final.digest()


def chained_length(size: int) -> int:
    """How many leading bytes of a ``size``-byte file are chained (whole chunks only).

    At least :data:`MIN_TAIL` bytes are left to the final hash, so an append always reads
    and checks the end of what was there before.
    """
    if size < CHUNK + MIN_TAIL:
        return 0
    return (size - MIN_TAIL) // CHUNK * CHUNK


def chain_of(data: bytes | memoryview) -> tuple[bytes, Chain]:
    """``(digest, chain)`` of a whole file's bytes."""
    chain = Chain().extend(data, 0)
    return chain.finish(memoryview(data)[chain.at :]), chain


def content_digest(data: bytes | memoryview) -> bytes:
    """The digest the index records for a file's bytes (see the module notes)."""
    return chain_of(data)[0]


def line_start(data: bytes, line: int, *, first: int = 1) -> int | None:
    """Byte offset in ``data`` of line ``line``, when ``data`` starts with line ``first``.

    Counted from the end when the line lies in the second half, so finding the last unit
    of a long file costs as much as the lines after it.
    """
    if line < first:
        return None
    newlines = data.count(b"\n")
    wanted = line - first  # newlines before the line
    if wanted > newlines:
        return None
    if wanted == 0:
        return 0
    if wanted > newlines // 2:
        pos = len(data)
        for _ in range(newlines - wanted + 1):
            pos = data.rfind(b"\n", 0, pos)
        return pos + 1
    pos = -1
    for _ in range(wanted):
        pos = data.find(b"\n", pos + 1)
    return pos + 1


def fence_lines(data: bytes | memoryview) -> int:
    """Code fence lines (```` ``` ```` or ``~~~``) in ``data``: odd means it ends inside one."""
    return len(_FENCE.findall(data))


@dataclass(frozen=True, slots=True)
class TailState:
    """What an append needs to index only its own bytes (see :mod:`memdir.index._append`).

    ``tail_at`` is the byte offset of line ``tail_line``, where the file's last unit starts;
    the parser state there is fresh (no code fence open).
    """

    inode: int
    chain: Chain
    tail_line: int
    tail_at: int


@dataclass(frozen=True, slots=True)
class TailRead:
    """A file's bytes from ``offset`` to its end, and its stat, taken under a shared lock."""

    offset: int
    data: bytes
    stat: os.stat_result | None = None  # not known when read from a store

    @property
    def size(self) -> int:
        """The file's size when it was read."""
        return self.offset + len(self.data)


def read_tail(root: Path, rel: str, offset: int, *, inode: int, min_size: int) -> TailRead | None:
    """Read memory file ``rel`` from byte ``offset`` on, if it is still the file indexed.

    ``None`` when it is gone, may not be read, is another file than inode ``inode``, or is
    shorter than ``min_size``: the caller then reads it whole. Like a whole read, it holds a
    shared ``flock`` (appends hold it exclusively), so it never sees half an append.

    Raises:
        WorkspaceError: the file is there but cannot be read.
    """
    try:
        with open_regular(root, rel, MEMORY_AREA) as (fd, _):
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_SH)
            st = os.fstat(fd)
            if st.st_ino != inode or st.st_size < min_size or offset > st.st_size:
                return None
            chunks: list[bytes] = []
            at = offset
            while chunk := os.pread(fd, max(1 << 16, st.st_size - at), at):
                chunks.append(chunk)
                at += len(chunk)
    except (PathMissing, PathRefused):
        return None
    except OSError as exc:
        raise WorkspaceError(f"cannot read {rel}: {exc.strerror or exc}") from exc
    return TailRead(offset, b"".join(chunks), st)
