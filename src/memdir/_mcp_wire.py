"""What reaches the MCP SDK from the wire is valid Unicode, so every request gets its answer.

JSON may spell a lone UTF-16 surrogate as an escape (``"\\ud800"``): a client that cuts an
emoji in half sends one. The SDK parses messages with pydantic's JSON parser, which refuses
such a message as a whole; on stdio it then drops the message with no answer (the client waits
on that id for ever), over HTTP it answers a parse error without the request's id. Python's
:mod:`json` does read it, so a message holding such an escape is read with it here, each lone
surrogate made U+FFFD (as memdir does with a model's JSON answers,
:func:`memdir.memory._answer.valid_unicode`) and written again before the SDK sees it. Other
messages pass untouched, and a message that is not JSON at all is left to the SDK's own error.

:func:`run_stdio` and :func:`run_http` serve an SDK server (v1 ``FastMCP`` or v2
``MCPServer``) that way.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections import deque
from collections.abc import MutableMapping
from typing import Any

import anyio

from memdir.memory._answer import valid_unicode

__all__ = ["ValidUnicodeBodies", "run_http", "run_stdio", "valid_json_text"]

# A JSON escape of a UTF-16 surrogate, lone or half of a pair; what follows decides which.
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# The SDK's own limit on an HTTP request body (mcp.server.transport_security); a bigger body
# is passed on as it came, for the SDK to refuse, rather than held here.
MAX_BODY_BYTES = 4 * 1024 * 1024


def _valid(value: Any) -> Any:
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {valid_unicode(k): _valid(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid(v) for v in value]
    return value


def valid_json_text(text: str) -> str:
    """``text`` with each lone surrogate escaped in its JSON strings made U+FFFD.

    Text without a surrogate escape, or that is not JSON, is returned as it is.
    """
    if _ESCAPE.search(text) is None:
        return text
    try:
        return json.dumps(_valid(json.loads(text)), ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
        return text


class _ValidLines(io.TextIOWrapper):
    """The process's stdin as UTF-8 lines, each a message made valid by :func:`valid_json_text`.

    Closing it leaves stdin open (it is not this object's to close).
    """

    # The same signature as TextIOWrapper's (typeshed ignores the clash with _IOBase there too).
    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        return valid_json_text(super().readline(size))

    def close(self) -> None:
        try:
            self.detach()
        except ValueError:  # already detached
            pass


def _lowlevel(server: Any) -> Any:
    # Both SDK majors keep the protocol-level server in a private attribute.
    return getattr(server, "_lowlevel_server", None) or getattr(server, "_mcp_server", None)


def run_stdio(server: Any) -> None:
    """Serve ``server`` on stdin and stdout until the client closes stdin."""
    lowlevel = _lowlevel(server)
    if lowlevel is None:  # an SDK that moved it: served as the SDK does, without the repair
        server.run("stdio")
        return
    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        # The SDK reads and writes UTF-8 (undecodable bytes replaced), and claims stdout so
        # that nothing else writes to the protocol; stdin is read through _ValidLines.
        lines = _ValidLines(sys.stdin.buffer, encoding="utf-8", errors="replace")
        async with stdio_server(stdin=anyio.wrap_file(lines)) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(serve)


def run_http(server: Any, *, host: str, port: int, major: int, log_level: str) -> None:
    """Serve ``server`` as streamable HTTP at ``http://host:port/mcp`` until stopped."""
    import uvicorn

    if major >= 2:
        app = server.streamable_http_app(host=host)
    else:  # v1 reads host and port from its settings object
        server.settings.host = host
        server.settings.port = port
        app = server.streamable_http_app()
    config = uvicorn.Config(
        ValidUnicodeBodies(app), host=host, port=port, log_level=log_level.lower()
    )
    anyio.run(uvicorn.Server(config).serve)


# As Starlette spells them, so that the middleware wraps its applications.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


class ValidUnicodeBodies:
    """ASGI middleware: a POSTed JSON body is made valid by :func:`valid_json_text`.

    Args:
        app: the SDK's streamable-HTTP application.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Read a POST body (up to :data:`MAX_BODY_BYTES`), repair it, and pass it on."""
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        held: deque[Message] = deque()
        size, complete = 0, False
        while size <= MAX_BODY_BYTES:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break  # the client went away: pass on what came
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                complete = True
                break
        if complete and size <= MAX_BODY_BYTES:
            body = b"".join(m.get("body", b"") for m in held)
            fixed = _valid_body(body)
            if fixed is not body:
                held = deque([{"type": "http.request", "body": fixed, "more_body": False}])
                scope = _with_length(scope, len(fixed))

        async def replay() -> Message:
            return held.popleft() if held else await receive()

        await self.app(scope, replay, send)


def _valid_body(body: bytes) -> bytes:
    if _ESCAPE_BYTES.search(body) is None:
        return body
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:  # not UTF-8: the SDK's parse error says so
        return body
    fixed = valid_json_text(text)
    return body if fixed is text else fixed.encode("utf-8")


def _with_length(scope: Scope, length: int) -> Scope:
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(length).encode("ascii")))
    return {**scope, "headers": headers}
