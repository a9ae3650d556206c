"""The file store's named locks lent to a holder in another process that cannot hold an
``flock`` itself: a client of ``memdir serve``, whose take, renewals and release any worker
of the server may answer.

A lent lock is a lease file beside the lock file, ``.index/locks/<name>.lease``, holding the
holder's token and when the lease ends (wall-clock seconds: the file store is on one
machine). Taking one needs the lock's ``flock`` for a moment (so no local holder is inside),
then writes the lease; the local users of :meth:`FileStore.lock` find a live lease under the
``flock`` and wait, as they wait for each other. A holder that stops renewing loses the
lock when its lease ends: the next local user (or taker) that finds it expired removes it.

Every read and change of a lease happens under a third, short ``flock``
(``<name>.lease.lock``), so a renewal and an expiry never both win.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from memdir.errors import WorkspaceError
from memdir.store._fileio import _open_lock_file, file_lock

__all__ = ["LentLock"]

_LEASE_SUFFIX: Final = ".lease"


def check_token(token: object) -> str:
    """``token`` as the text of a UUID, else :class:`WorkspaceError`."""
    try:
        return str(uuid.UUID(str(token)))
    except ValueError:
        raise WorkspaceError(f"not a lock token (a UUID): {str(token)[:80]!r}") from None


@dataclass(frozen=True, slots=True)
class _Lease:
    token: str
    ends: float  # time.time()

    def live(self, now: float) -> bool:
        return self.ends > now


class LentLock:
    """The lock whose ``flock`` file is ``path`` (``.index/locks/<name>.lock``), as lent.

    Args:
        path: the lock file.
        ttl: seconds a lease lasts after it was taken or last renewed.
    """

    def __init__(self, path: Path, *, ttl: float) -> None:
        self.path = path
        self.ttl = ttl
        self._lease = path.with_name(path.name.removesuffix(".lock") + _LEASE_SUFFIX)
        self._guard = path.with_name(self._lease.name + ".lock")

    # -- what the local users of the lock ask -------------------------------------------------

    def blocks(self) -> bool:
        """Whether a live lease holds the lock (an expired one is removed). Called with the
        lock's ``flock`` held, so no lease can be taken meanwhile."""
        if not os.path.lexists(self._lease):  # the usual case: one failed stat
            return False
        with self._guarded():
            lease = self._read()
            if lease is not None and lease.live(time.time()):
                return True
            self._remove()
            return False

    # -- what a holder elsewhere asks ---------------------------------------------------------

    def take(self, token: str) -> bool:
        """Take the lock for ``token`` if nobody holds it; never waits. Taking it again
        with the same token renews it."""
        held = check_token(token)
        fd = _open_lock_file(self.path)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # A local holder is inside, or one is only looking at the lease now.
                return self.renew(held)
            except OSError as exc:
                raise WorkspaceError(f"cannot lock {self.path}: {exc.strerror}") from exc
            try:
                with self._guarded():
                    lease = self._read()
                    now = time.time()
                    if lease is not None and lease.live(now) and lease.token != held:
                        return False
                    self._write(_Lease(held, now + self.ttl))
                    return True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def renew(self, token: str) -> bool:
        """Hold the lease ``ttl`` more seconds; whether ``token`` still held it (``False``:
        it ended and may be someone else's: stop what it guarded)."""
        held = check_token(token)
        with self._guarded():
            lease = self._read()
            now = time.time()
            if lease is None or lease.token != held or not lease.live(now):
                return False
            self._write(_Lease(held, now + self.ttl))
            return True

    def drop(self, token: str) -> bool:
        """Give the lock up if ``token`` holds it; whether it did."""
        held = check_token(token)
        with self._guarded():
            lease = self._read()
            if lease is None or lease.token != held:
                return False
            self._remove()
            return lease.live(time.time())

    # -- the lease file -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        with file_lock(self._guard):
            yield

    def _read(self) -> _Lease | None:
        try:
            raw = json.loads(self._lease.read_bytes())
            return _Lease(token=str(raw["token"]), ends=float(raw["ends"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # torn by a crash: no lease (the flock still guards local users)

    def _write(self, lease: _Lease) -> None:
        temp = self._lease.with_name(f".{self._lease.name}.{uuid.uuid4().hex[:8]}")
        try:
            temp.write_text(json.dumps({"token": lease.token, "ends": lease.ends}))
            os.replace(temp, self._lease)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise WorkspaceError(f"cannot write the lease {self._lease}: {exc.strerror}") from exc

    def _remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._lease.unlink()
