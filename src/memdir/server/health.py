"""``/healthz`` (the process serves) and ``/readyz`` (it can do its work: the keys can be read
and the store answers). A server told to stop stops accepting connections at once (uvicorn),
so no probe reaches it then."""

from __future__ import annotations

import logging
import os
import time
from typing import Final

from fastapi import Request

from memdir.errors import MemdirError
from memdir.server.policy import MemdirRouter, Policy
from memdir.server.problems import Problem, ProblemError
from memdir.server.schemas.meta import Health
from memdir.server.state import ServerState, server_state

__all__ = ["router"]

PUBLIC: Final = Policy(scope=None)
_CACHE_SECONDS: Final = 1.0
logger = logging.getLogger("memdir.server")

router = MemdirRouter()


@router.get("/healthz", policy=PUBLIC, response_model=Health)
async def healthz() -> Health:
    """The process is up (touches nothing)."""
    return Health(status="ok")


@router.get(
    "/readyz",
    policy=PUBLIC,
    response_model=Health,
    responses={503: {"model": Problem, "description": "Not ready: why, in detail."}},
)
def readyz(request: Request) -> Health:
    """The server can serve: the keys can be read, the store answers."""
    state = server_state(request)
    why = _why_not_ready(state)
    if why is not None:
        raise ProblemError(503, "not-ready", why, headers={"Retry-After": "1"})
    return Health(status="ok")


def _why_not_ready(state: ServerState) -> str | None:
    now = time.monotonic()
    checked_at, why = state.readiness
    if now - checked_at < _CACHE_SECONDS:
        return why
    try:
        state.authenticator.store.check()  # PostgreSQL: a query; files: the key file read
        if state.root.is_local and not os.access(state.root.base, os.W_OK):
            why = "the workspace directory cannot be written"
        else:
            why = None
    except (MemdirError, OSError) as exc:  # the details go to the log, not to the public
        logger.warning("not ready: %s", exc)
        why = f"the store cannot be used ({type(exc).__name__}); the server log says why"
    state.readiness = (now, why)
    return why
