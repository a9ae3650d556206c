"""Errors as RFC 9457 problem details (``application/problem+json``): one clear line, never a
stack trace, never memory text.

Every error answer has the same shape (:class:`Problem`): a ``type`` URN and a stable
``code``, the HTTP ``status`` and its ``title``, a ``detail`` that says what to do, the
``instance`` (the request path) and the ``request_id`` that the access log holds too.
Validation errors list where and what (``loc``, ``msg``), never the offending input, which may
be memory text. An unexpected exception is logged with its type and route only.
"""

from __future__ import annotations

import http
import logging
from typing import Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.errors import (
    ConfigError,
    IndexError_,
    MemdirError,
    OutcomeUnknownError,
    SessionLogError,
    ToolInputError,
    WorkspaceError,
)
from memdir.messages import MessageFormatError
from memdir.store._safeopen import PathMissing, PathRefused
from memdir.store.archive import ArchiveError

__all__ = [
    "PROBLEM_JSON",
    "InsufficientScope",
    "InvalidInput",
    "NamespaceNotFound",
    "NotFound",
    "PreconditionFailed",
    "PreconditionRequired",
    "Problem",
    "ProblemError",
    "Unauthorized",
    "install_problem_handlers",
    "problem_response",
]

PROBLEM_JSON: Final = "application/problem+json"
_TYPE: Final = "urn:memdir:problem:"
logger = logging.getLogger("memdir.server")


class ProblemField(BaseModel):
    """One invalid part of a request: where it is and what is wrong (never its value)."""

    loc: list[str | int] = Field(description="Where: ('query', 'limit'), ('body', 'text').")
    msg: str = Field(description="What is wrong with it.")


class Problem(BaseModel):
    """An error answer (RFC 9457), with memdir's ``code`` and ``request_id``."""

    type: str = Field(description="urn:memdir:problem:<code>")
    title: str = Field(description="The HTTP status phrase.")
    status: int
    detail: str = Field(description="What went wrong and what to do, in one line.")
    instance: str = Field(description="The request path.")
    code: str = Field(description="A stable identifier of the problem (namespace-not-found).")
    request_id: str = Field(description="The request's id, as in the access log.")
    errors: list[ProblemField] | None = Field(
        default=None, description="The invalid parts of the request (validation errors)."
    )
    limit: int | None = Field(default=None, description="The limit passed (a quota).")
    used: int | None = Field(default=None, description="How much of it is used.")


class ProblemError(StarletteHTTPException):
    """An error answered as a problem (an HTTP exception, so that one raised while a body is
    read keeps its status).

    Args:
        status: the HTTP status.
        code: the stable problem code.
        detail: one line saying what to do.
        headers: more response headers (``WWW-Authenticate``, ``Retry-After``).
        limit: the limit the request would pass (a quota), for the problem's ``limit``.
        used: how much of the limit is used, for the problem's ``used``.
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        limit: int | None = None,
        used: int | None = None,
    ) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers or {})
        self.status = status
        self.code = code
        self.detail: str = detail
        self.limit = limit
        self.used = used


class Unauthorized(ProblemError):
    """401: no key, or one that is not valid (RFC 6750 ``WWW-Authenticate``)."""

    def __init__(self, detail: str, *, missing: bool) -> None:
        challenge = 'Bearer realm="memdir"'
        if not missing:
            challenge += ', error="invalid_token"'
        super().__init__(401, "invalid-key", detail, headers={"WWW-Authenticate": challenge})


class InsufficientScope(ProblemError):
    """403: the key's scope does not include what the route needs."""

    def __init__(self, needed: str, has: str) -> None:
        super().__init__(
            403,
            "insufficient-scope",
            f"this needs a key of scope {needed}; this key's scope is {has}",
            headers={"WWW-Authenticate": 'Bearer realm="memdir", error="insufficient_scope"'},
        )


class NamespaceNotFound(ProblemError):
    """404: no such namespace, or one the key does not reach (the same answer for both)."""

    def __init__(self, ns: str) -> None:
        super().__init__(
            404,
            "namespace-not-found",
            f"no namespace {ns!r}: GET /v1/namespaces lists the ones this key reaches",
        )


class NotFound(ProblemError):
    """404: the thing named in the request does not exist."""

    def __init__(self, detail: str) -> None:
        super().__init__(404, "not-found", detail)


class InvalidInput(ProblemError):
    """422: a request that can never succeed as it is."""

    def __init__(self, detail: str) -> None:
        super().__init__(422, "invalid-input", detail)


class PreconditionFailed(ProblemError):
    """412: the resource is not at the version the request was based on; ``etag`` is its
    current one (``None``: it does not exist)."""

    def __init__(self, detail: str, *, etag: str | None) -> None:
        headers = {"ETag": etag} if etag is not None else None
        super().__init__(412, "version-conflict", detail, headers=headers)


class PreconditionRequired(ProblemError):
    """428 (RFC 6585): a replace that names no version it is based on."""

    def __init__(self, detail: str) -> None:
        super().__init__(428, "precondition-required", detail)


def problem_response(
    request: Request,
    status: int,
    code: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    errors: list[ProblemField] | None = None,
    limit: int | None = None,
    used: int | None = None,
) -> JSONResponse:
    """The problem answer for ``request``."""
    problem = Problem(
        type=_TYPE + code,
        title=_title(status),
        status=status,
        detail=detail,
        instance=request.url.path,
        code=code,
        request_id=str(getattr(request.state, "request_id", "")),
        errors=errors,
        limit=limit,
        used=used,
    )
    return JSONResponse(
        problem.model_dump(exclude_none=True),
        status_code=status,
        headers=headers,
        media_type=PROBLEM_JSON,
    )


def _title(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


# The memdir errors a handler may raise, most specific first: (class, status, code, detail).
# ``None`` as detail: the error's own message (it says what the caller did wrong); else a
# fixed text (the message may name the store's host or quote a file).
_MEMDIR_ERRORS: Final[tuple[tuple[type[MemdirError], int, str, str | None], ...]] = (
    (PathMissing, 404, "not-found", None),
    (PathRefused, 403, "path-refused", None),
    (
        OutcomeUnknownError,
        503,
        "outcome-unknown",
        "the store went away before confirming the write: it may have been made; check "
        "before sending it again",
    ),
    (ToolInputError, 422, "invalid-input", None),
    (MessageFormatError, 422, "invalid-input", None),
    (ConfigError, 422, "invalid-input", None),
    (SessionLogError, 422, "invalid-input", None),
    (ArchiveError, 422, "invalid-archive", None),
    (WorkspaceError, 503, "store-unavailable", "the store cannot be reached; try again soon"),
    (IndexError_, 503, "index-unavailable", "the search index cannot be used; try again soon"),
)


async def _on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return problem_response(
        request,
        exc.status,
        exc.code,
        exc.detail,
        headers=dict(exc.headers or {}),
        limit=exc.limit,
        used=exc.used,
    )


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8 JSON)
        errors = [ProblemField(loc=["body"], msg="not JSON in UTF-8")]
        detail = "body: not JSON in UTF-8"
        return problem_response(request, 422, "invalid-request", detail, errors=errors)
    known = {
        404: ("not-found", "no such route: GET /openapi.json lists the routes"),
        405: ("method-not-allowed", "this route does not take this method"),
        413: ("payload-too-large", "the request body is larger than this route takes"),
    }
    code, detail = known.get(status, (_title(status).lower().replace(" ", "-"), str(exc.detail)))
    return problem_response(request, status, code, detail, headers=dict(exc.headers or {}))


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        ProblemField(
            loc=[str(p) if not isinstance(p, int) else p for p in e.get("loc", ())],
            msg=str(e.get("msg", "invalid")),
        )
        for e in exc.errors()
    ]
    first = errors[0] if errors else None
    where = ".".join(str(p) for p in first.loc) if first else "the request"
    detail = f"{where}: {first.msg}" if first else "the request is not valid"
    return problem_response(request, 422, "invalid-request", detail, errors=errors)


async def _on_memdir(request: Request, exc: Exception) -> JSONResponse:
    for kind, status, code, fixed in _MEMDIR_ERRORS:
        if isinstance(exc, kind):
            if status >= 500:
                logger.warning(
                    "%s %s: %s: %s", request.method, _route(request), type(exc).__name__, exc
                )
            headers = {"Retry-After": "5"} if status == 503 else None
            detail = fixed if fixed is not None else _one_line(str(exc))
            return problem_response(request, status, code, detail, headers=headers)
    return _internal(request, exc)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:1000] or "the request cannot be served"


def _route(request: Request) -> str:
    route = request.scope.get("route")
    return str(getattr(route, "path", "unmatched"))


def _internal(request: Request, exc: BaseException) -> JSONResponse:
    # The type and the route only: the message may quote memory text.
    logger.error("%s %s failed: %s", request.method, _route(request), type(exc).__name__)
    request_id = str(getattr(request.state, "request_id", ""))
    return problem_response(
        request,
        500,
        "internal",
        f"the server failed (request id {request_id}); its log has the details",
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as a problem (and catch what no handler knows)."""
    app.add_exception_handler(ProblemError, _on_problem)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(MemdirError, _on_memdir)
    app.add_middleware(InternalErrorMiddleware)


class InternalErrorMiddleware:
    """Turns an unexpected exception into a 500 problem before it reaches the ASGI server,
    whose log line would carry the exception's message."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:  # too late for an answer: the connection is cut
                _log_late(scope, exc)
                return
            response = _internal(Request(scope, receive), exc)
            await response(scope, receive, send)


def _log_late(scope: Scope, exc: BaseException) -> None:
    route = getattr(scope.get("route"), "path", "unmatched")
    logger.error("%s %s failed mid-answer: %s", scope.get("method"), route, type(exc).__name__)
