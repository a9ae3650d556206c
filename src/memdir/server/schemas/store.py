"""Bodies of the store routes: a namespace's files and locks, as the library's ``Store``
contract has them (for a remote workspace: ``memdir.client``'s ``RemoteStore``)."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field

from memdir.server.schemas.meta import FromLibrary

__all__ = ["Appended", "Deleted", "EntryOut", "LockHeld", "LockIn", "StatOut", "StoreInfo"]


class StoreInfo(BaseModel):
    """A namespace's store exists."""

    namespace: str


class StatOut(FromLibrary):
    """What the store knows of a file without reading it (as ``memdir.store.FileStat``)."""

    size: int = Field(description="Bytes.")
    mtime_ns: int = Field(description="Last change, nanoseconds since the epoch.")
    tag: str = Field(description="Changes whenever the file does (compare for equality).")
    identity: str = Field(
        description="Changes when the file is replaced or re-created, not when appended to."
    )


class EntryOut(FromLibrary):
    """A name in a directory: a file (with its stat) or a sub-directory."""

    name: str
    kind: Literal["file", "dir"]
    stat: StatOut | None = None


class Appended(BaseModel):
    """Where an append's bytes went."""

    start: int = Field(description="The byte offset of the first byte appended.")
    end: int = Field(description="The byte offset after the last one.")


class Deleted(BaseModel):
    """Whether the file existed (it does not now)."""

    deleted: bool


class LockIn(BaseModel):
    """A holder of a lock, known by a token of its own."""

    token: uuid.UUID = Field(description="A UUID the holder made; the same on each call.")


class LockHeld(BaseModel):
    """Whether the token holds the lock, and for how long without a renewal."""

    held: bool
    ttl: float = Field(description="Seconds the lock lasts after this call unless renewed.")
