"""Reading a memory file for a page, and where each bullet of a ledger came from.

A page reads only ``MEMORY.md``, ``memory/*.md`` and ``memory/archive/*.md``: the sidecars,
histories and cursors under ``memory/.*`` are the library's, not a page's. A ledger cited
before it was archived is read from the archive (as ``memory_get`` does).

Where a ledger's bullets came from is read from its provenance sidecar once a page
(:func:`ledger_origins`), never once a bullet: a flushed bullet links to the conversation
message it was extracted from by the message's id (the transcript page finds its line), an
added one says who added it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from memdir.errors import ToolInputError, WorkspaceError
from memdir.provenance._records import LedgerRecord, bullet_id, read_ledger_records
from memdir.server.ui._links import ns_url
from memdir.server.ui._session import Refused
from memdir.store.ledger import parse_bullets
from memdir.store.workspace import MEMORY_AREA, MEMORY_DIR, Workspace
from memdir.tools._core import memory_relpath, read_memory

__all__ = ["Origin", "bullet_lines", "ledger_origins", "read_lines", "viewable_path"]

_VIEWABLE: Final = re.compile(r"MEMORY\.md|memory/(?:archive/)?[^/.][^/]*\.md")
_ADDED: Final = {
    "person": "added by a person",
    "model": "added by the model (memory_add)",
    "client": "added through the API",
}


def viewable_path(ws: Workspace, path: str) -> str:
    """``path`` (a memory path, a citation's path) workspace-relative, if a page may show it.

    Raises:
        Refused: 400 for a path outside ``MEMORY.md``, ``memory/*.md`` and
            ``memory/archive/*.md`` (nothing is read).
    """
    try:
        rel = memory_relpath(ws, path)
    except (ToolInputError, WorkspaceError):
        rel = ""
    if not _VIEWABLE.fullmatch(rel):
        raise Refused(400, "only MEMORY.md, memory/*.md and memory/archive/*.md can be shown")
    return rel


def read_lines(ws: Workspace, rel: str) -> tuple[str, list[str]]:
    """The lines of memory file ``rel`` and the file they were read from (``rel``, or the
    archived ledger of that name).

    Raises:
        Refused: 404 when neither exists.
    """
    try:
        found = read_memory(ws, rel, 1, None)
    except WorkspaceError as exc:
        if ws.stat(rel, area=MEMORY_AREA) is not None:  # there, and empty
            return rel, []
        raise Refused(404, str(exc)) from None
    return found.path, list(found.lines)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one ledger bullet came from.

    Attributes:
        note: in words (``conversation billing-migration``, ``added by a person``...).
        origin: ``user``, ``model``, ``tool``, ``ingest``, ``person``, ``client``,
            ``unknown``.
        url: the conversation message it was extracted from (``""``: none to open).
    """

    note: str
    origin: str
    url: str = ""


def ledger_origins(
    ws: Workspace, ns: str, rel: str, lines: list[str], first: int = 1
) -> dict[int, Origin]:
    """The origin of each bullet of ``lines``, lines ``first..`` of the ledger ``rel``, by
    its first line (1-based); ``{}`` for a file that is not a ledger. One read of the
    ledger's sidecar."""
    if not rel.startswith(MEMORY_DIR + "/"):
        return {}
    try:
        records = read_ledger_records(ws, rel.rsplit("/", 1)[-1])
    except WorkspaceError:  # provenance is an aid to the page, never its failure
        records = []
    by_id: dict[str, list[LedgerRecord]] = {}
    for written in records:
        by_id.setdefault(written.id, []).append(written)
    out: dict[int, Origin] = {}
    for bullet in parse_bullets("\n".join(lines)):
        line = bullet.first_line + first
        mine = by_id.get(bullet_id(bullet.text), [])
        found = next((r for r in mine if r.line == line), mine[0] if mine else None)
        out[line] = _origin(ns, found)
    return out


def _origin(ns: str, record: LedgerRecord | None) -> Origin:
    if record is None:
        return Origin("no provenance record", "unknown")
    if record.via == "add" or record.session is None:
        return Origin(_ADDED.get(record.origin, "added"), record.origin)
    message = (record.messages or record.span or ("",))[0]
    url = ns_url(ns, f"sessions/{quote(record.session, safe='')}", msg=message or None)
    return Origin(f"conversation {record.session}", record.origin, url)


def bullet_lines(lines: list[str], first: int = 1) -> set[int]:
    """The first line (1-based) of each bullet of ``lines``, lines ``first..`` of a file."""
    return {b.first_line + first for b in parse_bullets("\n".join(lines))}
