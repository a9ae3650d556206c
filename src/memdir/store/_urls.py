"""Workspace URLs: telling a PostgreSQL workspace or one on a ``memdir serve`` server from a
directory, and showing one safely."""

from __future__ import annotations

import re

__all__ = ["is_postgres_url", "is_remote_url", "redact_url"]

# A password may also be given as a query parameter (libpq reads ``?password=...``).
_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def is_postgres_url(value: object) -> bool:
    """Whether ``value`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def is_remote_url(value: object) -> bool:
    """Whether ``value`` is the ``https://`` (or ``http://``) URL of a ``memdir serve`` server."""
    return isinstance(value, str) and value.lower().startswith(("https://", "http://"))


def redact_url(url: str) -> str:
    """``url`` without its password (in the user part or the query), for messages and logs.

    Works on malformed URLs too (an unclosed ``[``, a port that is not a number): they are
    shown in error messages.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    # Up to the last "@" before the query: a password may hold an unencoded "/" or "@"
    # (over-masking a strange database name is the safe mistake).
    end = min((i for i in (rest.find(c) for c in "?#") if i >= 0), default=len(rest))
    user_info, at, after = rest[:end].rpartition("@")
    if at and ":" in user_info:
        rest = f"{user_info.split(':', 1)[0]}:***@{after}{rest[end:]}"
    rest = _PASSWORD_PARAM.sub(r"\1***", rest)
    return f"{scheme}{sep}{rest}"
