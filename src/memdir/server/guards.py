"""What a request goes through around its route, once its key is checked.

- :func:`before_write` (every write route, after the namespace is checked): the
  ``Idempotency-Key`` claim (a replay answers here) and the tenant's storage quota;
- :func:`guarded` wraps each route's handler: it answers a replay, and when the answer is
  ready it stores it for the key (or gives the claim up).

:mod:`memdir.server.policy` puts these on every route; the route modules never call them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from memdir.server.auth import Principal
from memdir.server.idempotency import IdempotentRun, Replayed, claim_key, fingerprint
from memdir.server.state import server_state

__all__ = ["before_write", "guarded", "idempotent_run"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


async def before_write(
    request: Request, principal: Principal, key: str | None, *, idempotent: bool
) -> None:
    """Claim the request's idempotency key (when the route honours one).

    Raises:
        Replayed: the request was answered before (:func:`guarded` sends that answer).
        KeyReused, KeyInProgress: the key cannot be used now (422, 409).
        WorkspaceError: the store cannot be reached (503).
    """
    state = server_state(request)
    body = await request.body()
    if idempotent and key is not None:
        settings = state.settings
        run = await claim_key(
            state.idempotency,
            principal.tenant,
            key,
            fingerprint(request, body),
            lease=settings.idempotency_lease,
            ttl=settings.idempotency_ttl,
        )
        request.state.idempotent_run = run


def idempotent_run(request: Request) -> IdempotentRun | None:
    """The claim the request holds (``None``: it sent no key, or the route honours none)."""
    run = getattr(request.state, "idempotent_run", None)
    return run if isinstance(run, IdempotentRun) else None


def guarded(handler: Handler) -> Handler:
    """``handler`` with a replay answered, and the idempotency claim settled by its answer."""

    async def run(request: Request) -> Response:
        response: Response | None = None
        try:
            response = await handler(request)
        except Replayed as replay:
            return replay.response()
        finally:
            claim = idempotent_run(request)
            if claim is not None:
                with anyio.CancelScope(shield=True):
                    await claim.finish(response)
        return response

    return run
