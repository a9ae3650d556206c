"""What one server process holds: its settings, the workspace root, the key authenticator and
the open namespaces. Built by :func:`memdir.server.app.create_app`, one per application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request

from memdir.server.auth import KeyAuthenticator
from memdir.server.idempotency import IdempotencyStore
from memdir.server.jobs import JobRunner
from memdir.server.limits import TenantLimiter
from memdir.server.models import ModelFactory
from memdir.server.pool import NamespacePool
from memdir.server.quotas import UsageMeter
from memdir.server.settings import ServerSettings
from memdir.store.workspace import Workspace

if TYPE_CHECKING:  # the metrics module serves /metrics, and so needs this one
    from memdir.server.metrics import Metrics

__all__ = ["ServerState", "server_state"]


@dataclass(slots=True, kw_only=True)
class ServerState:
    """The state of one application.

    Attributes:
        settings: how the server was started.
        root: the workspace root (never served itself: only its tenants' namespaces).
        authenticator: bearer keys to principals.
        pool: the namespaces opened so far.
        jobs: runs flushes, compactions, consolidations, maintenance, import and export.
        model: makes the model of a job.
        idempotency: the records of idempotency keys.
        limiter: each tenant's rate and requests in flight.
        usage: each tenant's storage, against its quotas.
        metrics: the Prometheus metrics.
        metrics_token: the bearer token ``/metrics`` needs (``None``: loopback clients only).
        readiness: when readiness was last checked (``time.monotonic()``) and why the server
            was not ready then (``None``: it was).
    """

    settings: ServerSettings
    root: Workspace
    authenticator: KeyAuthenticator
    pool: NamespacePool
    jobs: JobRunner
    model: ModelFactory
    idempotency: IdempotencyStore
    limiter: TenantLimiter
    usage: UsageMeter
    metrics: Metrics
    metrics_token: str | None = None
    readiness: tuple[float, str | None] = (float("-inf"), None)


def server_state(request: Request) -> ServerState:
    """The :class:`ServerState` of the application serving ``request``."""
    state = request.app.state.memdir
    assert isinstance(state, ServerState)
    return state
