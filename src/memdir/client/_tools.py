"""The memory tools of :mod:`memdir.tools` over HTTP: the same arguments, checked by the same
functions, and the same text, rendered from the server's JSON by the library's own formatting
functions. Like the tools, they never raise: every failure comes back as ``Error: ...`` text
(the server's one-line ``detail`` for an error it answered).
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.client._errors import NotFound, RemoteError
from memdir.client._ops import add, excerpt, search_all
from memdir.client._ops_sessions import search_sessions, session_messages, sessions
from memdir.client._wire import Call
from memdir.errors import MemdirError
from memdir.sessions import LogRecord
from memdir.tools import (
    format_added,
    format_excerpt,
    format_search,
    get_arguments,
    search_arguments,
)
from memdir.tools._core import MAX_ADD_CHARS, check_text
from memdir.tools._sessions import (
    format_session_hits,
    format_session_list,
    history_arguments,
    render_session_lines,
    session_search_arguments,
)

__all__ = [
    "memory_add",
    "memory_get",
    "memory_search",
    "session_history",
    "session_list",
    "session_search",
]


def _as_text(call: Call[str]) -> Call[str]:
    """``call``'s text, or its failure as the tools write one."""
    try:
        return (yield from call)
    except RemoteError as exc:
        return f"Error: {exc.detail}"
    except MemdirError as exc:
        return f"Error: {exc}"


def memory_search(
    ns: str, query: str, max_results: int = 10, *, sources: Sequence[str] = ("memory",)
) -> Call[str]:
    """What the ``memory_search`` tool returns, searching the namespace on the server.

    Args:
        query: keywords to look for.
        max_results: how many hits, 1 to 50 (default 10).
        sources: ``("memory",)``, ``("sessions",)`` or both (merged by score).
    """

    def run() -> Call[str]:
        text, limit, chosen = search_arguments(query, max_results, sources)
        hits, found = yield from search_all(ns, text, limit, chosen)
        return format_search(text, chosen, hits, found, limit)

    return (yield from _as_text(run()))


def memory_get(ns: str, path: str, start_line: int = 1, num_lines: int = 50) -> Call[str]:
    """What the ``memory_get`` tool returns: numbered lines of a memory file or citation.

    Args:
        path: a memory file path, optionally with a line range (``#L3-L5`` or ``:3-5``).
        start_line: the first line (default 1, or the range's start).
        num_lines: how many lines, 1 to 200 (default 50, or the range's length).
    """

    def run() -> Call[str]:
        rel, start, count = get_arguments(path, start_line, num_lines)
        return format_excerpt((yield from excerpt(ns, rel, start, count)))

    return (yield from _as_text(run()))


def memory_add(ns: str, text: str) -> Call[str]:
    """What the ``memory_add`` tool returns, saving ``text`` (one fact per line) on the server."""

    def run() -> Call[str]:
        fact = check_text("text", text, max_chars=MAX_ADD_CHARS, hint="give the fact to remember")
        return format_added((yield from add(ns, fact)))

    return (yield from _as_text(run()))


def session_search(
    ns: str, query: str, max_results: int = 10, session_id: str | None = None
) -> Call[str]:
    """What the ``session_search`` tool returns: past-session messages matching ``query``."""

    def run() -> Call[str]:
        text, limit, only = session_search_arguments(query, max_results, session_id)
        return format_session_hits(text, (yield from search_sessions(ns, text, limit, only)))

    return (yield from _as_text(run()))


def session_list(ns: str) -> Call[str]:
    """What the ``session_list`` tool returns: the past sessions, most recently active first."""

    def run() -> Call[str]:
        return format_session_list((yield from sessions(ns)))

    return (yield from _as_text(run()))


def session_history(
    ns: str, session_id: str, last_n: int = 20, start: int | None = None
) -> Call[str]:
    """What the ``session_history`` tool returns: a past session's messages with their lines.

    Args:
        session_id: a session id, or a ``session_search`` citation (with a range).
        last_n: how many messages, 1 to 200 (default 20).
        start: the first log line to show (default: the last messages).
    """

    def run() -> Call[str]:
        sid, first, count = history_arguments(session_id, last_n, start)
        records: list[LogRecord]
        try:
            records = yield from session_messages(ns, sid)
        except NotFound as exc:
            if exc.code != "not-found":
                raise
            records = []  # no log: the library's own "no messages are logged" text
        return render_session_lines(records, sid, start=first, count=count, from_end=True)

    return (yield from _as_text(run()))
