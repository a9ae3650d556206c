"""What every page handler shares: the viewer dependency, a namespace opened for a viewer,
and the form a page posts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends
from starlette.requests import Request

from memdir.server.auth import Scope
from memdir.server.state import server_state
from memdir.server.ui._session import LOCAL_NAMESPACE, Refused, Viewer, check_form, viewer_of
from memdir.store.workspace import Workspace

__all__ = ["CurrentViewer", "read_form", "require", "ui_namespace"]

CurrentViewer = Annotated[Viewer, Depends(viewer_of)]
"""A page handler parameter: who is looking (a login is asked for without a session)."""


def ui_namespace(request: Request, viewer: Viewer, ns: str) -> Workspace:
    """The namespace ``ns`` opened for ``viewer`` (blocking: a page handler runs in a thread).

    The UI never creates a namespace. A name the viewer does not reach gets the same answer
    as one that does not exist.

    Raises:
        Refused: 404.
    """
    state = server_state(request)
    if not viewer.reaches(ns):
        raise Refused(404, "no such namespace")
    if ns == LOCAL_NAMESPACE:
        return state.root
    ws = state.pool.get(ns, create=False)
    if ws is None:
        raise Refused(404, "no such namespace")
    return ws


def require(viewer: Viewer, scope: Scope, what: str) -> None:
    """Refuse the page unless the session's key has ``scope``.

    Raises:
        Refused: 403, naming the scope needed.
    """
    if not viewer.can(scope):
        raise Refused(403, f"{what} needs a key with the {scope.label} scope")


async def read_form(request: Request, viewer: Viewer) -> dict[str, Any]:
    """The form a page posted, checked for its CSRF token and origin.

    Raises:
        Refused: 403 (another site, no or a stale token); 413 (a body over the limit).
    """
    form = await request.form(max_files=0, max_fields=64)
    fields = {name: value for name, value in form.items() if isinstance(value, str)}
    check_form(request, viewer, fields.get("csrf"))
    return fields
