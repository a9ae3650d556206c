"""Forgetting a namespace (a user) whole: what it holds, a confirmation that takes its name
typed out, then :func:`memdir.forget.delete_namespace` as ``DELETE /v1/namespaces/{ns}`` runs
it, and the overview with a notice. Needs the admin scope; ``memdir ui``'s workspace itself
(``_``) is never deleted from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import MemdirError
from memdir.forget import NamespaceDeleted, delete_namespace
from memdir.server.auth import Scope
from memdir.server.jobs import JobRunning
from memdir.server.state import server_state
from memdir.server.ui._overview import namespace_status, viewer_namespaces
from memdir.server.ui._pages import CurrentViewer, read_form, require, ui_namespace
from memdir.server.ui._render import page, redirect
from memdir.server.ui._session import LOCAL_NAMESPACE, Refused, Viewer
from memdir.store.workspace import SESSIONS_DIR, Workspace

__all__ = ["Holdings", "holdings", "router"]

router = APIRouter(include_in_schema=False)

_WHAT: Final = "Deleting a namespace"


@dataclass(frozen=True, slots=True)
class Holdings:
    """What a namespace holds, as the delete page shows it.

    Attributes:
        files: its files (index included).
        size: their bytes.
        ledgers: its daily ledgers (archived ones included).
        sessions: its session logs.
        keys: the API keys bound to exactly it (revoked with it).
    """

    files: int
    size: int
    ledgers: int
    sessions: int
    keys: int


def holdings(request: Request, ws: Workspace, ns: str) -> Holdings:
    """What ``ns`` holds (blocking: it walks the namespace)."""
    files = size = sessions = 0
    for rel, stat in ws.walk(""):
        files += 1
        size += stat.size
        if rel.startswith(f"{SESSIONS_DIR}/") and rel.endswith(".log.jsonl"):
            sessions += 1
    status = namespace_status(ws, ns)
    records = server_state(request).authenticator.store.records()
    bound = sum(1 for r in records if r.namespace == ns and r.revoked_at is None)
    return Holdings(files, size, status.ledgers, sessions, bound)


def _deletable(viewer: Viewer, ns: str) -> None:
    """Refuse the workspace itself, and a key without the admin scope (called after
    ``ui_namespace``: another tenant's name is unknown first)."""
    if ns == LOCAL_NAMESPACE:
        raise Refused(400, "the workspace itself is not deleted from here: only a namespace")
    require(viewer, Scope.ADMIN, _WHAT)


def _form(
    request: Request, viewer: Viewer, ns: str, held: Holdings, error: str | None = None
) -> Response:
    return page(
        request,
        "namespace-delete.html",
        viewer,
        status=400 if error else 200,
        title="Delete the namespace",
        ns=ns,
        held=held,
        error=error,
    )


@router.get("/ui/ns/{ns}/delete")
def delete_page(request: Request, ns: str, viewer: CurrentViewer) -> Response:
    """What the namespace holds, and the form that deletes it."""
    ws = ui_namespace(request, viewer, ns)
    _deletable(viewer, ns)
    return _form(request, viewer, ns, holdings(request, ws, ns))


@router.post("/ui/ns/{ns}/delete")
async def delete_apply(request: Request, ns: str, viewer: CurrentViewer) -> Response:
    """Delete the namespace when its name was typed out; then the overview says so."""
    form = await read_form(request, viewer)
    ws = await anyio.to_thread.run_sync(lambda: ui_namespace(request, viewer, ns))
    _deletable(viewer, ns)
    if form.get("confirm", "").strip() != ns:
        held = await anyio.to_thread.run_sync(holdings, request, ws, ns)
        message = f"type the namespace's name, {ns}, to delete it; nothing was deleted"
        return _form(request, viewer, ns, held, message)
    done = await _delete(request, viewer, ns)
    query = {"ns": ns, "files": done.files, "keys": done.keys_revoked}
    return redirect("/ui/deleted?" + urlencode(query))


async def _delete(request: Request, viewer: Viewer, ns: str) -> NamespaceDeleted:
    """Delete ``ns`` as the REST route does: in the tenant's job slot, then the pool forgets
    it and the usage meter counts one namespace fewer."""
    state = server_state(request)
    by = "person (memdir ui)" if viewer.local else f"key {viewer.principal.key_id}"[:64]
    try:
        with state.jobs.slot(viewer.tenant, "delete"):
            done = await state.jobs.call_sync(lambda: delete_namespace(state.root, ns, by=by))
    except JobRunning:
        raise Refused(429, "another job of this tenant runs now; send it again soon") from None
    except MemdirError as exc:
        raise Refused(404, str(exc)) from None
    state.pool.forget(ns)
    state.usage.add(viewer.tenant, namespaces=-1)
    return done


@router.get("/ui/deleted")
def deleted(
    request: Request, viewer: CurrentViewer, ns: str = "", files: str = "", keys: str = ""
) -> Response:
    """The overview, saying which namespace was just deleted (only a name the viewer reaches
    and that is gone: a link cannot make it claim more)."""
    names = viewer_namespaces(request, viewer)
    gone = (
        ns
        if ns and ns != LOCAL_NAMESPACE and viewer.reaches(ns) and ns not in dict(names)
        else None
    )
    rows = [namespace_status(ws, name) for name, ws in names]
    return page(
        request,
        "namespace-deleted.html",
        viewer,
        title="Overview",
        rows=rows,
        gone=gone,
        files=files if files.isdigit() else None,
        keys=keys if keys.isdigit() else None,
    )
