"""Searching a namespace as its agent does: the memory index (lexical, or hybrid when it
has vectors) and the session logs, hits ranked, cited, with the matched words marked and
where each hit came from.

A search is a GET, so it can be linked: ``search?q=...&mode=lexical|hybrid&in=memory|
sessions|both``. Hybrid is what ``memory_search`` runs when the namespace has an embedder and
vectors; asked for without them, the page says so and shows the lexical hits. Lexical asked
for on a hybrid index searches without the vectors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir._opencache import OpenCache, index_cache
from memdir.index import MemoryIndex, SearchHit
from memdir.server.ui._highlight import Piece, pieces
from memdir.server.ui._links import cite_url, ns_url
from memdir.server.ui._pages import CurrentViewer, ui_namespace
from memdir.server.ui._render import page
from memdir.server.ui._session import Refused
from memdir.server.ui._sessions import search_text, session_hits
from memdir.sessions import LOG_SUFFIX
from memdir.store.workspace import MEMORY_DIR, SESSIONS_DIR, Workspace
from memdir.tools._core import shared_index

__all__ = ["router"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

LIMIT: Final = 20
MODES: Final = ("hybrid", "lexical")
SOURCES: Final = {"memory": ("memory",), "sessions": ("sessions",), "both": ("memory", "sessions")}
_LEXICAL: Final[OpenCache[MemoryIndex]] = index_cache()
_LINE: Final = re.compile(r"L[0-9]+(?:-L[0-9]+)?")
_LIST_MARK: Final = re.compile(r"^\s*[-*+]\s+")


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A memory hit as shown: the hit, its citation, its text in marked pieces and its
    sources (each with where it opens, ``""``: nowhere)."""

    hit: SearchHit
    citation: str
    pieces: list[Piece]
    sources: list[tuple[str, str]]


def _lexical_index(ws: Workspace) -> MemoryIndex:
    """An index of ``ws`` that never uses vectors (kept open, as the tools keep theirs)."""
    key = str(ws.root.resolve()) if ws.is_local else ws.describe()
    return _LEXICAL.get(key, lambda: MemoryIndex(ws, embedder=False))


def _memory_hits(ws: Workspace, text: str, mode: str) -> tuple[list[SearchHit], str, str]:
    """The hits, the mode that ran, and a note when it is not the one asked for."""
    index = shared_index(ws)
    index.refresh()
    status = index.status() if isinstance(index, MemoryIndex) else None
    hybrid = status is not None and status.embedder is not None and status.vectors > 0
    if mode == "lexical" and hybrid:
        return _lexical_index(ws).search(text, limit=LIMIT), "lexical", ""
    note = ""
    if mode == "hybrid" and not hybrid:
        why = (
            "no embedder is set for this namespace"
            if status is None or status.embedder is None
            else f"no line has a vector yet ({status.pending} waiting for one)"
        )
        note = f"Hybrid search is not available: {why}. These are the lexical hits."
    # As the agent's memory_search: hybrid whenever it can be.
    return index.search(text, limit=LIMIT), "hybrid" if hybrid else "lexical", note


def source_url(ns: str, source: str) -> str:
    """Where a hit's source opens: a ledger line, a session line, or the session message of
    that id (``sessions/<id>.log.jsonl#<message id>``); ``""`` for a note such as
    ``unsourced``."""
    path, _, fragment = source.partition("#")
    if path.startswith(MEMORY_DIR + "/") or _LINE.fullmatch(fragment):
        return cite_url(ns, source)
    if path.startswith(SESSIONS_DIR + "/") and path.endswith(LOG_SUFFIX):
        session = path[len(SESSIONS_DIR) + 1 : -len(LOG_SUFFIX)]
        return ns_url(ns, f"sessions/{quote(session, safe='')}", msg=fragment or None)
    return ""


def _shown(ns: str, hit: SearchHit, text: str) -> MemoryHit:
    sources = [(source, source_url(ns, source)) for source in hit.sources]
    # A bullet is shown as the fact it holds: its list marker is the file's, not the fact's.
    fact = _LIST_MARK.sub("", hit.content, count=1)
    return MemoryHit(hit, _citation(hit), pieces(fact, text), sources)


def _citation(hit: SearchHit) -> str:
    end = f"-L{hit.line_end}" if hit.line_end > hit.line_number else ""
    return f"{hit.path}#L{hit.line_number}{end}"


@router.get("/search")
def search(
    request: Request,
    ns: str,
    viewer: CurrentViewer,
    q: str = "",
    mode: str = "",
) -> Response:
    """The search form, and with ``q`` the hits (``in``: memory, sessions or both)."""
    ws = ui_namespace(request, viewer, ns)
    where = request.query_params.get("in", "memory")  # a keyword in Python: read by hand
    if mode not in ("", *MODES):
        raise Refused(400, "mode is lexical or hybrid")
    if where not in SOURCES:
        raise Refused(400, "in is memory, sessions or both")
    hits: list[MemoryHit] = []
    found: list[tuple[object, object]] = []
    ran, note = mode or "hybrid", ""  # the mode checked before a search ran
    if q:
        text = search_text(q)
        if "memory" in SOURCES[where]:
            raw, ran, note = _memory_hits(ws, text, mode)
            hits = [_shown(ns, h, text) for h in raw]
        if "sessions" in SOURCES[where]:
            found = list(session_hits(ws, text, LIMIT))
    return page(
        request,
        "search.html",
        viewer,
        title=f"Search: {q}" if q else "Search",
        ns=ns,
        q=q,
        mode=mode,
        ran=ran,
        note=note,
        where=where,
        hits=hits,
        session_hits=found,
    )
