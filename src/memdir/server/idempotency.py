"""Idempotency keys: a write sent again with the same ``Idempotency-Key`` is made once.

A write route whose policy is ``idempotent`` takes the header (1-255 visible ASCII
characters). Before the route runs, the key is *claimed* for the caller's tenant, with a
fingerprint of the request (method, path, query, ``Content-Type``, ``If-Match``,
``If-None-Match`` and body):

- a key never seen (or whose record expired): the route runs, holding the claim;
- the same key with the same request, answered: the stored answer again, with
  ``Idempotency-Replayed: true``; nothing runs;
- the same key with another request: 422 ``idempotency-key-reused``;
- the same key still running: 409 ``idempotency-in-progress`` with ``Retry-After``;
- the same key whose holder died (its claim was not renewed for ``lease`` seconds): the
  route runs again, *taking over*, and learns what the dead run recorded it was about to
  write (its intent), so an append that landed is found instead of written twice;
- the same key whose record was erased (a forget or a namespace delete found the erased
  text in it, or it wrote into the deleted namespace): 410 ``idempotency-result-erased``;
  nothing runs, so a client's retry never writes an erased fact back.

A running claim is renewed every ``lease / 3`` seconds while its request runs. A success
(2xx, 3xx) is stored for ``ttl`` seconds (a day by default) when its body is at most
:data:`MAX_STORED_BODY`; an error is not stored (the claim is dropped, or left for a takeover
when an intent was recorded), so a retry runs the write again.

Records are kept per tenant in the store (:mod:`._idem_pg`, :mod:`._idem_files`), each with
the namespace its request wrote into (:mod:`._idem_base`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import MemdirError
from memdir.server._idem_base import Answer, Claim, IdempotencyStore, open_idempotency_store
from memdir.server.problems import ProblemError
from memdir.store.ledger import AppendedBlock, landed_since
from memdir.store.workspace import Workspace

__all__ = [
    "IDEMPOTENCY_HEADER",
    "KEY_PATTERN",
    "MAX_STORED_BODY",
    "REPLAYED_HEADER",
    "Answer",
    "Claim",
    "IdempotencyStore",
    "IdempotentRun",
    "KeyInProgress",
    "KeyReused",
    "LedgerOnce",
    "Replayed",
    "ResultErased",
    "claim_key",
    "fingerprint",
    "open_idempotency_store",
]

IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
REPLAYED_HEADER: Final = "Idempotency-Replayed"
KEY_PATTERN: Final = r"^[\x21-\x7e]{1,255}$"
"""A key: 1-255 visible ASCII characters (a UUID is the usual choice)."""
MAX_STORED_BODY: Final = 64 << 10
"""The largest answer body kept for a replay; a larger one is run again (safely, see above)."""
_NOT_STORED: Final = frozenset({"content-length", "date", "server", "x-request-id"})
logger = logging.getLogger("memdir.server")


def fingerprint(request: Request, body: bytes) -> bytes:
    """What makes two requests with one key the same request (SHA-256)."""
    digest = hashlib.sha256()
    headers = request.headers
    parts = (
        request.method,
        request.scope.get("path", ""),
        request.scope.get("query_string", b"").decode("latin-1"),
        headers.get("content-type", ""),
        headers.get("if-match", ""),
        headers.get("if-none-match", ""),
    )
    for part in (*(p.encode("utf-8", "surrogateescape") for p in parts), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()


class KeyReused(ProblemError):
    """422: the key was used for another request."""

    def __init__(self) -> None:
        super().__init__(
            422,
            "idempotency-key-reused",
            "this Idempotency-Key was sent with another request: use a new key for each "
            "write, and the same key only to send that write again",
        )


class KeyInProgress(ProblemError):
    """409: a request with this key is running."""

    def __init__(self) -> None:
        super().__init__(
            409,
            "idempotency-in-progress",
            "a request with this Idempotency-Key is still running: send it again after "
            "Retry-After seconds to get its answer",
            headers={"Retry-After": "1"},
        )


class ResultErased(ProblemError):
    """410: the record of this key was erased (a forget or a namespace delete)."""

    def __init__(self) -> None:
        super().__init__(
            410,
            "idempotency-result-erased",
            "the result of the request sent with this Idempotency-Key was erased (a forget "
            "or a namespace delete), so it is not run again: send a new key to write anew",
        )


class Replayed(Exception):
    """Raised by the write gate to answer with a stored answer instead of running."""

    def __init__(self, answer: Answer) -> None:
        super().__init__("replayed")
        self.answer = answer

    def response(self) -> Response:
        """The stored answer, marked as a replay."""
        headers = {**self.answer.headers, REPLAYED_HEADER: "true"}
        return Response(self.answer.body, status_code=self.answer.status, headers=headers)


@dataclass(slots=True, kw_only=True)
class IdempotentRun:
    """A write that holds the claim of its key while it runs.

    Attributes:
        store: where the claim is kept.
        tenant: the caller's tenant.
        key: the ``Idempotency-Key``.
        token: this run's claim.
        earlier: on a takeover, what the run that died recorded it was about to write.
        lease: seconds the claim holds unless renewed.
        ttl: seconds the answer is kept.
    """

    store: IdempotencyStore
    tenant: str
    key: str
    token: str
    earlier: dict[str, Any] | None
    lease: float
    ttl: float
    _renewer: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def record(self, intent: dict[str, Any]) -> None:
        """Keep ``intent`` (JSON) before writing (call from a worker thread).

        Raises:
            KeyInProgress: the claim was taken over meanwhile: nothing may be written.
            WorkspaceError: the store cannot be reached.
        """
        if not self.store.record_intent(self.tenant, self.key, self.token, intent):
            raise KeyInProgress()

    def start_renewing(self) -> None:
        """Renew the claim every ``lease / 3`` seconds until :meth:`finish`."""
        self._renewer = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        while True:
            await anyio.sleep(self.lease / 3)
            try:
                held = await anyio.to_thread.run_sync(
                    lambda: self.store.renew(self.tenant, self.key, self.token, lease=self.lease)
                )
            except MemdirError as exc:
                logger.warning("cannot renew an idempotency claim: %s", type(exc).__name__)
                continue
            if not held:
                logger.warning("an idempotency claim was taken over while its request ran")
                return

    async def finish(self, response: Response | None) -> None:
        """Store ``response`` for replays (a success that is not too large), else give the
        claim up; a store that fails here is logged (the answer still goes out)."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        answer = _storable(response)
        try:
            if answer is not None:
                await anyio.to_thread.run_sync(
                    lambda: self.store.finish(
                        self.tenant, self.key, self.token, answer, ttl=self.ttl
                    )
                )
            else:
                await anyio.to_thread.run_sync(
                    self.store.release, self.tenant, self.key, self.token
                )
        except MemdirError as exc:
            logger.warning("cannot store an idempotent answer: %s", type(exc).__name__)


def _storable(response: Response | None) -> Answer | None:
    if response is None or not 200 <= response.status_code < 400:
        return None
    body = getattr(response, "body", None)  # a streamed answer has none
    if not isinstance(body, bytes) or len(body) > MAX_STORED_BODY:
        return None
    headers = {k: v for k, v in response.headers.items() if k not in _NOT_STORED}
    return Answer(status=response.status_code, headers=headers, body=body)


async def claim_key(
    store: IdempotencyStore,
    tenant: str,
    key: str,
    fingerprint: bytes,
    *,
    lease: float,
    ttl: float,
    namespace: str = "",
) -> IdempotentRun:
    """Claim ``key`` for a request that writes into ``namespace`` (``""``: none); the run
    that holds it.

    Raises:
        Replayed: the request was answered before (its answer is in the exception).
        KeyReused: the key was used for another request.
        KeyInProgress: a request with the key is running.
        ResultErased: the key's record was erased.
        WorkspaceError: the store cannot be reached.
    """
    token = str(uuid.uuid4())
    found = await anyio.to_thread.run_sync(
        lambda: store.claim(
            tenant, key, fingerprint, token, lease=lease, ttl=ttl, namespace=namespace
        )
    )
    if found.kind == "replay":
        assert found.answer is not None
        raise Replayed(found.answer)
    if found.kind == "mismatch":
        raise KeyReused()
    if found.kind == "running":
        raise KeyInProgress()
    if found.kind == "erased":
        raise ResultErased()
    run = IdempotentRun(
        store=store,
        tenant=tenant,
        key=key,
        token=token,
        earlier=found.intent,
        lease=lease,
        ttl=ttl,
    )
    run.start_renewing()
    return run


class LedgerOnce:
    """``add_memory``'s ``before_append`` for a request holding an idempotency claim: on a
    takeover it looks for the block the dead run appended; otherwise it records where the
    block is about to go, before it is written.

    Args:
        ws: the namespace written.
        run: the claim (``None``: a request without a key, and the hook does nothing).
    """

    def __init__(self, ws: Workspace, run: IdempotentRun | None) -> None:
        self.ws = ws
        self.run = run

    def __call__(self, rel: str, offset: int, bullets: list[str]) -> AppendedBlock | None:
        run = self.run
        if run is None:
            return None
        earlier = run.earlier
        if earlier is not None and earlier.get("op") == "ledger-append":
            found = landed_since(
                self.ws, str(earlier["rel"]), int(earlier["offset"]), list(earlier["bullets"])
            )
            if found is not None:
                return found
        run.record({"op": "ledger-append", "rel": rel, "offset": offset, "bullets": bullets})
        return None
