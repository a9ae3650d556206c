"""The overview: the viewer's namespaces, each with its size, when it was last flushed,
consolidated and maintained, what runs now, and the last consolidation that failed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.memory import read_schedule
from memdir.memory._cursor import CURSOR_DIR
from memdir.memory._history import read_log
from memdir.memory._lease import lease_holder
from memdir.server.state import server_state
from memdir.server.ui._links import ns_url
from memdir.server.ui._pages import CurrentViewer
from memdir.server.ui._render import page, redirect
from memdir.server.ui._session import LOCAL_NAMESPACE, Refused, Viewer
from memdir.store.workspace import (
    ARCHIVE_DIR,
    MEMORY_DIR,
    MEMORY_MD,
    SESSIONS_DIR,
    Workspace,
)

__all__ = ["NamespaceStatus", "namespace_status", "router"]

router = APIRouter(prefix="/ui", include_in_schema=False)

_FAILED: Final = frozenset({"failed", "refused"})
_MAX_LISTED: Final = 500


@dataclass(frozen=True, slots=True)
class NamespaceStatus:
    """What the overview says of one namespace.

    Attributes:
        name: its name (``_``: the workspace itself, in ``memdir ui``).
        size: the bytes of its memory and session files.
        ledgers: its daily ledgers (archived ones included).
        last_flush: when a conversation was last flushed into it.
        last_consolidation: when a consolidation last started.
        last_maintenance: when a maintenance pass last started.
        waiting: a consolidation asked for and not served yet (since when).
        running: the jobs that hold their lease now (``maintenance``, ``consolidation``).
        last_run: the newest consolidation run's status and reason.
        failed: the newest run that failed or was refused: when and why (``None``: none).
    """

    name: str
    size: int
    ledgers: int
    last_flush: datetime | None
    last_consolidation: datetime | None
    last_maintenance: datetime | None
    waiting: datetime | None
    running: tuple[str, ...]
    last_run: dict[str, Any] | None
    failed: dict[str, Any] | None


def _files_size(ws: Workspace, rel_dir: str) -> tuple[int, int, datetime | None]:
    """Bytes and count of the files directly in ``rel_dir``, and the newest change."""
    size = count = 0
    newest = 0
    for entry in ws.listdir(rel_dir):
        if entry.kind == "file" and entry.stat is not None:
            size += entry.stat.size
            count += 1
            newest = max(newest, entry.stat.mtime_ns)
    when = datetime.fromtimestamp(newest / 1e9, UTC) if newest else None
    return size, count, when


def namespace_status(ws: Workspace, name: str) -> NamespaceStatus:
    """The status of namespace ``name`` (blocking: a few listings and small reads).

    Raises:
        WorkspaceError: the store cannot be read.
    """
    size = 0
    memory = ws.stat(MEMORY_MD)
    if memory is not None:
        size += memory.size
    ledger_bytes, _, _ = _files_size(ws, MEMORY_DIR)
    archive_bytes, _, _ = _files_size(ws, ARCHIVE_DIR)
    session_bytes, _, _ = _files_size(ws, SESSIONS_DIR)
    size += ledger_bytes + archive_bytes + session_bytes
    ledgers = len(ws.ledgers()) + len(ws.ledgers(archived=True))
    _, _, last_flush = _files_size(ws, CURSOR_DIR)
    schedule = read_schedule(ws)
    running = tuple(
        job for job in ("maintenance", "consolidation") if lease_holder(ws, job) is not None
    )
    runs = read_log(ws, limit=50)
    last_consolidation = _latest(
        schedule.last_consolidation_at, runs[-1].get("at") if runs else None
    )
    failed = next((r for r in reversed(runs) if r.get("status") in _FAILED), None)
    return NamespaceStatus(
        name=name,
        size=size,
        ledgers=ledgers,
        last_flush=last_flush,
        last_consolidation=last_consolidation,
        last_maintenance=schedule.last_tick_at,
        waiting=schedule.consolidation_requested_at,
        running=running,
        last_run=runs[-1] if runs else None,
        failed=failed,
    )


def _latest(claimed: datetime | None, logged: object) -> datetime | None:
    """The later of a claimed consolidation and the newest logged run (a run started by
    ``memdir consolidate`` is logged, not claimed)."""
    ran = None
    if isinstance(logged, str):
        try:
            ran = datetime.fromisoformat(logged.replace("Z", "+00:00"))
        except ValueError:
            ran = None
    times = [t for t in (claimed, ran) if t is not None]
    return max(times) if times else None


def viewer_namespaces(request: Request, viewer: Viewer) -> list[tuple[str, Workspace]]:
    """The namespaces ``viewer`` reaches that exist, by name (``memdir ui``: the workspace
    itself first)."""
    state = server_state(request)
    root = state.root
    names = [n for n in root.namespaces() if viewer.principal.grant.allows(n)]
    found = [(n, root.namespaced(n, create=False)) for n in names[:_MAX_LISTED]]
    if viewer.local:
        found.insert(0, (LOCAL_NAMESPACE, root))
    return found


@router.get("/search")
def search_anywhere(request: Request, viewer: CurrentViewer, q: str = "", ns: str = "") -> Response:
    """``/ui/search?q=...``: a search linked without a namespace. With ``ns`` (or when the
    viewer reaches only one namespace) it opens that namespace's search; else it asks which."""
    keep = {k: v for k, v in request.query_params.items() if k in ("q", "mode", "in") and v}
    names = [name for name, _ in viewer_namespaces(request, viewer)]
    if ns and ns not in names:
        raise Refused(404, "no such namespace")
    chosen = ns or (names[0] if len(names) == 1 else "")
    if chosen:
        return redirect(ns_url(chosen, "search", **keep))
    return page(request, "search-where.html", viewer, title="Search", q=q, names=names, keep=keep)


@router.get("/")
def overview(request: Request, viewer: CurrentViewer) -> Response:
    """The viewer's namespaces and their state."""
    rows = [namespace_status(ws, name) for name, ws in viewer_namespaces(request, viewer)]
    return page(request, "overview.html", viewer, title="Overview", rows=rows)
