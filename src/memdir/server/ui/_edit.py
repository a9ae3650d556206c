"""Editing a namespace's ``MEMORY.md`` in the browser, by compare-and-swap.

The form carries the version the text was read at; saving replaces the file only if it still
has that version (:func:`memdir.memory.replace_memory_md`, ``by="person"``: secrets masked,
the previous file kept in the history). If someone changed it meanwhile (a consolidation,
another tab), nothing is written: the page comes back with the difference between what is
there now and what the person wrote, their text still in the editor.
"""

from __future__ import annotations

import anyio
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import ToolInputError, VersionConflict
from memdir.memory import replace_memory_md
from memdir.memory.curated import MAX_MEMORY_MD_BYTES
from memdir.server.auth import Scope
from memdir.server.ui._diff import diff_lines
from memdir.server.ui._links import ns_url
from memdir.server.ui._pages import CurrentViewer, read_form, require, ui_namespace
from memdir.server.ui._render import page, redirect
from memdir.server.ui._session import Refused, Viewer
from memdir.store.workspace import MEMORY_MD, Workspace

__all__ = ["router"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

_CONFLICT = (
    "MEMORY.md was changed by someone else (a consolidation, another tab or person) since you "
    "opened it, so nothing was saved. Below is how your text differs from MEMORY.md now; your "
    "text is still in the editor: save again to put it in place of what is there now."
)


def _edit_page(
    request: Request,
    ws: Workspace,
    viewer: Viewer,
    ns: str,
    *,
    text: str | None = None,
    status: int = 200,
    message: str = "",
    conflict: bool = False,
) -> Response:
    """The editor, holding ``text`` (``None``: ``MEMORY.md`` as it is) and the version of
    ``MEMORY.md`` now; on a conflict, the diff from what is there to ``text``."""
    found = ws.read_versioned(MEMORY_MD)
    now = found.data.decode("utf-8", "replace") if found is not None else ""
    return page(
        request,
        "edit.html",
        viewer,
        status=status,
        title="Edit MEMORY.md",
        ns=ns,
        text=now if text is None else text,
        version=found.version if found is not None else "",
        message=message,
        lines=diff_lines(now, text) if conflict and text is not None else [],
        conflict=conflict,
        limit=MAX_MEMORY_MD_BYTES,
    )


@router.get("/edit")
def edit(request: Request, ns: str, viewer: CurrentViewer) -> Response:
    """``MEMORY.md`` in an editor, with the version it was read at."""
    require(viewer, Scope.WRITE, "Editing MEMORY.md")
    ws = ui_namespace(request, viewer, ns)
    return _edit_page(request, ws, viewer, ns)


@router.post("/edit")
async def save(request: Request, ns: str, viewer: CurrentViewer) -> Response:
    """Replace ``MEMORY.md`` with the form's text if it is still at the form's version."""
    form = await read_form(request, viewer)
    require(viewer, Scope.WRITE, "Editing MEMORY.md")
    if "text" not in form:
        raise Refused(400, "the form has no text; open the editor again")
    # a browser sends a textarea's lines ending in CRLF: the file keeps its own LF
    text = str(form["text"]).replace("\r\n", "\n")
    version = str(form.get("version", "")) or None

    def work() -> Response:
        ws = ui_namespace(request, viewer, ns)
        try:
            done = replace_memory_md(ws, text, version=version, by="person")
        except VersionConflict:
            return _edit_page(
                request, ws, viewer, ns, text=text, status=409, message=_CONFLICT, conflict=True
            )
        except ToolInputError as exc:
            return _edit_page(request, ws, viewer, ns, text=text, status=400, message=str(exc))
        notice = "saved" if done.changed else "unchanged"
        return redirect(ns_url(ns, "", notice=notice, masked=done.masked or None))

    return await anyio.to_thread.run_sync(work)
