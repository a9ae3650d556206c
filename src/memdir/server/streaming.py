"""A namespace's archive streamed into an HTTP answer as it is written.

:func:`~memdir.store.archive.write_archive` writes to a blocking sink; :class:`ArchiveStream`
runs it on a thread of its own and hands its bytes, in chunks, to the response's async
iterator through a small bounded queue: the archive is never held whole, in memory or on disk,
and a client that reads slowly slows the writer down. A client that goes away stops the writer
at its next chunk. The first chunk is awaited before the answer starts, so a store that cannot
be read is still answered with a problem rather than a cut connection.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterator, Callable
from typing import Final

import anyio.to_thread

from memdir.forget._keys import FORGET_DIR
from memdir.store.archive import write_archive
from memdir.store.workspace import Workspace

__all__ = ["ArchiveStream"]

CHUNK: Final = 1 << 16
"""Bytes handed to the response at a time."""
_DEPTH: Final = 8  # chunks waiting for the client at most
_POLL: Final = 0.1  # seconds between two looks, by a writer ahead of its reader, for a stop


class _Stopped(Exception):
    """The reader went away."""


class ArchiveStream:
    """The archive of ``ws``, written on a thread, read as an async iterator of chunks.

    Args:
        ws: the namespace to export.
        done: called on the writer's thread when it has ended, however it ended.
    """

    def __init__(self, ws: Workspace, done: Callable[[], None]) -> None:
        self._ws = ws
        self._done = done
        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=_DEPTH)
        self._stop = threading.Event()
        self._buffer = bytearray()
        self._thread = threading.Thread(target=self._write, name="memdir-export", daemon=True)

    def start(self) -> None:
        """Start writing."""
        self._thread.start()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The archive's bytes, chunk by chunk; what failed the writer is raised here. Leaving
        the iteration early (the client went away) stops the writer."""
        try:
            while True:
                item = await anyio.to_thread.run_sync(self._queue.get)
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._stop.set()

    # -- the writer's thread --------------------------------------------------------------

    def _write(self) -> None:
        try:
            # The erasures' secret and records stay with the server (see store routes).
            write_archive(self._ws, self, leave_out=(FORGET_DIR,))
            self._hand(bytes(self._buffer))
            self._hand(None)
        except _Stopped:
            pass
        except BaseException as exc:  # handed to the reader, which raises it
            self._hand_last(exc)
        finally:
            self._done()

    def write(self, data: bytes, /) -> int:
        """The sink of :func:`write_archive`: whole chunks go to the reader."""
        self._buffer += data
        while len(self._buffer) >= CHUNK:
            self._hand(bytes(self._buffer[:CHUNK]))
            del self._buffer[:CHUNK]
        return len(data)

    def _hand(self, item: bytes | BaseException | None) -> None:
        if item == b"":
            return
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue
        raise _Stopped

    def _hand_last(self, exc: BaseException) -> None:
        try:
            self._hand(exc)
        except _Stopped:
            pass
