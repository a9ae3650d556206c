"""The idempotency records of a directory workspace: one JSON file per key under
``<workspace>/.memdir-server/idempotency/<tenant>/`` (directories of mode 0700).

A file is named by the SHA-256 of its key (a key is the client's text, never a path) and
rewritten whole (a synced temp file renamed over it) under the tenant's lock file, so the
server's worker processes claim a key one at a time. Times are the host's clock: a
directory workspace is served by one host. A record keeps the namespace its request wrote
into (``ns``; a record written before it was kept has none); an erased record is a file
``{"state": "erased", "expires_at"}`` and nothing else.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from memdir.errors import WorkspaceError
from memdir.server._idem_base import Answer, Claim, StoredRecord, content_of
from memdir.store._fileio import atomic_write, file_lock
from memdir.store.workspace import SERVER_DIR

__all__ = ["FileIdempotencyStore"]

_TENANT: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_LOCK: Final = ".lock"
_ERASED: Final = "erased"
_REF: Final = re.compile(r"[0-9a-f]{64}\.json")
logger = logging.getLogger("memdir.server")


class FileIdempotencyStore:
    """The records under ``base/.memdir-server/idempotency``.

    Args:
        base: the workspace directory.
        clock: seconds since the epoch (injectable in tests).

    Raises (from every method):
        WorkspaceError: a record cannot be read or written.
    """

    def __init__(self, base: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.dir = base / SERVER_DIR / "idempotency"
        self._clock = clock

    def _tenant_dir(self, tenant: str) -> Path:
        if not _TENANT.fullmatch(tenant):  # a principal's tenant always is; never a path
            raise WorkspaceError(f"not a tenant id: {tenant!r}")
        return self.dir / tenant

    @contextlib.contextmanager
    def _locked(self, tenant: str) -> Iterator[Path]:
        where = self._tenant_dir(tenant)
        for level in (self.dir.parent, self.dir, where):
            try:
                level.mkdir(mode=0o700, exist_ok=True)
            except OSError as exc:
                raise WorkspaceError(f"cannot create {level}: {exc.strerror}") from exc
        with file_lock(where / _LOCK):
            yield where

    @staticmethod
    def _name(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest() + ".json"

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {path}: {exc.strerror}") from exc
        try:
            record = json.loads(raw)
        except ValueError:
            logger.warning("an idempotency record is damaged and is ignored: %s", path)
            return None
        return record if isinstance(record, dict) else None

    @staticmethod
    def _write(path: Path, record: dict[str, Any]) -> None:
        atomic_write(path, json.dumps(record, sort_keys=True).encode("utf-8"))

    def claim(
        self,
        tenant: str,
        key: str,
        fingerprint: bytes,
        token: str,
        *,
        lease: float,
        ttl: float,
        namespace: str = "",
    ) -> Claim:
        now = self._clock()
        with self._locked(tenant) as where:
            path = where / self._name(key)
            record = self._read(path)
            if record is None or _expired(record, now):
                self._write(
                    path,
                    {
                        "fingerprint": fingerprint.hex(),
                        "token": token,
                        "state": "running",
                        "locked_until": now + lease,
                        "expires_at": now + ttl,
                        "intent": None,
                        "ns": namespace,
                    },
                )
                return Claim("new")
            if record.get("state") == _ERASED:
                return Claim("erased")
            if record.get("fingerprint") != fingerprint.hex():
                return Claim("mismatch")
            if record.get("state") == "done":
                return Claim("replay", answer=_answer(record.get("answer")))
            if float(record.get("locked_until", 0)) > now:
                return Claim("running")
            intent = record.get("intent")
            record.update(token=token, locked_until=now + lease, expires_at=now + ttl)
            self._write(path, record)
            return Claim("takeover", intent=intent if isinstance(intent, dict) else None)

    def _update(self, tenant: str, key: str, token: str, change: dict[str, Any]) -> bool:
        with self._locked(tenant) as where:
            path = where / self._name(key)
            record = self._read(path)
            if record is None or record.get("token") != token or record.get("state") != "running":
                return False
            record.update(change)
            self._write(path, record)
            return True

    def record_intent(self, tenant: str, key: str, token: str, intent: dict[str, Any]) -> bool:
        return self._update(tenant, key, token, {"intent": intent})

    def renew(self, tenant: str, key: str, token: str, *, lease: float) -> bool:
        return self._update(tenant, key, token, {"locked_until": self._clock() + lease})

    def finish(self, tenant: str, key: str, token: str, answer: Answer, *, ttl: float) -> bool:
        now = self._clock()
        done = {
            "state": "done",
            "locked_until": now,
            "expires_at": now + ttl,
            "answer": {
                "status": answer.status,
                "headers": answer.headers,
                "body": base64.b64encode(answer.body).decode("ascii"),
            },
        }
        return self._update(tenant, key, token, done)

    def release(self, tenant: str, key: str, token: str) -> None:
        with self._locked(tenant) as where:
            path = where / self._name(key)
            record = self._read(path)
            if record is None or record.get("token") != token or record.get("state") != "running":
                return
            if record.get("intent") is None:
                path.unlink(missing_ok=True)
            else:  # something may have been written: the next try takes over at once
                record["locked_until"] = self._clock()
                self._write(path, record)

    def _tenants(self) -> list[str]:
        try:
            return sorted(p.name for p in self.dir.iterdir() if _TENANT.fullmatch(p.name))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise WorkspaceError(f"cannot list {self.dir}: {exc.strerror}") from exc

    def records(self, namespace: str | None) -> Iterator[StoredRecord]:
        now = self._clock()
        for tenant in self._tenants():
            for path in sorted(self._tenant_dir(tenant).glob("*.json")):
                record = self._read(path)
                if record is None or record.get("state") == _ERASED or _expired(record, now):
                    continue
                ns = record.get("ns")
                if ns is not None and (namespace is None or ns != namespace):
                    continue
                stored = record.get("answer")
                body = headers = None
                if isinstance(stored, dict):
                    body = base64.b64decode(str(stored.get("body", "")))
                    headers = stored.get("headers")
                content = content_of(body, headers, record.get("intent"))
                yield StoredRecord(tenant, path.name, ns if isinstance(ns, str) else None, content)

    def erase(self, records: Iterable[StoredRecord]) -> int:
        now = self._clock()
        erased = 0
        for found in records:
            if not _REF.fullmatch(found.ref):  # a record's own name, never a path
                raise WorkspaceError(f"not an idempotency record: {found.ref!r}")
            with self._locked(found.tenant) as where:
                path = where / found.ref
                record = self._read(path)
                if record is None or record.get("state") == _ERASED:
                    continue
                if _expired(record, now):
                    path.unlink(missing_ok=True)
                else:
                    expires = max(float(record.get("expires_at", 0)), now)
                    self._write(path, {"state": _ERASED, "expires_at": expires, "locked_until": 0})
                erased += 1
        return erased

    def purge(self) -> int:
        now = self._clock()
        removed = 0
        for tenant in self._tenants():
            with self._locked(tenant) as where:
                for path in where.glob("*.json"):
                    record = self._read(path)
                    if record is None or _expired(record, now):
                        path.unlink(missing_ok=True)
                        removed += 1
        return removed


def _expired(record: dict[str, Any], now: float) -> bool:
    """Past its time and not held (a running claim outlives its expiry while renewed)."""
    return float(record.get("expires_at", 0)) <= now and float(record.get("locked_until", 0)) <= now


def _answer(stored: Any) -> Answer:
    if not isinstance(stored, dict):
        raise WorkspaceError("an idempotency record has no answer")
    return Answer(
        status=int(stored["status"]),
        headers={str(k): str(v) for k, v in dict(stored["headers"]).items()},
        body=base64.b64decode(stored["body"]),
    )
