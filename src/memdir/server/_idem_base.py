"""What an idempotency record is, and the store that keeps them, without the web framework:
the server claims keys through it (:mod:`memdir.server.idempotency`), and an erasure
(:mod:`memdir.forget`, which runs without the ``server`` extra) reads and erases records.

A record knows the namespace its request wrote into (``""``: a route that writes into none).
A record kept before namespaces were recorded has none (``None``: unknown); an erasure reads
its content to decide. An erased record is a marker without content that stays until the
record would have expired: a retry with its key is answered ``410`` instead of run again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from memdir.store.workspace import Workspace

__all__ = [
    "Answer",
    "Claim",
    "IdempotencyStore",
    "StoredRecord",
    "content_of",
    "open_idempotency_store",
]


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer kept for replays: its status, headers and body."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Claim:
    """What claiming a key found.

    Attributes:
        kind: ``new`` (this request holds it), ``takeover`` (it holds it after a run that
            died), ``replay`` (answered before), ``running`` (another request holds it),
            ``mismatch`` (the key was used for another request), ``erased`` (its answer or
            what it was about to write was erased by a forget or a namespace delete).
        intent: on a takeover, what the dead run recorded it was about to write.
        answer: on a replay, the stored answer.
    """

    kind: Literal["new", "takeover", "replay", "running", "mismatch", "erased"]
    intent: dict[str, Any] | None = None
    answer: Answer | None = None


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A live record as an erasure reads it.

    Attributes:
        tenant: its tenant.
        ref: which record of the tenant it is (the store's own name for it, not the key).
        namespace: the namespace its request wrote into (``""``: none; ``None``: unknown, a
            record kept before namespaces were recorded).
        content: everything it keeps that a client sent or was answered, decoded: the
            answer's body (JSON, or text), its headers, and the intent.
    """

    tenant: str
    ref: str
    namespace: str | None
    content: dict[str, Any]


def content_of(body: bytes | None, headers: Any, intent: Any) -> dict[str, Any]:
    """A record's content as :attr:`StoredRecord.content` (a JSON body decoded, escapes and
    all, so that text stored as ``\\uXXXX`` reads as itself)."""
    text: Any = None
    if body is not None:
        raw = body.decode("utf-8", errors="replace")
        try:
            text = json.loads(raw)
        except ValueError:
            text = raw
    return {"body": text, "headers": headers, "intent": intent}


class IdempotencyStore(Protocol):
    """Where the idempotency records of a workspace are kept (per tenant and key)."""

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
        """Claim ``key`` for a run identified by ``token`` (see :class:`Claim`), for a
        request that writes into ``namespace`` (``""``: none)."""
        ...

    def record_intent(self, tenant: str, key: str, token: str, intent: dict[str, Any]) -> bool:
        """Keep what the holder is about to write; whether it still holds the claim."""
        ...

    def renew(self, tenant: str, key: str, token: str, *, lease: float) -> bool:
        """Hold the claim ``lease`` seconds more; whether it is still held."""
        ...

    def finish(self, tenant: str, key: str, token: str, answer: Answer, *, ttl: float) -> bool:
        """Store the answer (kept ``ttl`` seconds); whether the claim was still held."""
        ...

    def release(self, tenant: str, key: str, token: str) -> None:
        """Give the claim up without an answer: dropped, or, when an intent was recorded,
        left for the next try to take over at once."""
        ...

    def purge(self) -> int:
        """Delete the expired records (erased ones too); how many."""
        ...

    def records(self, namespace: str | None) -> Iterator[StoredRecord]:
        """The live records (not expired, not erased) of requests that wrote into
        ``namespace`` (``None``: of no namespace a server serves, that is none), and those
        whose namespace is unknown."""
        ...

    def erase(self, records: Iterable[StoredRecord]) -> int:
        """Replace each of ``records`` by an erased marker (no content) kept until it would
        have expired; how many were replaced."""
        ...


def open_idempotency_store(root: Workspace) -> IdempotencyStore:
    """The idempotency records of the workspace ``root`` (any of its namespaces): a table of
    a PostgreSQL workspace, files under ``<base>/.memdir-server/idempotency/`` of a directory
    one."""
    if root.is_local:
        from memdir.server._idem_files import FileIdempotencyStore

        return FileIdempotencyStore(root.base)
    from memdir.server._idem_pg import PgIdempotencyStore
    from memdir.store.postgres import PostgresStore

    store = root.store
    assert isinstance(store, PostgresStore)
    return PgIdempotencyStore(store.db)
