"""What a request goes through around its route, once its key is checked.

- :func:`admit` (every request with a key, right after the key and its scope are checked):
  the tenant's rate and its requests in flight (429);
- :func:`before_write` (every write route, after the namespace is checked): the
  ``Idempotency-Key`` claim (a replay answers here) and the tenant's storage quota (507);
- :func:`guarded` wraps each route's handler: it answers a replay, and when the answer is
  ready it stores it for the key (or gives the claim up), counts the bytes written toward
  the quota and frees the request's place in flight.

:mod:`memdir.server.policy` puts these on every route; the route modules never call them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final

import anyio
from starlette.requests import Request
from starlette.responses import Response

from memdir.server.auth import Principal
from memdir.server.idempotency import IdempotentRun, Replayed, claim_key, fingerprint
from memdir.server.limits import RateLimited, TooManyInFlight
from memdir.server.quotas import QuotaExceeded
from memdir.server.state import ServerState, server_state

__all__ = ["SAFE_METHODS", "admit", "before_write", "guarded", "idempotent_run"]

SAFE_METHODS: Final = frozenset({"GET", "HEAD"})
"""The methods that write nothing (every other one is a write)."""

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def admit(state: ServerState, request: Request, principal: Principal) -> None:
    """Let the request in, or refuse it when its tenant is over its rate or has as many
    requests in flight as it may (its place is freed when :func:`guarded` answers).

    Raises:
        RateLimited: 429, with the seconds until the tenant's next token.
        TooManyInFlight: 429.
    """
    limiter = state.limiter
    wait = limiter.take(principal.tenant)
    if wait > 0:
        raise RateLimited(limiter.rate, limiter.burst, wait)
    if not limiter.enter(principal.tenant):
        raise TooManyInFlight(limiter.inflight)
    request.state.admitted = principal.tenant


async def before_write(
    request: Request,
    principal: Principal,
    key: str | None,
    *,
    idempotent: bool,
    streamed: bool = False,
    namespace: str = "",
) -> None:
    """Claim the request's idempotency key (when the route honours one), for a write into
    ``namespace`` (``""``: none; a forget there erases the records holding its text).

    Raises:
        Replayed: the request was answered before (:func:`guarded` sends that answer).
        KeyReused, KeyInProgress, ResultErased: the key cannot be used (422, 409, 410).
        QuotaExceeded: the write would take the tenant past its storage quota (507).
        WorkspaceError: the store cannot be reached (503).
    """
    state = server_state(request)
    if streamed:  # read by the route as a stream: counted by its declared length
        body = b""
        size = _declared_length(request)
    else:
        body = await request.body()
        size = len(body)
    request.state.bytes_in = size
    if idempotent and key is not None and not streamed:
        settings = state.settings
        run = await claim_key(
            state.idempotency,
            principal.tenant,
            key,
            fingerprint(request, body),
            lease=settings.idempotency_lease,
            ttl=settings.idempotency_ttl,
            namespace=namespace,
        )
        request.state.idempotent_run = run
    meter = state.usage
    if meter.quota_bytes > 0:
        usage = meter.current(principal.tenant)
        if usage is None:
            usage = await anyio.to_thread.run_sync(meter.measure, principal.tenant)
        meter.check_write(principal.tenant, usage, size)


def _declared_length(request: Request) -> int:
    try:
        return max(0, int(request.headers.get("content-length", "0")))
    except ValueError:
        return 0


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
            _count(request, "replay")
            return replay.response()
        except (RateLimited, TooManyInFlight, QuotaExceeded) as refused:
            _count(request, refused)
            raise
        finally:
            _settle(request, response)
            claim = idempotent_run(request)
            if claim is not None:
                with anyio.CancelScope(shield=True):
                    await claim.finish(response)
        return response

    return run


def _settle(request: Request, response: Response | None) -> None:
    """Free the request's place in flight; count what a write stored toward the quota."""
    tenant = getattr(request.state, "admitted", None)
    if not isinstance(tenant, str):
        return
    state = server_state(request)
    state.limiter.leave(tenant)
    if response is not None and response.status_code < 300 and request.method not in SAFE_METHODS:
        state.usage.add(tenant, stored=int(getattr(request.state, "bytes_in", 0)))


def _count(request: Request, what: str | Exception) -> None:
    """Count a replay or a refusal in the tenant's metrics."""
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):
        return
    metrics, tenant = server_state(request).metrics, principal.tenant
    if what == "replay":
        metrics.replays.labels(tenant).inc()
    elif isinstance(what, QuotaExceeded):
        metrics.quota_rejections.labels(tenant, what.quota).inc()
    elif isinstance(what, RateLimited | TooManyInFlight):
        limit = "rate" if isinstance(what, RateLimited) else "inflight"
        metrics.rate_limited.labels(tenant, limit).inc()
