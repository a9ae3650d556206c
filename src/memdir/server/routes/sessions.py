"""The past sessions of a namespace: append messages to a session's log, list the sessions,
read a session's messages, and search them (what ``session_*`` tools and ``memdir sessions``
do)."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import Query, Response

from memdir.redact import Redactor
from memdir.server.auth import Scope
from memdir.server.pagination import Cursor, Limit, page_of
from memdir.server.policy import BoundNamespace, MemdirRouter, Policy
from memdir.server.problems import NotFound
from memdir.server.schemas.meta import Page
from memdir.server.schemas.sessions import (
    Appended,
    LoggedMessage,
    MessagesIn,
    SessionHitOut,
    SessionInfoOut,
    to_msgs,
)
from memdir.sessions import (
    SessionInfo,
    SessionLog,
    list_session_infos,
    shared_session_index,
    validate_session_id,
)
from memdir.tools._core import MAX_QUERY_CHARS, check_text
from memdir.tools._sessions import MAX_HITS, find_in_sessions

__all__ = ["router"]

READ: Final = Policy(scope=Scope.READ)
MESSAGES_LIMIT: Final = 8 << 20
"""The largest body of a message append, in bytes."""
APPEND: Final = Policy(scope=Scope.WRITE, body_limit=MESSAGES_LIMIT, idempotent=True)
_REDACTOR: Final = Redactor()

router = MemdirRouter(prefix="/v1/namespaces/{ns}/sessions")


@router.post(
    "/{session_id}/messages",
    policy=APPEND,
    response_model=Appended | None,
    status_code=201,
    responses={200: {"description": "Every message was logged already: nothing written."}},
)
def append_messages(
    bound: BoundNamespace, session_id: str, body: MessagesIn, response: Response
) -> Appended | None:
    """Log messages to the session (secrets masked); a message whose id is logged already is
    skipped, so sending the same messages again writes nothing."""
    log = SessionLog(bound.ws, session_id, redact=_REDACTOR)
    span = log.append(to_msgs(body))
    if span is None:
        response.status_code = 200
        return None
    return Appended.model_validate(span)


@router.get("/{session_id}/messages", policy=READ, response_model=Page[LoggedMessage])
def session_messages(
    bound: BoundNamespace, session_id: str, cursor: Cursor = None, limit: Limit = 50
) -> Page[LoggedMessage]:
    """The messages of a session's log in order, with their line numbers."""
    log = SessionLog(bound.ws, session_id)
    if bound.ws.stat(log.rel_path) is None:
        raise NotFound(f"no session {session_id!r} is logged: GET sessions lists them")
    page, after = page_of(log.read().records, lambda r: r.line, cursor, limit)
    return Page[LoggedMessage](items=[LoggedMessage.of(r) for r in page], next_cursor=after)


def _recent_first(info: SessionInfo) -> tuple[float, str]:
    return (-info.last_at.timestamp() if info.last_at else 0.0), info.session_id


@router.get("", policy=READ, response_model=Page[SessionInfoOut])
def sessions(
    bound: BoundNamespace, cursor: Cursor = None, limit: Limit = 50
) -> Page[SessionInfoOut]:
    """The logged sessions, the most recently active first."""
    index = shared_session_index(bound.ws)
    with index.lock:
        index.refresh()
        infos = sorted(list_session_infos(index), key=_recent_first)
    page, after = page_of(infos, lambda i: list(_recent_first(i)), cursor, limit)
    return Page[SessionInfoOut](
        items=[SessionInfoOut.model_validate(i) for i in page], next_cursor=after
    )


@router.get("/search", policy=READ, response_model=list[SessionHitOut])
def search_sessions(
    bound: BoundNamespace,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
    limit: Annotated[int, Query(ge=1, le=MAX_HITS)] = 10,
    session_id: str | None = None,
) -> list[SessionHitOut]:
    """Logged messages matching ``q``, best first (``session_id``: in that session only)."""
    text = check_text("q", q, max_chars=MAX_QUERY_CHARS, hint="give a few keywords")
    only = None if session_id is None else validate_session_id(session_id)
    return [SessionHitOut.model_validate(h) for h in find_in_sessions(bound.ws, text, limit, only)]
