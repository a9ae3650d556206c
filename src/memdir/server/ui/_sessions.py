"""A namespace's logged sessions: listed (the most recently active first) and searched, and
one session read as a transcript, a page of messages at a time (around the cited line)."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import SessionLogError, ToolInputError
from memdir.server.ui._highlight import pieces
from memdir.server.ui._links import ns_url
from memdir.server.ui._pages import CurrentViewer, ui_namespace
from memdir.server.ui._paging import number, window
from memdir.server.ui._render import page, redirect
from memdir.server.ui._session import Refused
from memdir.server.ui._transcript import entries
from memdir.sessions import SessionHit, SessionInfo, SessionLog, validate_session_id
from memdir.store.workspace import Workspace
from memdir.tools._core import MAX_QUERY_CHARS, check_text
from memdir.tools._sessions import MAX_HITS, find_in_sessions, session_infos

__all__ = ["router", "search_text", "session_hits"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

SESSIONS_PER_PAGE: Final = 50
MESSAGES_PER_PAGE: Final = 100


def search_text(q: str) -> str:
    """The query ``q`` checked as the search tools check it.

    Raises:
        Refused: 400, saying what is wrong with it.
    """
    try:
        return check_text("q", q, max_chars=MAX_QUERY_CHARS, hint="give a few keywords")
    except ToolInputError as exc:
        raise Refused(400, str(exc)) from None


def session_hits(ws: Workspace, text: str, limit: int) -> list[tuple[SessionHit, object]]:
    """The logged messages matching ``text``, best first, each with its marked pieces."""
    return [(hit, pieces(hit.text, text)) for hit in find_in_sessions(ws, text, limit)]


def _recent_first(info: SessionInfo) -> tuple[float, str]:
    return (-info.last_at.timestamp() if info.last_at else 0.0), info.session_id


@router.get("/sessions")
def sessions(
    request: Request, ns: str, viewer: CurrentViewer, q: str = "", start: str = ""
) -> Response:
    """The logged sessions, the most recently active first; with ``q``, the messages that
    match it (the session search of the agent's tools)."""
    ws = ui_namespace(request, viewer, ns)
    first = number(start, "start")
    hits = session_hits(ws, search_text(q), MAX_HITS) if q else []
    infos = sorted(session_infos(ws), key=_recent_first)
    shown = window(len(infos), SESSIONS_PER_PAGE, start=first)
    return page(
        request,
        "sessions.html",
        viewer,
        title="Sessions",
        ns=ns,
        q=q,
        hits=hits,
        infos=infos[shown.first - 1 : shown.last],
        shown=shown,
    )


@router.get("/sessions/{session_id}")
def transcript(
    request: Request,
    ns: str,
    session_id: str,
    viewer: CurrentViewer,
    line: str = "",
    start: str = "",
    msg: str = "",
    whole: str = "",
) -> Response:
    """One session's log as a transcript: ``line`` (a citation's) marked and shown in its
    page, ``msg`` (a message id, from a ledger's provenance) found and shown the same way,
    ``whole`` a line shown unclipped."""
    ws = ui_namespace(request, viewer, ns)
    try:
        log = SessionLog(ws, validate_session_id(session_id))
    except SessionLogError:
        raise Refused(404, "no such session") from None
    if ws.stat(log.rel_path) is None:
        raise Refused(404, f"no session {session_id!r} is logged")
    at, first, full = number(line, "line"), number(start, "start"), number(whole, "whole")
    try:
        read = log.read()
    except SessionLogError as exc:
        raise Refused(503, str(exc)) from None
    records = read.records
    if msg:
        found = next((r.line for r in records if r.msg.id == msg), None)
        if found is not None:
            url = ns_url(ns, f"sessions/{quote(session_id, safe='')}", line=found)
            return redirect(f"{url}#L{found}")
    focus = at or full
    index = next((k for k, r in enumerate(records, 1) if focus and r.line >= focus), None)
    shown = window(len(records), MESSAGES_PER_PAGE, start=first, focus=index)
    return page(
        request,
        "transcript.html",
        viewer,
        title=f"Session {session_id}",
        ns=ns,
        session_id=session_id,
        path=log.rel_path,
        items=entries(records, log.rel_path, slice(shown.first - 1, shown.last), whole=full),
        shown=shown,
        at=at,
        missing=msg if msg else None,
        malformed=read.malformed,
    )
