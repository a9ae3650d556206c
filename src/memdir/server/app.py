"""The ASGI application: :func:`create_app` builds it from :class:`ServerSettings`.

Middleware, outermost first: the access log (and request id), the metrics, the catch-all
that turns an unexpected exception into a 500 problem, the body limits, then FastAPI's
exception handlers and the routes. The lifespan loads the keys before the first request and
polls the key store about once a second, so a revoked key is refused within about two
seconds. MCP is served at ``/mcp`` (:mod:`memdir.server.mcp_http`), whose SDK servers run in
the lifespan too, as does the background maintenance (:mod:`memdir.server.maintenance`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI

from memdir import __version__
from memdir.errors import MemdirError
from memdir.server.accesslog import AccessLogMiddleware
from memdir.server.auth import JwtAuthenticator, KeyAuthenticator, open_key_store
from memdir.server.idempotency import open_idempotency_store
from memdir.server.jobs import JobRunner
from memdir.server.limits import BodyLimitMiddleware, TenantLimiter
from memdir.server.maintenance import MaintenanceSweeper
from memdir.server.mcp_http import McpEndpoint
from memdir.server.metrics import Metrics, MetricsMiddleware
from memdir.server.models import model_factory
from memdir.server.openapi import install_openapi
from memdir.server.pool import NamespacePool
from memdir.server.problems import install_problem_handlers
from memdir.server.quotas import UsageMeter
from memdir.server.settings import ServerSettings
from memdir.server.state import ServerState
from memdir.store.workspace import Workspace

__all__ = ["app_from_env", "create_app", "preflight"]

logger = logging.getLogger("memdir.server")
_PURGE_SECONDS = 600.0


def _routes() -> list[Any]:
    from memdir.server import health, metrics
    from memdir.server.routes import jobs, memory, meta, sessions, store, transfer

    return [
        *health.router.routes,
        *metrics.router.routes,
        *meta.router.routes,
        *memory.router.routes,
        *sessions.router.routes,
        *jobs.router.routes,
        *transfer.router.routes,
        *store.router.routes,
    ]


def create_app(settings: ServerSettings) -> FastAPI:
    """The memdir REST application over ``settings.workspace``.

    Raises:
        WorkspaceError: the workspace cannot be opened or created.
        ConfigError: the model cannot be made.
    """
    root = Workspace(settings.workspace, create=True)
    jobs = JobRunner(threads=settings.job_threads, timeout=settings.job_timeout)
    model = model_factory(settings.model)
    state = ServerState(
        settings=settings,
        root=root,
        authenticator=KeyAuthenticator(open_key_store(root)),
        pool=NamespacePool(root, recheck=settings.key_poll_seconds),
        jobs=jobs,
        model=model,
        idempotency=open_idempotency_store(root),
        limiter=TenantLimiter(
            rate=settings.rate, burst=settings.burst, inflight=settings.inflight_per_tenant
        ),
        usage=UsageMeter(
            root,
            quota_bytes=settings.quota_bytes,
            quota_namespaces=settings.quota_namespaces,
            refresh=settings.quota_refresh,
        ),
        metrics=Metrics(),
        metrics_token=settings.metrics_token(),
        sweeper=(
            MaintenanceSweeper(root=root, jobs=jobs, model=model, settings=settings)
            if settings.maintenance
            else None
        ),
        jwt=_jwt_authenticator(settings),
    )
    mcp = McpEndpoint(state)
    app = FastAPI(
        title="memdir",
        version=__version__,
        summary="Durable memory for LLM agents, over HTTP, with a key per tenant.",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        routes=[*_routes(), mcp.route],
        generate_unique_id_function=lambda route: route.name,
        lifespan=_lifespan,
    )
    app.state.memdir = state
    install_openapi(app)
    app.state.mcp = mcp
    if settings.ui or settings.ui_local:
        from memdir.server.ui import install_ui

        install_ui(app)
    app.add_middleware(BodyLimitMiddleware, routes=app.routes, default=settings.body_limit)
    install_problem_handlers(app)
    if settings.metrics:
        app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    app.add_middleware(AccessLogMiddleware, log_namespaces=settings.log_namespaces)
    return app


def _jwt_authenticator(settings: ServerSettings) -> JwtAuthenticator | None:
    if settings.jwks_url is None:
        return None
    assert settings.jwt_issuer is not None and settings.jwt_audience is not None
    return JwtAuthenticator(
        jwks_url=settings.jwks_url,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        tenant_claim=settings.jwt_tenant_claim,
        namespace_claim=settings.jwt_namespace_claim,
    )


def preflight(settings: ServerSettings) -> None:
    """Fail now, in one line, if the workspace or its keys cannot be used.

    Raises:
        WorkspaceError: the store cannot be reached or the workspace created.
        ConfigError: the key file may be read by others, or is damaged; the model cannot be
            made.
    """
    model_factory(settings.model)
    open_key_store(Workspace(settings.workspace, create=True)).check()
    settings.metrics_token()


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ServerState = app.state.memdir
    await _poll_once(state, failing=False)  # the keys are read before the first request
    mcp: McpEndpoint = app.state.mcp
    sweeper = state.sweeper
    async with mcp.running(), anyio.create_task_group() as tasks:
        tasks.start_soon(_poll_keys, state)
        tasks.start_soon(_purge_idempotency, state)
        if sweeper is not None:
            await sweeper.start()
            tasks.start_soon(sweeper.run)
        try:
            yield
        finally:
            if sweeper is not None:
                await sweeper.stop(state.settings.graceful_timeout)
            tasks.cancel_scope.cancel()
    await anyio.to_thread.run_sync(_close_indexes)


async def _poll_keys(state: ServerState) -> None:
    """Forget cached keys when one was added or revoked (every ``key_poll_seconds``)."""
    failing = False
    while True:
        await anyio.sleep(state.settings.key_poll_seconds)
        failing = await _poll_once(state, failing=failing)


async def _poll_once(state: ServerState, *, failing: bool) -> bool:
    """One poll of the key store; whether it failed (logged once per outage: /readyz says
    503 meanwhile)."""
    try:
        await anyio.to_thread.run_sync(state.authenticator.poll)
    except (MemdirError, OSError) as exc:
        if not failing:
            logger.warning("cannot read the keys (%s): %s", type(exc).__name__, exc)
        return True
    return False


async def _purge_idempotency(state: ServerState) -> None:
    """Delete the expired idempotency records every few minutes."""
    while True:
        await anyio.sleep(min(state.settings.idempotency_ttl, _PURGE_SECONDS))
        try:
            await anyio.to_thread.run_sync(state.idempotency.purge)
        except (MemdirError, OSError) as exc:
            logger.warning("cannot purge idempotency records (%s)", type(exc).__name__)


def _close_indexes() -> None:
    from memdir.sessions import close_session_indexes
    from memdir.tools import close_shared_indexes

    close_shared_indexes()
    close_session_indexes()


def configure_logging() -> None:
    """The access log (JSON lines) and the server's warnings on stderr."""
    formats = {
        "memdir.server.access": "%(message)s",
        "memdir": "memdir serve: %(levelname)s %(name)s: %(message)s",
    }
    for name, fmt in formats.items():
        target = logging.getLogger(name)
        if not target.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(fmt))
            target.addHandler(handler)
        target.setLevel(logging.INFO if name.endswith("access") else logging.WARNING)
        target.propagate = False


def app_from_env() -> FastAPI:
    """The application of ``$MEMDIR_SERVE_CONFIG`` (the factory the ASGI server calls)."""
    configure_logging()
    return create_app(ServerSettings.from_env())
