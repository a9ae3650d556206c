"""Forgetting a fact: name it (its text, a cited line or a search), see every place it lives
and what stays, confirm, and read what was erased where.

The preview is a GET and changes nothing (any key that reads the namespace may see it: it
shows only where text the key can read already lives). The confirmation form carries a digest
of the plan it showed; the POST plans again and erases only when the digest is the same, so a
copy written between the preview and the click (a flush, another add) is shown first, never
erased unseen. Erasing needs the write scope.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Final

import anyio.to_thread
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import MemdirError
from memdir.forget import ForgetPlan, ForgetReport, Place, Target, apply_forget, plan_forget
from memdir.forget._plan import MIN_CHARS, facts_of
from memdir.server.auth import Scope
from memdir.server.jobs import JobRunning
from memdir.server.state import server_state
from memdir.server.ui._pages import CurrentViewer, read_form, require, ui_namespace
from memdir.server.ui._render import page
from memdir.server.ui._session import LOCAL_NAMESPACE, Refused, Viewer
from memdir.store.workspace import Workspace

__all__ = ["PlaceRow", "plan_digest", "router", "target_of"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

MAX_TEXT: Final = 2000
"""The longest text or query a forget takes (a fact is a line, not a document)."""
MAX_LIMIT: Final = 10
_LEDGER = re.compile(r"^memory/(archive/)?\d{4}-\d{2}-\d{2}\.md$")


@dataclass(frozen=True, slots=True)
class PlaceRow:
    """One place of a plan as the preview shows it.

    Attributes:
        path: the file.
        what: what the file is (``daily ledger``, ``session log``...).
        change: what happens to it (``1 bullet becomes an erasure line``, ``deleted``...).
    """

    path: str
    what: str
    change: str


def _what(path: str) -> tuple[str, str]:
    """What the file at ``path`` is, and what an erasure does to its lines there."""
    if match := _LEDGER.match(path):
        what = "archived daily ledger" if match[1] else "daily ledger"
        return what, "replaced by erasure lines"
    if path == "MEMORY.md":
        return "MEMORY.md (what the agent is given)", "removed"
    if path.startswith("memory/.history/MEMORY."):
        return "an earlier version of MEMORY.md", "removed"
    if path.startswith("memory/.history/"):
        return "consolidation log", "removed"
    if path.startswith("sessions/") and path.endswith(".log.jsonl"):
        return "session log (messages and compaction summaries)", "with the text made [erased]"
    if path.startswith("sessions/"):
        return "saved session state", "with the text made [erased]"
    if path.startswith("large_tool_results/"):
        return "evicted tool result", "removed"
    if path.startswith("memory/.provenance/"):
        return "provenance records", "removed"
    if path.startswith(("memory/.flush_state", "memory/.consolidation_state")):
        return "flush or consolidation state", "removed"
    return "file", "removed"


def place_rows(places: tuple[Place, ...]) -> list[PlaceRow]:
    """The preview's rows of ``places``, in the plan's order."""
    rows = []
    for place in places:
        what, change = _what(place.path)
        shown = "the file is deleted" if place.deleted else f"{place.lines} line(s) {change}"
        rows.append(PlaceRow(place.path, what, shown))
    return rows


def plan_digest(ns: str, plan: ForgetPlan) -> str:
    """A digest of what ``plan`` erases (its keyed hashes, ids and places; never text)."""
    body = {
        "ns": ns,
        "keys": sorted(plan.keys),
        "bullets": sorted(plan.bullet_ids),
        "messages": sorted(plan.message_ids),
        "places": [[p.path, p.lines, p.deleted] for p in plan.places],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def target_of(text: str, citation: str, search: str, limit: str) -> Target | None:
    """The fact named by a form (``None``: none named yet).

    Raises:
        Refused: 400, two named at once, too long, or a bad limit.
    """
    given = {k: v.strip() for k, v in (("text", text), ("citation", citation), ("search", search))}
    named = {k: v for k, v in given.items() if v}
    if not named:
        return None
    if len(named) > 1:
        raise Refused(400, "name the fact one way: its text, a cited line or a search")
    kind, value = next(iter(named.items()))
    if len(value) > MAX_TEXT:
        raise Refused(400, f"a fact to forget is at most {MAX_TEXT} characters")
    if kind == "citation":
        return Target(citation=value)
    if kind == "search":
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            raise Refused(400, f"the number of hits is a whole number from 1 to {MAX_LIMIT}")
        return Target(search=value, limit=int(limit))
    return Target(text=value)


def _named(target: Target) -> dict[str, Any]:
    """The form fields that name ``target`` again (the confirmation carries them)."""
    return {
        "text": target.text or "",
        "citation": target.citation or "",
        "search": target.search or "",
        "limit": str(target.limit),
    }


@dataclass(frozen=True, slots=True)
class _Preview:
    plan: ForgetPlan | None
    facts: list[str]
    error: str | None


def _plan(ws: Workspace, target: Target) -> _Preview:
    """Plan the forget (blocking); a target that cannot be read is an error to show."""
    try:
        plan = plan_forget(ws, target)
        facts = [target.text] if target.text is not None else facts_of(ws, target)
    except MemdirError as exc:
        return _Preview(None, [], str(exc))
    shown = [f.strip().lstrip("-*+• ").strip() for f in facts if f]
    return _Preview(plan, shown, None)


def _preview_page(
    request: Request,
    viewer: Viewer,
    ns: str,
    target: Target | None,
    preview: _Preview | None,
    *,
    changed: bool = False,
) -> Response:
    plan = preview.plan if preview is not None else None
    status = 400 if preview is not None and preview.error else 409 if changed else 200
    return page(
        request,
        "forget.html",
        viewer,
        status=status,
        title="Forget a fact",
        ns=ns,
        named=_named(target) if target is not None else _named(Target()),
        kind=_kind(target),
        preview=preview,
        plan=plan,
        rows=place_rows(plan.places) if plan is not None else [],
        digest=plan_digest(ns, plan) if plan is not None else "",
        can_apply=viewer.can(Scope.WRITE),
        can_delete=viewer.can(Scope.ADMIN) and ns != LOCAL_NAMESPACE,
        changed=changed,
        min_chars=MIN_CHARS,
    )


def _kind(target: Target | None) -> str:
    if target is None:
        return ""
    return "citation" if target.citation else "search" if target.search else "text"


@router.get("/forget")
def forget_page(
    request: Request,
    ns: str,
    viewer: CurrentViewer,
    text: str = "",
    citation: str = "",
    search: str = "",
    limit: str = "3",
) -> Response:
    """The forget form; with a fact named, the preview of every place it lives."""
    ws = ui_namespace(request, viewer, ns)
    target = target_of(text, citation, search, limit)
    preview = _plan(ws, target) if target is not None else None
    return _preview_page(request, viewer, ns, target, preview)


def _by(viewer: Viewer) -> str:
    """Who asked, for the erasure record (a key's public id; never a secret)."""
    return "person (memdir ui)" if viewer.local else f"key {viewer.principal.key_id}"[:64]


@router.post("/forget")
async def forget_apply(request: Request, ns: str, viewer: CurrentViewer) -> Response:
    """Erase the fact the confirmed preview showed, if the plan is still the same."""
    form = await read_form(request, viewer)
    ws = await anyio.to_thread.run_sync(lambda: ui_namespace(request, viewer, ns))
    require(viewer, Scope.WRITE, "Forgetting a fact")
    target = target_of(
        form.get("text", ""), form.get("citation", ""), form.get("search", ""),
        form.get("limit", "3"),
    )  # fmt: skip
    if target is None:
        raise Refused(400, "say which fact to forget")
    preview = await anyio.to_thread.run_sync(_plan, ws, target)
    plan = preview.plan
    if plan is None or plan.empty:  # an error to show, or nothing (left) to forget
        return _preview_page(request, viewer, ns, target, preview)
    if plan_digest(ns, plan) != form.get("plan"):
        return _preview_page(request, viewer, ns, target, preview, changed=True)
    report = await _apply(request, viewer, ws, plan)
    return page(
        request,
        "forget-report.html",
        viewer,
        title="Forgotten",
        ns=ns,
        report=report,
        store=plan.store,
    )


async def _apply(request: Request, viewer: Viewer, ws: Workspace, plan: ForgetPlan) -> ForgetReport:
    """Run the erasure in the tenant's job slot (one long job at a time per tenant)."""
    state = server_state(request)
    by = _by(viewer)
    try:
        with state.jobs.slot(viewer.tenant, "forget"):
            return await state.jobs.call_sync(lambda: apply_forget(ws, plan, by=by))
    except JobRunning:
        raise Refused(429, "another job of this tenant runs now; send it again soon") from None
