"""A namespace's ``MEMORY.md``: rendered, each bullet with how it came to be, and the page
that follows a bullet down to the conversation it came from."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import ToolInputError, WorkspaceError
from memdir.provenance._records import load_memory_records, reconcile
from memdir.provenance._why import why
from memdir.server.ui._blocks import blocks_of
from memdir.server.ui._pages import CurrentViewer, ui_namespace
from memdir.server.ui._render import page
from memdir.server.ui._session import Refused
from memdir.store.workspace import MEMORY_MD

__all__ = ["router"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

_NOTICES = {
    "saved": "MEMORY.md is saved; the version it replaced is kept in the history.",
    "restored": (
        "The earlier version is MEMORY.md again; the one it replaced is kept in the history."
    ),
    "unchanged": "MEMORY.md already held that text; nothing changed.",
}


def _notice(notice: str, masked: str) -> str:
    """What a form that led here did (a fixed sentence: an address cannot put words on the
    page)."""
    said = _NOTICES.get(notice, "")
    if said and masked.isdigit() and int(masked) > 0:
        said += f" {int(masked)} secret(s) in the text were masked."
    return said


@router.get("/")
def memory_md(
    request: Request, ns: str, viewer: CurrentViewer, notice: str = "", masked: str = ""
) -> Response:
    """``MEMORY.md`` rendered, each bullet with its kind, origin and a link to its sources
    (after an edit or a restore, with a ``notice`` of it)."""
    ws = ui_namespace(request, viewer, ns)
    found = ws.read_versioned(MEMORY_MD)
    text = found.data.decode("utf-8", "replace") if found is not None else ""
    records = reconcile(text, load_memory_records(ws), "") if text else []
    return page(
        request,
        "memory.html",
        viewer,
        title="MEMORY.md",
        ns=ns,
        blocks=blocks_of(text),
        records=records,
        exists=found is not None,
        version=found.version if found is not None else None,
        notice=_notice(notice, masked),
    )


@router.get("/why")
def provenance(request: Request, ns: str, viewer: CurrentViewer, at: str = "") -> Response:
    """The provenance chain of the bullet at ``at`` (``MEMORY.md#L12``,
    ``memory/2026-11-30.md#L3``): its ledger lines, and their conversation lines."""
    ws = ui_namespace(request, viewer, ns)
    if not at:
        raise Refused(400, "say which bullet: why?at=MEMORY.md%23L12")
    try:
        link = why(ws, at)
    except (ToolInputError, WorkspaceError) as exc:
        raise Refused(404, str(exc)) from None
    return page(request, "why.html", viewer, title="Where this came from", ns=ns, link=link, at=at)
