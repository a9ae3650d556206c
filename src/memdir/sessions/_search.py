"""Searching the session logs: the memory search's analysis and ranking, over messages.

:func:`search_sessions` runs :func:`memdir.index._search.run_search` (query analysis with
CJK segmentation and stemming, BM25 with coverage, proximity, recency and context) on the
session index of :mod:`memdir.sessions._catalog`. Recency counts the day of each log's last
message; context lets a strong match lift the matching message next to it in the same log.
Updates win as in memory search (:mod:`memdir.index._updates`): a later message of the same
role that changes a value a message before it said is moved above it, and both hits say so;
"later" is further down the same log, or a later time in another.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from memdir._opencache import OpenCache, index_cache
from memdir.index import _rank
from memdir.index._clauses import without_answer_form
from memdir.index._forms import word_key
from memdir.index._query import analyze_query
from memdir.index._schema import LINE_BITS
from memdir.index._search import run_search
from memdir.index._sqlite import SqliteEngine
from memdir.index._text import fold, text_tokens
from memdir.index._types import SearchHit
from memdir.index._updates import Place, with_updates
from memdir.sessions._catalog import SessionIndex, SessionInfo
from memdir.store.workspace import Workspace

__all__ = [
    "SessionHit",
    "close_session_indexes",
    "list_session_infos",
    "search_sessions",
    "shared_session_index",
    "snippet",
]

MAX_HITS = 1_000
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionHit:
    """One message of a session log that matches a query.

    Attributes:
        session_id: the session.
        path: its log, ``sessions/<id>.log.jsonl``.
        line: the message's line in the log (1-based); cite it as ``path#L<line>``.
        role: ``user``, ``assistant``, ``tool`` or ``system``.
        tools: the tools the message calls or answers for.
        at: when the message was written.
        text: the message's searchable text (text, tool calls, tool results shortened).
        score: relevance, as :attr:`memdir.index.SearchHit.score` (one query only).
        superseded_by: the citation of a later message among the best hits that states a
            changed value of what this one says (it is ranked above this one), as
            :attr:`memdir.index.SearchHit.superseded_by`; ``None``: none found.
        supersedes: the citations of the earlier messages among the best hits whose value
            this one changes; empty when none.
    """

    session_id: str
    path: str
    line: int
    role: str
    tools: tuple[str, ...]
    at: datetime | None
    text: str
    score: float
    superseded_by: str | None = None
    supersedes: tuple[str, ...] = ()

    @property
    def citation(self) -> str:
        """``sessions/<id>.log.jsonl#L<line>``."""
        return f"{self.path}#L{self.line}"


class _OneLog(SqliteEngine):
    """The engine restricted to the units of one log (its row id range)."""

    def __init__(self, con: sqlite3.Connection, file_id: int) -> None:
        super().__init__(con)
        self._within = (file_id << LINE_BITS, (file_id + 1) << LINE_BITS)


def _guarded(index: SessionIndex, action: Callable[[], _T]) -> _T:
    """Run ``action``; a database found damaged is dropped, rebuilt and asked again once."""
    try:
        return action()
    except sqlite3.DatabaseError as exc:
        if not index.recover(exc):
            raise
    index.refresh()
    return action()


def search_sessions(
    index: SessionIndex, query: str, *, limit: int = 10, session_id: str | None = None
) -> list[SessionHit]:
    """The messages that best match ``query``, best first (refresh the index first).

    Args:
        index: the workspace's session index.
        query: keywords, in any language; any string is accepted.
        limit: at most this many hits (1 to 1000).
        session_id: search only this session's log (a valid id; see
            :func:`memdir.sessions.validate_session_id`).
    """
    limit = max(1, min(limit, MAX_HITS))
    query = without_answer_form(query)
    terms = analyze_query(query)

    def go() -> list[SessionHit]:
        with index.lock:
            con = index.connection()
            engine: SqliteEngine
            if session_id is None:
                engine = index.engine()
            else:
                row = con.execute(
                    "SELECT file_id FROM session_logs WHERE session = ?", (session_id,)
                ).fetchone()
                if row is None:
                    return []
                engine = _OneLog(con, int(row[0]))
            found = run_search(engine, query, limit, terms=terms)
            if not found:
                return []
            ids = {hit.path: 0 for hit in found}
            for path in ids:
                got = con.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
                ids[path] = int(got[0]) if got else -1
            keys = [(ids[hit.path] << LINE_BITS) | hit.line_number for hit in found]
            marks = ",".join("?" * len(keys))
            about = {
                row[0]: (row[1], row[2], row[3])
                for row in con.execute(
                    f"SELECT id, role, tools, at FROM session_units WHERE id IN ({marks})", keys
                )
            }
        known = {
            (hit.path, hit.line_number): about.get(key, ("", "", None))
            for key, hit in zip(keys, found, strict=True)
        }
        if _rank.DEFAULT.updates:
            found = with_updates(
                found,
                query,
                terms,
                _rank.DEFAULT,
                place_of=lambda hit: _place(hit, known[hit.path, hit.line_number]),
                cite=lambda hit: f"{hit.path}#L{hit.line_number}",  # a message is one line
            )
        hits: list[SessionHit] = []
        for hit in found:
            role, tools, at = known[hit.path, hit.line_number]
            name = hit.path.removeprefix("sessions/").removesuffix(".log.jsonl")
            hits.append(
                SessionHit(
                    session_id=name,
                    path=hit.path,
                    line=hit.line_number,
                    role=role,
                    tools=tuple(tools.split()),
                    at=datetime.fromisoformat(at) if at else None,
                    text=hit.content,
                    score=hit.score,
                    superseded_by=hit.superseded_by,
                    supersedes=hit.supersedes,
                )
            )
        return hits

    return _guarded(index, go)


def _place(hit: SearchHit, about: tuple[str, str, str | None]) -> Place:
    """When and by whom a logged message was written (its role is its speaker)."""
    role, _, at = about
    when = round(datetime.fromisoformat(at).timestamp() * 1_000_000) if at else None
    return Place(when=when, path=hit.path, line=hit.line_number, speaker=role or None)


def list_session_infos(index: SessionIndex) -> list[SessionInfo]:
    """Every logged session, the most recently active first (refresh the index first)."""
    return _guarded(index, index.sessions)


def snippet(text: str, query: str, limit: int) -> str:
    """The line of ``text`` holding most query terms, on one line, about ``limit`` characters.

    A long line is cut around its first matching word.
    """
    wanted = {
        word_key(fold(token))
        for term in analyze_query(query)
        if not term.stop
        for token in term.tokens
    }
    best, best_count = "", -1
    for line in text.split("\n"):
        if not line.strip():
            continue
        count = len(wanted & {word_key(token) for token in text_tokens(line)})
        if count > best_count:
            best, best_count = line, count
    best = " ".join(best.split())
    if len(best) <= limit:
        return best
    lowered = best.lower()
    positions = [
        at
        for token in text_tokens(best)
        if word_key(token) in wanted and (at := lowered.find(token)) >= 0
    ]
    start = max(0, min(positions, default=0) - limit // 3)
    start = min(start, max(0, len(best) - limit))
    piece = best[start : start + limit - 2].strip()
    return ("…" if start > 0 else "") + piece + ("…" if start + limit - 2 < len(best) else "")


# -- one open index per workspace ---------------------------------------------------------

_INDEXES: OpenCache[SessionIndex] = index_cache()


def _key(ws: Workspace) -> str:
    if ws.is_local:
        return str(ws.root.resolve())
    return f"{ws.url}\x00{ws.namespace or ''}"


def shared_session_index(ws: Workspace) -> SessionIndex:
    """The workspace's :class:`SessionIndex`, kept open between calls (a few, the least
    recently used closed); in memory for a workspace kept in PostgreSQL."""
    return _INDEXES.get(_key(ws), lambda: SessionIndex(ws))


def close_session_index(ws: Workspace) -> None:
    """Close the shared session index of ``ws`` (its logs were erased or deleted)."""
    _INDEXES.close(_key(ws))


def close_session_indexes() -> None:
    """Close every shared session index (also runs at interpreter exit)."""
    _INDEXES.close_all()
