"""The keys of a directory workspace: ``<workspace>/.memdir-server/keys.json``, mode 0600.

The file is ``{"version": 1, "keys": [...]}``, rewritten whole (a synced temp file of mode 0600
renamed over it) under ``.memdir-server/keys.lock``, so concurrent ``memdir keys create`` never
lose a key. A file that group or others may read is refused ("chmod 600"). Each rewrite makes a
new file, so a reader notices a change by its inode, size and change time alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from memdir.errors import ConfigError, WorkspaceError
from memdir.server.auth._keys import KeyRecord, revoked
from memdir.store._fileio import file_lock, fsync_dir
from memdir.store.workspace import SERVER_DIR

__all__ = ["FileKeyStore"]

_VERSION: Final = 1
logger = logging.getLogger("memdir.server.auth")


class FileKeyStore:
    """The key file of the directory workspace at ``base``.

    Raises (from every method):
        ConfigError: the file is readable by group or others, or is not a key file.
        WorkspaceError: the file cannot be read or written.
    """

    def __init__(self, base: Path) -> None:
        self.dir = base / SERVER_DIR
        self.path = self.dir / "keys.json"
        self._mutex = threading.Lock()
        self._seen: object = None
        self._records: dict[str, KeyRecord] = {}

    def describe(self) -> str:
        return str(self.path)

    # -- reading ------------------------------------------------------------------------------

    def change_token(self) -> object:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {self.path}: {exc.strerror}") from exc
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _current(self) -> dict[str, KeyRecord]:
        with self._mutex:
            token = self.change_token()
            if token != self._seen or token is None:
                self._records, _ = self._load()
                self._seen = token
            return self._records

    def get(self, key_id: str) -> KeyRecord | None:
        return self._current().get(key_id)

    def check(self) -> None:
        self._current()

    def records(self, tenant: str | None = None) -> list[KeyRecord]:
        found = [r for r in self._current().values() if tenant is None or r.tenant == tenant]
        return sorted(found, key=lambda r: (r.created_at, r.key_id))

    def _load(self) -> tuple[dict[str, KeyRecord], list[Any]]:
        """The valid records, and the raw entries that are not (kept when rewriting)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return {}, []
        except OSError as exc:
            raise WorkspaceError(f"cannot read {self.path}: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as fh:
            mode = stat.S_IMODE(os.fstat(fh.fileno()).st_mode)
            if mode & 0o077:
                raise ConfigError(
                    f"{self.path} may be read by others (mode {mode:04o}): chmod 600 {self.path}"
                )
            raw = fh.read()
        try:
            data = json.loads(raw)
        except ValueError:
            raise ConfigError(f"{self.path} is not a key file (not JSON)") from None
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ConfigError(f"{self.path} is not a version {_VERSION} key file")
        entries = data.get("keys")
        if not isinstance(entries, list):
            raise ConfigError(f"{self.path} is not a key file (no list of keys)")
        records: dict[str, KeyRecord] = {}
        damaged: list[Any] = []
        for entry in entries:
            try:
                record = KeyRecord.from_json(entry)
            except ConfigError as exc:
                logger.warning("damaged key store %s: a record is refused: %s", self.path, exc)
                damaged.append(entry)
                continue
            records[record.key_id] = record
        return records, damaged

    # -- writing ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _rewriting(self) -> Iterator[dict[str, KeyRecord]]:
        """The records to change, written back when the block ends (under the lock)."""
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(f"cannot create {self.dir}: {exc.strerror}") from exc
        with file_lock(self.dir / "keys.lock"):
            records, damaged = self._load()
            yield records
            entries = [r.to_json() for r in sorted(records.values(), key=_age)]
            self._write({"version": _VERSION, "keys": [*entries, *damaged]})

    def _write(self, document: dict[str, Any]) -> None:
        data = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8")
        tmp = self.dir / f".keys.json.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise WorkspaceError(f"cannot write {self.path}: {exc.strerror}") from exc
        fsync_dir(self.dir)

    def add(self, record: KeyRecord) -> None:
        with self._rewriting() as records:
            if record.key_id in records:
                raise ConfigError(f"key {record.key_id} exists already")
            records[record.key_id] = record

    def revoke(self, key_id: str, at: datetime) -> KeyRecord | None:
        with self._rewriting() as records:
            found = records.get(key_id)
            if found is not None:
                records[key_id] = found = revoked(found, at)
            return found

    def touch(self, used: Mapping[str, datetime]) -> None:
        with self._rewriting() as records:
            for key_id, at in used.items():
                found = records.get(key_id)
                if found is not None and (found.last_used_at is None or found.last_used_at < at):
                    records[key_id] = replace(found, last_used_at=at)


def _age(record: KeyRecord) -> tuple[datetime, str]:
    return record.created_at, record.key_id
