"""Bounds on what one request may send: the body size of each route (its policy's
``body_limit``, else the server's default), answered 413 as a problem naming the limit.

A ``Content-Length`` over the limit is refused before a byte of the body is read; a body sent
in chunks is counted as it arrives and cut at the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.server.problems import ProblemError, problem_response

__all__ = ["BodyLimitMiddleware", "BodyTooLarge"]


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
