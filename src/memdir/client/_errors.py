"""The errors of :mod:`memdir.client`: a server's problem (RFC 9457) as a memdir exception.

::

    MemdirError
    └── RemoteError              any other answer that is not a success (status, code, detail)
        ├── AuthError            401 (no valid key) or 403 (the key's scope is too narrow)
        ├── NotFound             404: a file, ledger, session or route that does not exist
        │   └── NamespaceNotFound   404: no such namespace, or not one this key reaches
        ├── VersionConflict      412: the file changed since the version given (also a
        │                        memdir.errors.VersionConflict: ``current`` is the new version)
        ├── RateLimited          429: too many requests (``retry_after`` seconds)
        ├── QuotaExceeded        507: the tenant's storage quota is used up
        └── ConnectionFailed     no answer at all (the server cannot be reached)

Each message is one line: the server's ``detail``, then the status, code and request id. The
API key is never part of one.
"""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from memdir import errors as _library
from memdir._net import REFUSED_HEADER
from memdir.errors import MemdirError

__all__ = [
    "AuthError",
    "ConnectionFailed",
    "NamespaceNotFound",
    "NotFound",
    "QuotaExceeded",
    "RateLimited",
    "RemoteError",
    "VersionConflict",
    "error_from_response",
    "retry_after_seconds",
]

_DETAIL_CHARS: Final = 1_000


class RemoteError(MemdirError):
    """The memdir server answered with an error (or, for :class:`ConnectionFailed`, not at all).

    Attributes:
        status: the HTTP status (``None``: no answer).
        code: the problem's stable code (``namespace-not-found``), ``""`` when the answer was
            not a problem document (a proxy's error page).
        detail: the server's one-line explanation, saying what to do.
        request_id: the request's id in the server's access log (``""``: unknown).
        refused: for a path the store refused (403 ``path-refused``), why: ``outside``,
            ``area``, ``loop``, ``directory`` or ``special`` (``""``: not said).
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str = "",
        request_id: str = "",
        refused: str = "",
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.request_id = request_id
        self.refused = refused
        where = [part for part in (f"HTTP {status}" if status else "", code) if part]
        if request_id:
            where.append(f"request id {request_id}")
        # Not super(): VersionConflict's next base wants arguments of its own.
        MemdirError.__init__(self, f"{detail} ({', '.join(where)})" if where else detail)


class AuthError(RemoteError):
    """401: the key is missing, unknown, revoked or expired; 403: its scope is too narrow."""


class NotFound(RemoteError):
    """404: what the request names does not exist."""


class NamespaceNotFound(NotFound):
    """404: no such namespace, or one the key does not reach (the server answers both alike)."""


class VersionConflict(RemoteError, _library.VersionConflict):
    """412: the file changed since the version the write was based on; nothing was written.

    Read it again (its new version is ``current`` when the server said), merge, and write
    again with that version.
    """

    def __init__(self, detail: str, *, current: str | None = None, **common: Any) -> None:
        RemoteError.__init__(self, detail, **common)
        self.current = current


class RateLimited(RemoteError):
    """429: the tenant sent more requests than the server takes; try again after
    ``retry_after`` seconds (``None``: the server did not say)."""

    def __init__(self, detail: str, *, retry_after: float | None = None, **common: Any) -> None:
        super().__init__(detail, **common)
        self.retry_after = retry_after


class QuotaExceeded(RemoteError):
    """507: the write would take the tenant over its storage quota (``limit`` and ``used`` in
    bytes or namespaces, when the server said)."""

    def __init__(
        self, detail: str, *, limit: int | None = None, used: int | None = None, **common: Any
    ) -> None:
        super().__init__(detail, **common)
        self.limit = limit
        self.used = used


class ConnectionFailed(RemoteError):
    """The server could not be reached, or its answer was lost, on every attempt."""


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The answer's ``Retry-After`` in seconds (delay or HTTP date), ``None`` if absent or
    unreadable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _problem(response: httpx.Response) -> dict[str, Any]:
    kind = response.headers.get("content-type", "")
    if "json" not in kind:
        return {}
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _text(value: object) -> str:
    return " ".join(str(value).split())[:_DETAIL_CHARS] if value is not None else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_from_response(response: httpx.Response) -> RemoteError:
    """The exception for an error answer (4xx or 5xx), from its problem document."""
    problem = _problem(response)
    status = response.status_code
    code = _text(problem.get("code"))
    detail = _text(problem.get("detail")) or (
        f"the server answered {status} {response.reason_phrase}".rstrip()
    )
    common: dict[str, Any] = {
        "status": status,
        "code": code,
        "request_id": _text(problem.get("request_id")) or response.headers.get("x-request-id", ""),
        "refused": _text(response.headers.get(REFUSED_HEADER, ""))[:20],
    }
    if status == 401 or (status == 403 and code != "path-refused"):
        return AuthError(detail, **common)
    if status == 404:
        kind = NamespaceNotFound if code == "namespace-not-found" else NotFound
        return kind(detail, **common)
    if status == 412:
        etag = response.headers.get("etag")
        current = etag.removeprefix("W/").strip('"') if etag else None
        return VersionConflict(detail, current=current, **common)
    if status == 429:
        return RateLimited(detail, retry_after=retry_after_seconds(response), **common)
    if status == 507:
        limit, used = _int(problem.get("limit")), _int(problem.get("used"))
        return QuotaExceeded(detail, limit=limit, used=used, **common)
    return RemoteError(detail, **common)
