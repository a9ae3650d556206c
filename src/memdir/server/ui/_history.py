"""The history of a namespace's ``MEMORY.md``: every kept version with who made it, the
consolidation runs and edits, the diff between any two versions, and restoring one.

A version is named by its file in ``memory/.history/`` (``MEMORY.<UTC instant>.md``) or
``current``; a name from an address is read only if the history directory holds it. A
restore is an edit by the person: a compare-and-swap against the version of ``MEMORY.md``
the page showed, the file it replaces kept in the history by the library.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import anyio
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import ToolInputError, VersionConflict
from memdir.memory import replace_memory_md
from memdir.memory._history import read_log
from memdir.memory._versions import (
    CURRENT,
    Maker,
    made_by,
    read_version,
    replaced_at,
    version_names,
)
from memdir.server.auth import Scope
from memdir.server.ui._diff import diff_lines
from memdir.server.ui._links import ns_url
from memdir.server.ui._pages import CurrentViewer, read_form, require, ui_namespace
from memdir.server.ui._render import page, redirect
from memdir.server.ui._session import Refused, Viewer
from memdir.store.workspace import MEMORY_MD, Workspace

__all__ = ["Version", "choices", "page_number", "router", "version_of"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

VERSIONS_PER_PAGE: Final = 20
RUNS_PER_PAGE: Final = 30


@dataclass(frozen=True, slots=True)
class Version:
    """One version of ``MEMORY.md`` as a page shows it.

    Attributes:
        name: its file name in ``memory/.history/``, or ``current``.
        replaced: when it was replaced (``None``: the current file).
        maker: who made it (``None``: not recorded).
    """

    name: str
    replaced: datetime | None
    maker: Maker | None

    @property
    def current(self) -> bool:
        """Whether this is ``MEMORY.md`` as it is now."""
        return self.name == CURRENT


def version_of(name: str, data: bytes, records: list[dict[str, Any]]) -> Version:
    """The version ``name`` holding ``data``, its maker read from the log ``records``."""
    return Version(name=name, replaced=replaced_at(name), maker=made_by(name, data, records))


def page_number(value: str, pages: int) -> int:
    """The page ``value`` asks for (1-based, at most ``pages``).

    Raises:
        Refused: 400, not a positive whole number.
    """
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise Refused(400, "a page is a whole number from 1")
    return min(int(value), max(pages, 1))


def _pages(count: int, size: int) -> int:
    return max(1, -(-count // size))


def choices(names: list[str]) -> list[tuple[str, str]]:
    """The versions a form offers: (name, what a person reads), ``current`` first."""
    found = [(CURRENT, "MEMORY.md now")]
    seen: dict[str, int] = {}
    for name in names:
        at = replaced_at(name)
        text = f"replaced {at:%Y-%m-%d %H:%M:%S} UTC" if at is not None else name
        seen[text] = seen.get(text, 0) + 1
        found.append((name, text if seen[text] == 1 else f"{text} ({seen[text]})"))
    return found


def _text(ws: Workspace, name: str) -> bytes:
    """Version ``name``'s bytes; a name from an address that is not a kept version's is
    refused (400: not a version's name, ``../``; 404: not kept)."""
    try:
        return read_version(ws, name)
    except ToolInputError as exc:
        status = 404 if str(exc).startswith("no version") else 400
        raise Refused(status, str(exc)) from None


@router.get("/history")
def history(
    request: Request,
    ns: str,
    viewer: CurrentViewer,
    versions: str = "",
    runs: str = "",
) -> Response:
    """Every kept version of ``MEMORY.md`` (newest first), who made each, and the
    consolidation runs and edits, newest first; both paginated."""
    ws = ui_namespace(request, viewer, ns)
    records = read_log(ws)
    names = version_names(ws)
    current = ws.read_versioned(MEMORY_MD)
    listed = ([CURRENT] if current is not None else []) + names
    number = page_number(versions, _pages(len(listed), VERSIONS_PER_PAGE))
    start = (number - 1) * VERSIONS_PER_PAGE
    shown = [
        version_of(n, _text(ws, n), records) for n in listed[start : start + VERSIONS_PER_PAGE]
    ]
    runs_number = page_number(runs, _pages(len(records), RUNS_PER_PAGE))
    newest = list(reversed(records))
    run_start = (runs_number - 1) * RUNS_PER_PAGE
    return page(
        request,
        "history.html",
        viewer,
        title="History of MEMORY.md",
        ns=ns,
        versions=shown,
        names=listed,
        choices=choices(names),
        page_number=number,
        pages=_pages(len(listed), VERSIONS_PER_PAGE),
        runs=newest[run_start : run_start + RUNS_PER_PAGE],
        runs_number=runs_number,
        runs_pages=_pages(len(records), RUNS_PER_PAGE),
        base=current.version if current is not None else "",
        can_write=viewer.can(Scope.WRITE),
    )


@router.get("/history/diff")
def diff(request: Request, ns: str, viewer: CurrentViewer, a: str = "", b: str = "") -> Response:
    """The unified diff from version ``a`` to version ``b`` (default: the newest kept
    version to ``current``), a form to pick two, and a button to restore either."""
    ws = ui_namespace(request, viewer, ns)
    return _diff_page(request, ws, viewer, ns, a, b)


def _diff_page(
    request: Request,
    ws: Workspace,
    viewer: Viewer,
    ns: str,
    a: str,
    b: str,
    *,
    status: int = 200,
    message: str = "",
) -> Response:
    names = version_names(ws)
    a = a or (names[0] if names else CURRENT)
    b = b or CURRENT
    old, new = _text(ws, a), _text(ws, b)
    records = read_log(ws)
    current = ws.read_versioned(MEMORY_MD)
    return page(
        request,
        "diff.html",
        viewer,
        status=status,
        title="Compare versions of MEMORY.md",
        ns=ns,
        a=version_of(a, old, records),
        b=version_of(b, new, records),
        lines=diff_lines(old.decode("utf-8", "replace"), new.decode("utf-8", "replace")),
        choices=choices(names),
        base=current.version if current is not None else "",
        can_write=viewer.can(Scope.WRITE),
        message=message,
    )


@router.post("/restore")
async def restore(request: Request, ns: str, viewer: CurrentViewer) -> Response:
    """Make a kept version ``MEMORY.md`` again, if ``MEMORY.md`` is still at ``base`` (the
    version the page showed); else the diff to what is there now, and nothing written."""
    form = await read_form(request, viewer)
    require(viewer, Scope.WRITE, "Restoring a version of MEMORY.md")
    name, base = str(form.get("version", "")), str(form.get("base", ""))

    def work() -> Response:
        ws = ui_namespace(request, viewer, ns)
        if name == CURRENT:
            raise Refused(400, "pick an earlier version to restore; this one is MEMORY.md now")
        text = _text(ws, name).decode("utf-8", "replace")
        try:
            done = replace_memory_md(ws, text, version=base or None, by="person")
        except VersionConflict:
            message = (
                "MEMORY.md changed since you opened this page, so nothing was restored. "
                "Here is how that version differs from MEMORY.md now; restore it again if you "
                "still want it."
            )
            return _diff_page(request, ws, viewer, ns, name, CURRENT, status=409, message=message)
        except ToolInputError as exc:
            raise Refused(400, str(exc)) from None
        notice = "restored" if done.changed else "unchanged"
        return redirect(ns_url(ns, "", notice=notice, masked=done.masked or None))

    return await anyio.to_thread.run_sync(work)
