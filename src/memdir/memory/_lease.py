"""A cross-process job lease: at most one holder per job name, taken over when stale.

The lease is a small JSON record (owner pid, host name, random token, expiry), replaced only
by compare-and-swap, so acquisition is atomic across processes (and hosts). A lease is
stale, and may be taken over, when it has expired or when its owner ran on this host and
that process no longer exists (``kill -9`` leaves no chance to release it).
A holder re-checks ownership (:meth:`Lease.verify`) before committing work, so a holder that
overran its expiry and lost the lease never writes over its successor.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from datetime import datetime, timedelta
from typing import Any

from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = ["Lease", "LeaseInfo", "lease_holder", "pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    except OSError:
        return False
    return True


class LeaseInfo:
    """The parsed content of a lease file."""

    __slots__ = ("expires_at", "host", "pid", "token")

    def __init__(self, *, pid: int, host: str, token: str, expires_at: datetime) -> None:
        self.pid = pid
        self.host = host
        self.token = token
        self.expires_at = expires_at

    @classmethod
    def parse(cls, raw: bytes) -> LeaseInfo | None:
        """Parse a lease file; ``None`` for anything malformed (treated as no lease)."""
        try:
            data: Any = json.loads(raw)
            return cls(
                pid=int(data["pid"]),
                host=str(data["host"]),
                token=str(data["token"]),
                expires_at=datetime.fromisoformat(str(data["expires_at"])),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def to_bytes(self) -> bytes:
        """Serialise for the lease file."""
        record = {
            "pid": self.pid,
            "host": self.host,
            "token": self.token,
            "expires_at": self.expires_at.isoformat(),
        }
        return json.dumps(record).encode("utf-8")

    def is_stale(self, now: datetime) -> bool:
        """Expired, or held by a process of this host that has died."""
        if self.expires_at.tzinfo is None or now >= self.expires_at:
            return True
        return self.host == socket.gethostname() and not pid_alive(self.pid)


class Lease:
    """A named lease in a workspace (``memory/.<name>.lease``).

    Taking, renewing and giving up the lease are compare-and-swaps of the lease record
    (:meth:`Workspace.replace_if`), so they hold across processes, and with a PostgreSQL
    workspace across hosts, with no lock held in between.

    Args:
        workspace: the workspace.
        name: the job name (``"consolidation"``, ``"maintenance"``).
        ttl: how long a lease lasts without renewal.
    """

    def __init__(self, workspace: Workspace, name: str, *, ttl: timedelta) -> None:
        self._ws = workspace
        self.name = name
        self.ttl = ttl
        self.rel = f"{MEMORY_DIR}/.{name}.lease"
        self._token: str | None = None

    @property
    def held(self) -> bool:
        """Whether this object believes it holds the lease (see :meth:`verify`)."""
        return self._token is not None

    def _read(self) -> tuple[LeaseInfo | None, str | None]:
        """The current record (``None`` if absent or malformed) and its version."""
        found = self._ws.read_versioned(self.rel)
        if found is None:
            return None, None
        return LeaseInfo.parse(found.data), found.version

    def _now(self) -> datetime:
        # Real time, not the workspace clock: expiry must hold across processes even when a
        # replay injects a fake clock.
        return datetime.now().astimezone()

    def holder(self) -> LeaseInfo | None:
        """The current live holder, or ``None`` if the lease is free or stale."""
        info, _ = self._read()
        if info is None or info.is_stale(self._now()):
            return None
        return info

    def try_acquire(self) -> bool:
        """Take the lease if it is free or stale. Never blocks on the holder."""
        for _ in range(_CAS_ATTEMPTS):
            current, version = self._read()
            if current is not None and not current.is_stale(self._now()):
                return current.token == self._token
            token = secrets.token_hex(16)
            info = LeaseInfo(
                pid=os.getpid(),
                host=socket.gethostname(),
                token=token,
                expires_at=self._now() + self.ttl,
            )
            if self._ws.replace_if(self.rel, info.to_bytes(), version):
                self._token = token
                return True
        return False  # others keep changing it: someone else is taking it

    def verify(self, *, renew: bool = True) -> bool:
        """Whether we still hold the lease; optionally extend it by ``ttl``."""
        if self._token is None:
            return False
        for _ in range(_CAS_ATTEMPTS):
            current, version = self._read()
            if current is None or current.token != self._token:
                self._token = None
                return False
            if not renew:
                return True
            current.expires_at = self._now() + self.ttl
            if self._ws.replace_if(self.rel, current.to_bytes(), version):
                return True
        self._token = None
        return False

    def release(self) -> None:
        """Give the lease up (only if we still hold it)."""
        if self._token is None:
            return
        current, version = self._read()
        if current is not None and current.token == self._token:
            # An expired record, not a deleted file: a compare-and-swap needs something to
            # compare with, and the next holder replaces it.
            current.expires_at = self._now() - timedelta(seconds=1)
            self._ws.replace_if(self.rel, current.to_bytes(), version)
        self._token = None


_CAS_ATTEMPTS = 20


def lease_holder(workspace: Workspace, name: str) -> LeaseInfo | None:
    """The live holder of the lease of job ``name`` (``None``: free or stale), for a reader
    that does not take it (its expiry is the holder's own)."""
    return Lease(workspace, name, ttl=timedelta(0)).holder()
