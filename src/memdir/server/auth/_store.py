"""Where the keys of a workspace are kept: a private file beside a directory workspace, or a
table of a PostgreSQL one. Both keep only digests of the secrets."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from memdir.server.auth._keys import KeyRecord
from memdir.store.workspace import Workspace

__all__ = ["KeyStore", "open_key_store"]


class KeyStore(Protocol):
    """The key records of one workspace."""

    def describe(self) -> str:
        """Where the keys are, for messages (never a password)."""
        ...

    def get(self, key_id: str) -> KeyRecord | None:
        """The record of ``key_id`` (``None``: unknown, or a damaged record)."""
        ...

    def records(self, tenant: str | None = None) -> list[KeyRecord]:
        """Every record (of ``tenant``), oldest first."""
        ...

    def add(self, record: KeyRecord) -> None:
        """Store a new record."""
        ...

    def revoke(self, key_id: str, at: datetime) -> KeyRecord | None:
        """Revoke ``key_id`` (an earlier revocation stands); its record, ``None`` if unknown."""
        ...

    def touch(self, used: Mapping[str, datetime]) -> None:
        """Record when each key was last used."""
        ...

    def change_token(self) -> object:
        """A value that changes whenever a key is added or revoked (cheap to read)."""
        ...

    def check(self) -> None:
        """Raise if the keys cannot be read (for readiness)."""
        ...


def open_key_store(ws: Workspace) -> KeyStore:
    """The key store of the workspace ``ws`` (its root: keys are not per namespace).

    Raises:
        WorkspaceError: the store cannot be opened.
    """
    if ws.is_local:
        from memdir.server.auth._files import FileKeyStore

        return FileKeyStore(ws.base)
    from memdir.server.auth._postgres import PgKeyStore
    from memdir.store.postgres import PostgresStore

    store = ws.store
    assert isinstance(store, PostgresStore)
    return PgKeyStore(store.db)
