"""The daily ledgers of a namespace (live and archived, newest first), one day rendered with
where each bullet came from, and a memory file at a line (what a memory citation opens)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Final

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import ToolInputError
from memdir.server.ui._blocks import blocks_of
from memdir.server.ui._pages import CurrentViewer, ui_namespace
from memdir.server.ui._paging import number, window
from memdir.server.ui._render import page
from memdir.server.ui._session import Refused
from memdir.server.ui._sources import bullet_lines, ledger_origins, read_lines, viewable_path
from memdir.store.workspace import ARCHIVE_DIR, MEMORY_AREA, MEMORY_DIR
from memdir.tools._core import parse_citation

__all__ = ["router"]

router = APIRouter(prefix="/ui/ns/{ns}", include_in_schema=False)

LEDGERS_PER_PAGE: Final = 50
_DAY: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
FILE_LINES: Final = 200
DAY_LINES: Final = 500
"""Lines of a ledger a day's page shows (a busy day holds thousands)."""
"""Lines of a file one page shows (a window around the cited line)."""


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One ledger of the list."""

    day: dt.date
    path: str
    size: int
    archived: bool


@router.get("/ledgers")
def ledgers(request: Request, ns: str, viewer: CurrentViewer, start: str = "") -> Response:
    """The daily ledgers, live and archived, newest first, a page at a time."""
    ws = ui_namespace(request, viewer, ns)
    found = [(day, rel, False) for day, rel in ws.ledgers()]
    found += [(day, rel, True) for day, rel in ws.ledgers(archived=True)]
    found.sort(key=lambda item: (item[0], not item[2]), reverse=True)
    shown = window(len(found), LEDGERS_PER_PAGE, start=number(start, "start"))
    rows = []
    for day, rel, archived in found[shown.first - 1 : shown.last]:
        st = ws.stat(rel, area=MEMORY_AREA)
        if st is not None:  # archived or deleted since the listing
            rows.append(LedgerRow(day, rel, st.size, archived))
    return page(request, "ledgers.html", viewer, title="Ledgers", ns=ns, rows=rows, shown=shown)


@router.get("/ledgers/{day}")
def ledger(request: Request, ns: str, day: str, viewer: CurrentViewer, start: str = "") -> Response:
    """One day's ledger (from the archive when it was archived), each bullet with where it
    came from, :data:`DAY_LINES` lines a page."""
    ws = ui_namespace(request, viewer, ns)
    try:
        date = dt.date.fromisoformat(day) if _DAY.fullmatch(day) else None
    except ValueError:
        date = None
    if date is None:
        raise Refused(400, "a ledger's day is written YYYY-MM-DD")
    rel, lines = read_lines(ws, f"{MEMORY_DIR}/{date.isoformat()}.md")
    shown = window(len(lines), DAY_LINES, start=number(start, "start"))
    part = lines[shown.first - 1 : shown.last]
    return page(
        request,
        "ledger.html",
        viewer,
        title=f"Ledger {date.isoformat()}",
        ns=ns,
        day=date.isoformat(),
        path=rel,
        archived=rel.startswith(ARCHIVE_DIR + "/"),
        blocks=blocks_of("\n".join(part), first=shown.first),
        origins=ledger_origins(ws, ns, rel, part, shown.first),
        shown=shown,
    )


@dataclass(frozen=True, slots=True)
class Row:
    """One numbered line of a file page."""

    number: int
    text: str
    cited: bool
    bullet: bool


@router.get("/file")
def file(
    request: Request,
    ns: str,
    viewer: CurrentViewer,
    path: str = "",
    line: str = "",
    start: str = "",
) -> Response:
    """A memory file as numbered lines (``MEMORY.md``, ``memory/*.md``,
    ``memory/archive/*.md``): the cited ``line`` marked, a window of lines around it."""
    ws = ui_namespace(request, viewer, ns)
    if not path:
        raise Refused(400, "say which file: file?path=MEMORY.md&line=3")
    try:
        cited = parse_citation(path)
    except ToolInputError as exc:
        raise Refused(400, str(exc)) from None
    requested = viewable_path(ws, cited.path)
    at = number(line, "line") or cited.start
    rel, lines = read_lines(ws, requested)
    shown = window(len(lines), FILE_LINES, start=number(start, "start"), focus=at)
    part = lines[shown.first - 1 : shown.last]
    bullets = bullet_lines(part, shown.first)
    rows = [Row(n, lines[n - 1], n == at, n in bullets) for n in range(shown.first, shown.last + 1)]
    return page(
        request,
        "file.html",
        viewer,
        title=rel,
        ns=ns,
        path=rel,
        requested=requested,
        rows=rows,
        shown=shown,
        at=at,
        origins=ledger_origins(ws, ns, rel, part, shown.first),
    )
