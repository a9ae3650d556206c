"""The past-session tools: ``session_search``, ``session_list`` and ``session_history``.

Every message compaction offloads stays in ``sessions/<id>.log.jsonl``
(:mod:`memdir.sessions`); these tools let the model find it again. Search ranks messages
with the memory search's analysis and ranking (:mod:`memdir.sessions._search`); a hit is
cited as ``sessions/<id>.log.jsonl#L<n>``, the message's line in the log, and
``session_history`` reads it (given the session id, or the citation with a line range as
``memory_get`` takes one). Secrets were masked before the messages reached the log;
output is capped like ``memory_get``'s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, Protocol

from memdir.errors import ToolInputError
from memdir.messages._render import RenderOptions, render_message
from memdir.sessions import (
    LogRecord,
    SessionHit,
    SessionInfo,
    SessionLog,
    list_session_infos,
    search_sessions,
    shared_session_index,
    validate_session_id,
)
from memdir.sessions._catalog import log_path
from memdir.store.workspace import Workspace
from memdir.tools._core import (
    MAX_QUERY_CHARS,
    Citation,
    check_int,
    check_text,
    parse_citation,
    update_marks,
)
from memdir.tools._guard import WorkspaceArg, clip, lines_within, one_line, tool, workspace_of

__all__ = [
    "SESSION_TOOL_FUNCTIONS",
    "SESSION_TOOL_SCHEMAS",
    "ListedSession",
    "format_session_hits",
    "format_session_list",
    "history_arguments",
    "is_session_path",
    "read_session_lines",
    "render_session_lines",
    "session_history",
    "session_hit_line",
    "session_list",
    "session_search",
    "session_search_arguments",
]

MAX_HITS: Final = 50
"""``session_search`` returns at most this many hits."""
SEARCH_CHAR_CAP: Final = 6_000
"""Characters of ``session_search`` and ``session_list`` output."""
HIT_CHARS: Final = 300
"""Characters of one hit's excerpt."""
HISTORY_MAX: Final = 200
"""Messages one ``session_history`` call shows at most."""
HISTORY_CHAR_CAP: Final = 12_000
"""Characters of ``session_history`` output."""
LIST_MAX: Final = 50
"""Sessions ``session_list`` shows (the most recently active)."""
_RENDER = RenderOptions(
    text=2_000, thinking=0, arg_string=200, call=600, result=1_000, error=1_500, timestamps=True
)
_LOG_PATH = re.compile(r"sessions/(?P<id>[^/]+)\.log\.jsonl")
_MAX_SESSION_CHARS = 200
_DEFAULT_LAST_N: Final = 20


def _session_id(value: object) -> str:
    text = check_text(
        "session_id", value, max_chars=_MAX_SESSION_CHARS, hint="session_list shows them"
    )
    return validate_session_id(text.strip())


def session_ref(value: object) -> tuple[str, Citation | None]:
    """A session id, or a citation of its log (``sessions/<id>.log.jsonl#L3-L5``)."""
    text = check_text(
        "session_id", value, max_chars=_MAX_SESSION_CHARS, hint="session_list shows them"
    )
    cited = parse_citation(text)
    found = is_session_path(cited.path)
    if found is not None:
        return found, cited
    return validate_session_id(text.strip()), None


def _stamp(hit: SessionHit) -> str:
    return hit.at.strftime("%Y-%m-%d %H:%M") if hit.at is not None else ""


def session_hit_line(hit: SessionHit, query: str) -> str:
    """One hit as ``sessions/<id>.log.jsonl#L<n> [role tool · time]: excerpt``; a message a
    newer hit updates says ``[superseded by …#L…]``, the newer one ``[updates …#L…]``."""
    from memdir.sessions._search import snippet

    who = " ".join([hit.role, *hit.tools]).strip()
    label = " · ".join(part for part in (who, _stamp(hit)) if part)
    marks = update_marks(hit.superseded_by, hit.supersedes)
    return f"{hit.citation} [{label}]{marks}: {snippet(hit.text, query, HIT_CHARS)}"


def format_session_hits(
    query: str, hits: Sequence[SessionHit], *, char_cap: int = SEARCH_CHAR_CAP
) -> str:
    """Render session hits as citable lines, best first, within ``char_cap`` characters."""
    shown = clip(one_line(query), 80)
    if not hits:
        return (
            f'No past-session messages matched "{shown}". Try fewer or different keywords, or '
            "the words in another language the conversation used."
        )
    noun = "result" if len(hits) == 1 else "results"
    header = (
        f'{len(hits)} {noun} for "{shown}" in past sessions (best first; read a hit and the '
        "messages around it with session_history, passing its citation or its session and "
        "start=N):"
    )
    return lines_within(
        header,
        [session_hit_line(hit, query) for hit in hits],
        char_cap,
        "use a narrower query or session_id",
        ("result", "results"),
    )


def find_in_sessions(
    ws: Workspace, query: str, limit: int, session_id: str | None = None
) -> list[SessionHit]:
    """Refresh the workspace's session index and search it (on a ``memdir serve`` server,
    the server searches its own)."""
    if ws.remote is not None:
        return ws.remote.search_sessions(query, limit, session_id)
    index = shared_session_index(ws)
    with index.lock:
        index.refresh()
        return search_sessions(index, query, limit=limit, session_id=session_id)


def session_infos(ws: Workspace) -> list[SessionInfo]:
    """The logged sessions of ``ws``, the most recently active first (the session index
    refreshed first; on a ``memdir serve`` server, the server's)."""
    if ws.remote is not None:
        names = [field.name for field in dataclasses.fields(SessionInfo)]
        return [SessionInfo(**{n: getattr(s, n) for n in names}) for s in ws.remote.sessions()]
    index = shared_session_index(ws)
    with index.lock:
        index.refresh()
        return list_session_infos(index)


@tool
def session_search(
    query: str,
    max_results: int = 10,
    session_id: str | None = None,
    *,
    workspace: WorkspaceArg = None,
    namespace: str | None = None,
) -> str:
    """Search the messages of past conversations (the raw logs kept after compaction).

    Use it when memory_search finds nothing about something that was said, shown or done
    in an earlier conversation or earlier in this one: a number, a command, an error, a
    name. Give a few keywords (English, Chinese or mixed). Each hit is one line,
    ``sessions/<id>.log.jsonl#L<n> [role tool · time]: excerpt``, best first; read the
    message and those around it with session_history (pass the citation, or the session
    id and a start line a few lines before it).

    Args:
        query: keywords to look for, e.g. "staging database password rotated" or "部署".
        max_results: how many hits to return, 1 to 50 (default 10).
        session_id: search only this session (an id from session_list).
        workspace: the workspace (or its path) to search (default: the configured one); not
            for the model.
        namespace: the caller's namespace in that workspace (default: the workspace's own);
            not for the model.

    Returns:
        The hits as text, or a "no results" note, or ``Error: ...``.
    """
    ws = workspace_of(workspace, namespace)
    text, limit, only = session_search_arguments(query, max_results, session_id)
    return format_session_hits(text, find_in_sessions(ws, text, limit, only))


def session_search_arguments(
    query: object, max_results: object, session_id: object
) -> tuple[str, int, str | None]:
    """``session_search``'s arguments checked: the query, the number of hits (at most
    :data:`MAX_HITS`) and the session to search only in (``None``: all).

    Raises:
        ToolInputError: an argument the tool cannot use.
    """
    text = check_text("query", query, max_chars=MAX_QUERY_CHARS, hint="give a few keywords")
    limit = min(check_int("max_results", max_results, minimum=1), MAX_HITS)
    only = None if session_id is None else _session_id(session_id)
    return text, limit, only


@tool
def session_list(*, workspace: WorkspaceArg = None, namespace: str | None = None) -> str:
    """List past conversations: id, first and last message time, message count, first request.

    The most recently active come first (at most 50). Pass an id to session_history to
    read a conversation, or to session_search to search only in it.

    Args:
        workspace: the workspace (or its path) to read (default: the configured one); not
            for the model.
        namespace: the caller's namespace in that workspace (default: the workspace's own);
            not for the model.

    Returns:
        One line per session, or a note that there are none, or ``Error: ...``.
    """
    return format_session_list(session_infos(workspace_of(workspace, namespace)))


class ListedSession(Protocol):
    """What :func:`format_session_list` shows of a session (as
    :class:`~memdir.sessions.SessionInfo` has it)."""

    @property
    def session_id(self) -> str:
        """The session id."""

    @property
    def first_at(self) -> datetime | None:
        """When its first message was written."""

    @property
    def last_at(self) -> datetime | None:
        """When its last message was written."""

    @property
    def messages(self) -> int:
        """How many messages it holds."""

    @property
    def summary(self) -> str:
        """Its first user message, shortened."""


def format_session_list(infos: Sequence[ListedSession]) -> str:
    """``session_list``'s text for the sessions ``infos``, the most recently active first."""
    if not infos:
        return (
            "No past sessions are logged yet (messages are logged when compaction offloads them)."
        )
    lines = []
    for info in infos[:LIST_MAX]:
        first = info.first_at.strftime("%Y-%m-%d %H:%M") if info.first_at else "?"
        last = info.last_at.strftime("%Y-%m-%d %H:%M") if info.last_at else "?"
        noun = "message" if info.messages == 1 else "messages"
        about = f": {clip(info.summary, 120)}" if info.summary else ""
        lines.append(f"{info.session_id} ({first} to {last} UTC, {info.messages} {noun}){about}")
    more = len(infos) - LIST_MAX
    noun = "session" if len(infos) == 1 else "sessions"
    header = f"{len(infos)} {noun} (most recently active first):"
    out = lines_within(
        header, lines, SEARCH_CHAR_CAP, "session_search finds the others", ("session", "sessions")
    )
    if more > 0:
        out += f"\n... {more} older sessions not shown; session_search finds their messages"
    return out


def read_session_lines(
    ws: Workspace, session_id: str, *, start: int | None, count: int, from_end: bool = False
) -> str:
    """Messages of one log as ``N|[role @ time] text`` entries, ``N`` the log line.

    ``start``: the first log line (``None``: the last ``count`` messages when ``from_end``,
    else the first). At most ``count`` messages and :data:`HISTORY_CHAR_CAP` characters; a
    last line says how to go on.
    """
    return render_session_lines(
        SessionLog(ws, session_id).read().records,
        session_id,
        start=start,
        count=count,
        from_end=from_end,
    )


def render_session_lines(
    records: Sequence[LogRecord],
    session_id: str,
    *,
    start: int | None,
    count: int,
    from_end: bool = False,
) -> str:
    """The text of :func:`read_session_lines` for the log records ``records`` (all of them, in
    file order) of ``session_id``.

    Raises:
        ToolInputError: no records, or ``start`` is past the last one.
    """
    rel_path = log_path(session_id)
    if not records:
        raise ToolInputError(
            f"no messages are logged for session {session_id!r}; session_list shows the sessions"
        )
    if start is not None:
        chosen = [r for r in records if r.line >= start][:count]
        if not chosen:
            last = records[-1].line
            raise ToolInputError(
                f"start {start} is past the last message of {rel_path} (line {last})"
            )
    else:
        chosen = list(records[-count:] if from_end else records[:count])
    body: list[str] = []
    used = 0
    for record in chosen:
        entry = f"{record.line}|{render_message(record.msg, _RENDER)}"
        entry = entry.replace("\n", "\n  ")
        if body and used + len(entry) + 1 > HISTORY_CHAR_CAP:
            break
        body.append(entry)
        used += len(entry) + 1
    first, last = chosen[0].line, chosen[len(body) - 1].line
    total = len(records)
    header = (
        f"{rel_path} (messages on lines {first}-{last}; {total} messages logged; "
        "N| is the line in the log):"
    )
    out = [header, *body]
    after = [r for r in records if r.line > last]
    if after:
        noun = "message" if len(after) == 1 else "messages"
        out.append(
            f"... {len(after)} later {noun}; call session_history(session_id="
            f'"{session_id}", start={after[0].line})'
        )
    return "\n".join(out)


def is_session_path(path: str) -> str | None:
    """The session id when ``path`` names a session log (``sessions/<id>.log.jsonl``)."""
    match = _LOG_PATH.fullmatch(path.strip().removeprefix("./"))
    if match is None:
        return None
    return validate_session_id(match["id"])


@tool
def session_history(
    session_id: str,
    last_n: int = _DEFAULT_LAST_N,
    start: int | None = None,
    *,
    workspace: WorkspaceArg = None,
    namespace: str | None = None,
) -> str:
    """Read the messages of a past conversation, as logged, with their line numbers.

    By default the last 20 messages; with start, the messages from that log line on (e.g.
    a few lines before a session_search hit, to see the lead-up). A hit's citation such as
    "sessions/<id>.log.jsonl#L12" or "...#L10-L14" as session_id reads exactly those lines.
    Each entry is ``N|[role @ time] text``; tool calls and results are shortened.

    Args:
        session_id: the session: an id from session_list, or a session_search citation
            (optionally with a line range ``#L10-L14``).
        last_n: how many messages to show, 1 to 200 (default 20).
        start: the first log line to show (default: show the last messages).
        workspace: the workspace (or its path) to read (default: the configured one); not
            for the model.
        namespace: the caller's namespace in that workspace (default: the workspace's own);
            not for the model.

    Returns:
        A header and the messages, or ``Error: ...``.
    """
    ws = workspace_of(workspace, namespace)
    sid, first, count = history_arguments(session_id, last_n, start)
    return read_session_lines(ws, sid, start=first, count=count, from_end=True)


def history_arguments(
    session_id: object, last_n: object, start: object
) -> tuple[str, int | None, int]:
    """``session_history``'s arguments checked and resolved: the session id, the first log
    line to show (``None``: the last messages) and how many messages.

    Raises:
        ToolInputError: an argument the tool cannot use.
    """
    sid, cited = session_ref(session_id)
    count = min(check_int("last_n", last_n, minimum=1), HISTORY_MAX)
    first = None if start is None else check_int("start", start, minimum=1)
    if cited is not None and cited.start is not None and cited.end is not None:
        # The citation's range, unless the call gives its own start or count.
        first = cited.start if first is None else first
        if last_n == _DEFAULT_LAST_N:
            count = min(cited.end - cited.start + 1, HISTORY_MAX)
    return sid, first, count


_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "A session id from session_list or a session_search hit.",
}
SESSION_TOOL_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "session_search": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'Keywords to look for, e.g. "staging password rotated" or "部署".',
            },
            "max_results": {
                "type": "integer",
                "description": "How many hits to return, 1 to 50.",
                "default": 10,
                "minimum": 1,
                "maximum": MAX_HITS,
            },
            "session_id": {**_ID_SCHEMA, "description": "Search only this session (optional)."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "session_list": {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    },
    "session_history": {
        "type": "object",
        "properties": {
            "session_id": {
                "type": "string",
                "description": (
                    "A session id from session_list, or a session_search citation such as "
                    '"sessions/<id>.log.jsonl#L12" (a range "#L10-L14" reads those lines).'
                ),
            },
            "last_n": {
                "type": "integer",
                "description": "How many messages to show, 1 to 200.",
                "default": _DEFAULT_LAST_N,
                "minimum": 1,
                "maximum": HISTORY_MAX,
            },
            "start": {
                "type": "integer",
                "description": "First log line to show (default: the last messages).",
                "minimum": 1,
            },
        },
        "required": ["session_id"],
        "additionalProperties": False,
    },
}
"""JSON schema of each past-session tool's arguments."""

SESSION_TOOL_FUNCTIONS: Final[dict[str, Callable[..., str]]] = {
    "session_search": session_search,
    "session_list": session_list,
    "session_history": session_history,
}
"""The past-session tools by name."""
