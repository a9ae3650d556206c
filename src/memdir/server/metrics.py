"""Prometheus metrics of ``memdir serve``, and ``GET /metrics``.

- ``memdir_http_requests_total{route, method, status, tenant}``
- ``memdir_http_request_seconds{route, method}`` (a histogram)
- ``memdir_rate_limited_total{tenant, limit}`` (``limit``: ``rate`` or ``inflight``)
- ``memdir_quota_rejections_total{tenant, quota}`` (``quota``: ``bytes`` or ``namespaces``)
- ``memdir_auth_failures_total{reason}`` (``missing``, ``invalid``, ``revoked``, ``expired``,
  ``scope``)
- ``memdir_idempotent_replays_total{tenant}``

A label never holds a namespace, a query or memory text: ``route`` is the route's template
(``/v1/namespaces/{ns}/search``; ``unmatched`` for a path no route has), ``method`` one of the
HTTP methods (``other`` for anything else), ``tenant`` an id from the key store (``none``
before a key is checked), so the number of series is bounded by the operator's tenants.

With ``--workers`` above 1 the server runs prometheus-client in its multiprocess mode (the
runner gives the workers a fresh ``PROMETHEUS_MULTIPROC_DIR``): any worker answers
``/metrics`` with the sums of all. ``/metrics`` answers a request bearing the
``--metrics-token-file`` token (or ``$MEMDIR_METRICS_TOKEN``) when one is set, else only a
loopback client; anyone else gets the 404 of a route that does not exist.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.server.policy import MemdirRouter, Policy
from memdir.server.runner import MULTIPROC_ENV
from memdir.server.state import server_state

__all__ = ["Metrics", "MetricsMiddleware", "router"]

METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
NO_TENANT: Final = "none"
_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The metrics of one application (a registry of its own, so that several applications
    in one process keep apart)."""

    def __init__(self) -> None:
        self.registry = reg = CollectorRegistry()

        def counter(name: str, text: str, *labels: str) -> Counter:
            return Counter(name, text, list(labels), registry=reg)

        self.requests = counter(
            "memdir_http_requests",
            "HTTP requests answered, by route template, method, status and tenant.",
            *("route", "method", "status", "tenant"),
        )
        self.seconds = Histogram(
            "memdir_http_request_seconds",
            "Seconds from a request's arrival to the end of its answer, by route template.",
            ["route", "method"],
            buckets=_BUCKETS,
            registry=reg,
        )
        self.rate_limited = counter(
            "memdir_rate_limited",
            "Requests refused with 429: over the tenant's rate, or too many in flight.",
            *("tenant", "limit"),
        )
        self.quota_rejections = counter(
            "memdir_quota_rejections",
            "Writes refused with 507: past the tenant's storage quota.",
            *("tenant", "quota"),
        )
        self.auth_failures = counter(
            "memdir_auth_failures",
            "Requests refused by the key check (401) or the key's scope (403), by reason.",
            "reason",
        )
        self.replays = counter(
            "memdir_idempotent_replays",
            "Writes answered with the stored answer of their Idempotency-Key.",
            "tenant",
        )

    def exposition(self) -> bytes:
        """The text exposition of every metric (of every worker in multiprocess mode)."""
        where = os.environ.get(MULTIPROC_ENV)
        if not where:
            return generate_latest(self.registry)
        from prometheus_client import multiprocess

        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=where)  # type: ignore[no-untyped-call]
        return generate_latest(merged)


class MetricsMiddleware:
    """Counts every HTTP request and times it, by route template.

    Args:
        app: the application.
        metrics: where to count.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            route = str(getattr(scope.get("route"), "path", "unmatched"))
            method = scope.get("method", "")
            method = method if method in METHODS else "other"
            principal = scope.get("state", {}).get("principal")
            tenant = str(getattr(principal, "tenant", NO_TENANT))
            self.metrics.requests.labels(route, method, str(status), tenant).inc()
            self.metrics.seconds.labels(route, method).observe(time.perf_counter() - started)


router = MemdirRouter()


@router.get("/metrics", policy=Policy(scope=None), include_in_schema=False, response_class=Response)
def metrics(request: Request) -> Response:
    """The Prometheus text exposition, to the bearer of the metrics token or a loopback
    client (anyone else: the 404 of a route that does not exist)."""
    state = server_state(request)
    if not state.settings.metrics or not _may_scrape(request, state.metrics_token):
        raise HTTPException(404)
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


def _may_scrape(request: Request, token: str | None) -> bool:
    if token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        presented = given.strip().encode("utf-8", "surrogateescape")
        return scheme.lower() == "bearer" and hmac.compare_digest(presented, token.encode())
    host = request.client.host if request.client is not None else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
