"""The calls of the session routes: log messages, list sessions, read and search them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from memdir.client._decode import decode, json_list, json_object
from memdir.client._ops import body, namespace_path, pages
from memdir.client._types import SessionSummary
from memdir.client._wire import Call, Request
from memdir.messages import Msg
from memdir.sessions import LogRecord, LogSpan, SessionHit, validate_session_id

__all__ = [
    "MessageFormat",
    "append_messages",
    "messages_body",
    "search_sessions",
    "session_messages",
    "sessions",
]

MessageFormat: TypeAlias = Literal["memdir", "openai", "anthropic"]
"""How messages are written: ``memdir`` (``Msg`` objects or their ``to_dict()``), ``openai``
(chat completion messages) or ``anthropic`` (Messages API turns)."""


def messages_body(
    messages: Sequence[Msg | Mapping[str, Any]], fmt: MessageFormat, system: str | None
) -> dict[str, Any]:
    """The JSON of a list of messages as the session, flush and compact routes take it."""
    listed = [m.to_dict() if isinstance(m, Msg) else dict(m) for m in messages]
    found: dict[str, Any] = {"messages": listed, "format": fmt}
    if system is not None:
        found["system"] = system
    return found


def append_messages(
    ns: str,
    session_id: str,
    messages: Sequence[Msg | Mapping[str, Any]],
    *,
    format: MessageFormat = "memdir",
    system: str | None = None,
) -> Call[LogSpan | None]:
    """Log messages to a session (the server masks secrets first). A message whose id is
    logged already is skipped, so sending the same ``Msg`` objects again writes nothing.

    Args:
        session_id: the session (1-128 of ``A-Z a-z 0-9 . _ -``).
        messages: ``Msg`` objects or dicts in ``format`` (at most 2,000, 8 MiB).
        format: ``memdir``, ``openai`` or ``anthropic``.
        system: Anthropic's system prompt (``anthropic`` only).

    Returns:
        The log lines written, or ``None`` when every message was logged already.
    """
    path = namespace_path(ns, "sessions", validate_session_id(session_id), "messages")
    response = yield Request(method="POST", path=path, json=messages_body(messages, format, system))
    found = body(response)
    return None if found is None else decode(LogSpan, found)


def sessions(ns: str) -> Call[list[SessionSummary]]:
    """The logged sessions, the most recently active first (every page)."""
    return (yield from pages(namespace_path(ns, "sessions"), lambda i: decode(SessionSummary, i)))


def _record(session_id: str) -> Any:
    def record(item: object) -> LogRecord:
        found = json_object(item, "a logged message")
        return decode(LogRecord, {**found, "session": session_id})

    return record


def session_messages(ns: str, session_id: str) -> Call[list[LogRecord]]:
    """Every message of a session's log, in order, with its line (every page).

    Raises:
        NotFound: no session of that id is logged.
    """
    sid = validate_session_id(session_id)
    path = namespace_path(ns, "sessions", sid, "messages")
    return (yield from pages(path, _record(sid)))


def search_sessions(
    ns: str, query: str, limit: int = 10, session_id: str | None = None
) -> Call[list[SessionHit]]:
    """Logged messages matching ``query``, best first (``session_id``: in that session only).

    Args:
        query: a few keywords (at most 1,000 characters).
        limit: how many hits, 1 to 50.
        session_id: search only this session.
    """
    params = [("q", query), ("limit", str(limit))]
    if session_id is not None:
        params.append(("session_id", session_id))
    path = namespace_path(ns, "sessions", "search")
    response = yield Request(method="GET", path=path, params=tuple(params))
    return [decode(SessionHit, hit) for hit in json_list(body(response), "session hits")]
