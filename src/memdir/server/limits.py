"""Bounds on what one request may send, and on how much one tenant may ask at once.

- The body size of each route (its policy's ``body_limit``, else the server's default),
  answered 413 as a problem naming the limit. A ``Content-Length`` over the limit is refused
  before a byte of the body is read; a body sent in chunks is counted as it arrives and cut
  at the limit.
- Per tenant (:class:`TenantLimiter`): a token bucket (``rate`` requests a second, bursts of
  ``burst``) and a cap on the requests in flight, each answered 429 with ``Retry-After``, so a
  tenant's flood cannot take every worker thread from the others. Both are per server
  process: N processes let a tenant through N times over.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.server.problems import ProblemError, problem_response

__all__ = [
    "BodyLimitMiddleware",
    "BodyTooLarge",
    "RateLimited",
    "TenantLimiter",
    "TokenBucket",
    "TooManyInFlight",
]


class BodyTooLarge(ProblemError):
    """413: a request body over its route's limit."""

    def __init__(self, limit: int, size: int | None) -> None:
        said = f"the body is {size:,} bytes" if size is not None else "the body is larger"
        super().__init__(413, "payload-too-large", f"{said}; this route takes at most {limit:,}")
        self.limit = limit


class BodyLimitMiddleware:
    """Refuses request bodies over their route's limit.

    Args:
        app: the application.
        routes: the application's routes (their ``policy.body_limit`` when they have one).
        default: the limit of a route that sets none, in bytes.
    """

    def __init__(self, app: ASGIApp, *, routes: Sequence[Any], default: int) -> None:
        self.app = app
        self.routes = routes
        self.default = default

    def _limit(self, scope: Scope) -> int:
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                policy = getattr(route, "policy", None)
                return getattr(policy, "body_limit", None) or self.default
        return self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            error = BodyTooLarge(limit, declared)
            response = problem_response(Request(scope), 413, error.code, error.detail)
            await response(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit, None)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class TokenBucket:
    """``rate`` tokens a second, holding at most ``burst`` (full at first).

    Args:
        rate: tokens added per second (> 0).
        burst: the most tokens held (>= 1).
        now: the current time, in the clock's seconds.
    """

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = now

    def take(self, now: float) -> float:
        """Take a token: ``0.0``, or the seconds until there is one (nothing taken)."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class TenantLimiter:
    """Each tenant's request rate and requests in flight, in this process (used on the event
    loop only: no lock).

    Args:
        rate: requests a second per tenant (``0``: no limit).
        burst: requests a tenant may send at once above the rate.
        inflight: requests of a tenant served at once (``0``: no limit).
        clock: monotonic seconds (injectable in tests).
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        inflight: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.inflight = inflight
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._running: dict[str, int] = {}

    def take(self, tenant: str) -> float:
        """Take one of the tenant's tokens: ``0.0``, or the seconds until one is there."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = TokenBucket(self.rate, self.burst, now)
        return bucket.take(now)

    def enter(self, tenant: str) -> bool:
        """Count a request of the tenant in flight; ``False`` (not counted) at the cap."""
        running = self._running.get(tenant, 0)
        if self.inflight > 0 and running >= self.inflight:
            return False
        self._running[tenant] = running + 1
        return True

    def leave(self, tenant: str) -> None:
        """A request :meth:`enter` counted has been answered."""
        running = self._running.get(tenant, 0) - 1
        if running > 0:
            self._running[tenant] = running
        else:
            self._running.pop(tenant, None)


class RateLimited(ProblemError):
    """429: the tenant sends more requests than its rate."""

    def __init__(self, rate: float, burst: int, wait: float) -> None:
        seconds = max(1, math.ceil(wait))
        super().__init__(
            429,
            "rate-limited",
            f"this tenant sends more than {rate:g} requests a second (bursts of {burst}): "
            f"send again in {seconds} s",
            headers={"Retry-After": str(seconds)},
        )


class TooManyInFlight(ProblemError):
    """429: the tenant has as many requests running as it may."""

    def __init__(self, cap: int) -> None:
        super().__init__(
            429,
            "too-many-in-flight",
            f"this tenant has {cap} requests running, as many as it may: send again when "
            "one has been answered",
            headers={"Retry-After": "1"},
        )
