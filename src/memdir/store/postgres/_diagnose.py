"""Why a connection to PostgreSQL could not be made, in one line.

libpq's messages run over several lines and name the cause in their own words ("connection to
server at "db", port 5432 failed: Connection refused\\n\\tIs the server running..."); a memdir
error names it plainly: ``connection refused at db:5432``, ``unknown host db``,
``authentication failed for user alice``. :func:`why_not` tries a connection and says why it
failed, retrying within the connect timeout only what may pass by itself (a server starting up
or shutting down, too many clients).
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

__all__ = ["explain", "why_not"]

_AT = re.compile(
    r'connection to server at "(?P<host>[^"]*)"(?: \([^)]*\))?, port (?P<port>\d+) failed: '
    r"(?P<why>[^\n]*)"
)
_SOCKET = re.compile(r'connection to server on socket "(?P<socket>[^"]*)" failed: (?P<why>[^\n]*)')
_QUOTED = re.compile(r'"([^"]*)"')
_RESOLVE = re.compile(r"failed to resolve host '(?P<host>[^']*)': (?P<why>[^\n]*)")
_PASSING: Final = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "too many clients",
    "remaining connection slots are reserved",
)
"""Refusals that pass by themselves: retried until the connect timeout runs out."""
_RETRY_SECONDS: Final = 0.25


def _place(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _quoted(text: str) -> str:
    found = _QUOTED.search(text)
    return found.group(1) if found else "?"


def _server_says(why: str, where: str) -> str:
    """The cause from what the server answered (``FATAL:  ...``)."""
    text = why.removeprefix("FATAL:").strip()
    low = text.lower()
    if "password authentication failed" in low:
        return f"authentication failed for user {_quoted(text)}"
    if low.startswith("role ") and low.endswith("does not exist"):
        return f"authentication failed for user {_quoted(text)}: no such role at {where}"
    if "no pg_hba.conf entry" in low:
        user = re.search(r'user "([^"]*)"', text)
        name = user.group(1) if user else "?"
        return f"authentication failed for user {name}: the server's pg_hba.conf refuses it"
    if low.startswith("database ") and low.endswith("does not exist"):
        return f"database {_quoted(text)} does not exist at {where}"
    if "no password supplied" in low:
        return f"authentication failed at {where}: the server asks for a password"
    if "connection refused" in low:
        return f"connection refused at {where}"
    if "timeout expired" in low:
        return f"no answer from {where} in time"
    return f"{where}: {text}"


def explain(exc: BaseException, timeout: float) -> tuple[str, bool]:
    """``(cause, passing)``: one line saying why ``exc`` stopped a connection, and whether it
    may pass by itself (worth another try).

    Args:
        exc: what ``psycopg.connect`` raised.
        timeout: the connect timeout in seconds (named when it ran out).
    """
    text = str(exc).strip()
    low = text.lower()
    passing = any(p in low for p in _PASSING)
    if type(exc).__name__ == "ConnectionTimeout" or low.startswith("connection timeout"):
        return f"no answer within {timeout:g} s (connect_timeout)", True
    if (found := _RESOLVE.search(text)) is not None:
        why = found.group("why")
        if "not known" in why or "no address" in why.lower():
            return f"unknown host {found.group('host')}", False
        return f"cannot resolve host {found.group('host')}: {why}", True
    if (found := _AT.search(text)) is not None:
        where = _place(found.group("host"), found.group("port"))
        return _server_says(found.group("why"), where), passing
    if (found := _SOCKET.search(text)) is not None:
        where = f"socket {found.group('socket')}"
        if "no such file" in found.group("why").lower():
            return f"no server at {where} (is PostgreSQL running on this machine?)", False
        return _server_says(found.group("why"), where), passing
    if low.startswith("connection is bad:"):
        # libpq refused an option's value before connecting (sslmode=bogus, a port "x").
        return f"invalid URL: {text.split(':', 1)[1].strip().splitlines()[0]}", False
    lines = text.splitlines()
    return (lines[0] if lines else type(exc).__name__), passing


def why_not(psycopg: Any, conninfo: str, timeout: float) -> str | None:
    """``None`` when a connection can be made now (it is closed again), else why not.

    Args:
        psycopg: the ``psycopg`` module.
        conninfo: the libpq connection string.
        timeout: seconds to keep trying a refusal that may pass by itself.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(conninfo, autocommit=True).close()
            return None
        except psycopg.Error as exc:
            cause, passing = explain(exc, timeout)
        if not passing or time.monotonic() + _RETRY_SECONDS >= deadline:
            return cause
        time.sleep(_RETRY_SECONDS)
