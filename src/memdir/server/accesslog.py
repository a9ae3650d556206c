"""One JSON line per request on the logger ``memdir.server.access``, and its request id.

A line holds the method, the route's template (``/v1/namespaces/{ns}/search``, never the path
itself), the status, milliseconds, bytes in and out, the tenant and key id, and a hash of the
namespace (its name with ``--log-namespaces``). Never the query string (``q=`` is memory
text), a body, a header or a key. ``X-Request-Id`` is taken from the request when it is 8-64
characters of ``A-Z a-z 0-9 -``, else made; it is sent back and named in every problem.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AccessLogMiddleware"]

logger = logging.getLogger("memdir.server.access")
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9-]{8,64}")


class AccessLogMiddleware:
    """The outermost middleware: a request id for each request, and its access-log line.

    Args:
        app: the application.
        log_namespaces: log namespace names instead of their hash.
    """

    def __init__(self, app: ASGIApp, *, log_namespaces: bool = False) -> None:
        self.app = app
        self.log_namespaces = log_namespaces

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        counts = {"in": 0, "out": 0, "status": 500}

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                counts["in"] += len(message.get("body", b""))
            return message

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                counts["status"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode("ascii")))
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                counts["out"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            if logger.isEnabledFor(logging.INFO):
                logger.info(self._line(scope, request_id, counts, started))

    def _line(self, scope: Scope, request_id: str, counts: dict[str, int], started: float) -> str:
        route = scope.get("route")
        principal = scope.get("state", {}).get("principal")
        ns = scope.get("path_params", {}).get("ns") if route is not None else None
        entry: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": request_id,
            "method": scope.get("method"),
            "route": getattr(route, "path", "unmatched"),
            "status": counts["status"],
            "ms": round((time.perf_counter() - started) * 1000, 2),
            "bytes_in": counts["in"],
            "bytes_out": counts["out"],
            "tenant": getattr(principal, "tenant", None),
            "key_id": getattr(principal, "key_id", None),
        }
        if isinstance(ns, str):
            if self.log_namespaces:
                entry["ns"] = ns if ns.isprintable() and len(ns) <= 128 else None
            else:
                entry["ns_hash"] = hashlib.sha256(ns.encode("utf-8", "replace")).hexdigest()[:12]
        return json.dumps(entry, ensure_ascii=True)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None
