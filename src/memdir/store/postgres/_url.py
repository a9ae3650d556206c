"""A workspace URL read into memdir's own settings and libpq's connection string.

Everything that can be checked without the network is checked here, so a malformed URL is an
error at once, not after a connect timeout: the URL's syntax (by libpq's own parser), the ports,
and memdir's parameters (``schema``, ``pool_size``) and ``connect_timeout``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from memdir.errors import WorkspaceError
from memdir.store._urls import redact_url

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "Settings", "read_url"]

DEFAULT_CONNECT_TIMEOUT: Final = 10
"""Seconds to wait for a connection when the URL gives no ``connect_timeout``."""
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class Settings:
    """What a workspace URL says.

    Attributes:
        conninfo: the libpq connection string (memdir's own parameters removed).
        schema: the PostgreSQL schema of memdir's tables.
        pool_size: connections per process.
        connect_timeout: seconds a connection may take (libpq's rounding: 2 at least).
    """

    conninfo: str
    schema: str
    pool_size: int
    connect_timeout: float


def _malformed(shown: str, why: str) -> WorkspaceError:
    return WorkspaceError(f"malformed PostgreSQL URL {shown}: {why}")


def _timeout(value: str, shown: str) -> int:
    try:
        seconds = int(float(value))
    except ValueError:
        raise _malformed(shown, f"connect_timeout must be a number, not {value!r}") from None
    # libpq's rules: at least 2 s; 0 or less is no limit, which psycopg makes 130 s.
    return 130 if seconds <= 0 else max(2, seconds)


def read_url(url: str, psycopg: Any) -> Settings:
    """The settings of ``url``.

    Args:
        url: ``postgresql://user:password@host:port/dbname?...``.
        psycopg: the ``psycopg`` module (its parser checks the syntax).

    Raises:
        WorkspaceError: the URL is malformed (one line; the password masked).
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _malformed(shown, str(exc)) from None
    # The query is split by hand: libpq reads "+" as itself and "%20" as a space, which
    # decoding and encoding it again as a form would not keep.
    params: dict[str, str] = {}
    secrets = [parts.password or ""]
    for piece in filter(None, parts.query.split("&")):
        name, _, value = piece.partition("=")
        params[unquote(name)] = value
        if unquote(name) == "password":
            secrets.append(value)
    schema = unquote(params.pop("schema", "memdir"))
    if not _SCHEMA.fullmatch(schema):
        raise _malformed(shown, f"invalid schema {schema!r}: use lowercase letters, digits and _")
    size = unquote(params.pop("pool_size", "4"))
    if not size.isdigit() or not 1 <= int(size) <= 64:
        raise _malformed(shown, f"pool_size must be a whole number from 1 to 64, not {size!r}")
    params.setdefault("connect_timeout", str(DEFAULT_CONNECT_TIMEOUT))
    timeout = _timeout(unquote(params["connect_timeout"]), shown)
    params.setdefault("application_name", "memdir")
    query = "&".join(f"{name}={value}" for name, value in params.items())
    # By hand too: urlunsplit drops the "//" of a URL without a host (postgresql:///db).
    conninfo = f"{url.partition('?')[0].partition('#')[0]}?{query}"
    try:
        options = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        lines = str(exc).strip().splitlines()
        why = lines[0] if lines else type(exc).__name__
        # libpq quotes what it could not parse, which may be the password.
        for secret in {s for raw in secrets for s in (raw, unquote(raw)) if s}:
            why = why.replace(secret, "***")
        raise _malformed(shown, why) from None
    for port in str(options.get("port", "")).split(","):
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise _malformed(shown, f"port {port!r} is not a number from 1 to 65535")
    return Settings(
        conninfo=conninfo, schema=schema, pool_size=int(size), connect_timeout=float(timeout)
    )
