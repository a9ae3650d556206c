"""Following a memory bullet down to the conversation it came from.

:func:`why` answers for one line of ``MEMORY.md`` or of a daily ledger with a tree of
:class:`Link`: the bullet, the ledger lines it was consolidated from, and for each of those
the session-log lines (or the person or program that added it). :class:`SourceFinder` gives
the first level of that tree as citations, for search hits and reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memdir.errors import SessionLogError, ToolInputError
from memdir.provenance._parsed import cached_parse
from memdir.provenance._records import (
    MEMORY_RECORDS_REL,
    LedgerRecord,
    MemoryRecord,
    bullet_id,
    ledger_records_rel,
    load_memory_records,
    read_ledger_records,
    reconcile,
)
from memdir.sessions import SessionLog
from memdir.store.ledger import Bullet, parse_bullets
from memdir.store.workspace import MEMORY_DIR, MEMORY_MD, Workspace
from memdir.tools._core import parse_citation, read_memory

if TYPE_CHECKING:
    from memdir.index import SearchHit

__all__ = ["Link", "SourceFinder", "render", "why", "with_sources"]

_ADDED = {
    "person": "added by a person (memdir add)",
    "model": "added by the model (memory_add)",
    "client": "added through the API",
}
_KIND = {
    "consolidated": "consolidated",
    "person": "written by a person",
    "edited": "edited by a person (sources of the bullet it rewords)",
    "unsourced": "unsourced (no valid source: written by hand, or by a model without one)",
}
_TEXT = 240
_WINDOW_AFTER = 30
"""Lines read past a cited ledger line, for the rest of its bullet."""


@dataclass(frozen=True, slots=True)
class Link:
    """One step of a provenance chain.

    Attributes:
        citation: where it is (``MEMORY.md#L12``, ``memory/2026-11-30.md#L5``,
            ``sessions/s1.log.jsonl#L40``), or ``""`` when it is gone.
        text: its text (a message clipped to a few hundred characters).
        origin: ``user``, ``model``, ``tool``, ``ingest``, ``person``, ``client`` or
            ``unknown``.
        note: how it came to be (``consolidated``, ``flush of session s1``, ``added by a
            person (memdir add)``, ``unsourced…``, ``no longer in the ledger``…).
        sources: the links it came from.
    """

    citation: str
    text: str
    origin: str
    note: str
    sources: tuple[Link, ...] = field(default=())


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _TEXT else flat[: _TEXT - 1] + "…"


def _bullet_at(bullets: Sequence[Bullet], line: int) -> Bullet | None:
    return next((b for b in bullets if b.first_line + 1 <= line <= b.last_line + 1), None)


def why(ws: Workspace, target: str) -> Link:
    """The provenance chain of the bullet at ``target`` (``MEMORY.md#L12``,
    ``memory/2026-11-30.md#L3``, ``MEMORY.md:12``).

    Raises:
        ToolInputError: ``target`` has no line, is not a memory file, or the line holds no
            bullet.
        WorkspaceError: the file cannot be read.
    """
    cited = parse_citation(target)
    if cited.start is None:
        raise ToolInputError(f"give a line, as in MEMORY.md#L12 or {MEMORY_DIR}/2026-11-30.md#L3")
    excerpt = read_memory(ws, cited.path, 1, None)
    text = "\n".join(excerpt.lines)
    bullet = _bullet_at(parse_bullets(text), cited.start)
    if bullet is None:
        raise ToolInputError(f"{excerpt.path} line {cited.start} is not a bullet")
    if excerpt.path == MEMORY_MD:
        return _memory_link(ws, text, bullet)
    name = excerpt.path.rsplit("/", 1)[-1]
    return _ledger_link(ws, name, bullet.first_line + 1, bullet_id(bullet.text), text)


def _memory_record(ws: Workspace, text: str, bullet: Bullet) -> MemoryRecord:
    records = reconcile(text, load_memory_records(ws), "")
    for other, record in zip(parse_bullets(text), records, strict=True):
        if other.first_line == bullet.first_line:
            return record
    raise AssertionError("the bullet is in the file")  # pragma: no cover


def _memory_link(ws: Workspace, text: str, bullet: Bullet) -> Link:
    record = _memory_record(ws, text, bullet)
    ledgers: dict[str, str | None] = {}
    sources = []
    for ref in record.sources:
        if ref.file not in ledgers:
            ledgers[ref.file] = _ledger_text(ws, ref.file)
        sources.append(_ledger_link(ws, ref.file, ref.line, ref.id, ledgers[ref.file]))
    return Link(
        citation=f"{MEMORY_MD}#L{bullet.first_line + 1}",
        text=_clip(bullet.text),
        origin=record.origin,
        note=_KIND.get(record.kind, record.kind),
        sources=tuple(sources),
    )


def _ledger_text(ws: Workspace, name: str) -> str | None:
    try:
        return "\n".join(read_memory(ws, f"{MEMORY_DIR}/{name}", 1, None).lines)
    except Exception:  # deleted, unreadable: the chain says so
        return None


def _ledger_link(ws: Workspace, name: str, line: int, ident: str, text: str | None) -> Link:
    citation = f"{MEMORY_DIR}/{name}#L{line}"
    bullets = parse_bullets(text) if text is not None else []
    here = _bullet_at(bullets, line)
    if here is None or bullet_id(here.text) != ident:
        here = next((b for b in bullets if bullet_id(b.text) == ident), None)
        if here is None:
            return Link("", "", "unknown", f"no longer in {MEMORY_DIR}/{name} (line {line})")
        citation = f"{MEMORY_DIR}/{name}#L{here.first_line + 1}"
    record = _ledger_record(ws, name, line, ident)
    if record is None:
        return Link(citation, _clip(here.text), "unknown", "no provenance record")
    if record.via == "add":
        return Link(citation, _clip(here.text), record.origin, _ADDED.get(record.origin, "added"))
    return Link(
        citation,
        _clip(here.text),
        record.origin,
        f"flush of session {record.session}",
        _messages(ws, record),
    )


def _ledger_record(ws: Workspace, name: str, line: int, ident: str) -> LedgerRecord | None:
    records = [r for r in read_ledger_records(ws, name) if r.id == ident]
    return next((r for r in records if r.line == line), records[0] if records else None)


def _messages(ws: Workspace, record: LedgerRecord) -> tuple[Link, ...]:
    if record.session is None:
        return ()
    try:
        log = SessionLog(ws, record.session)
        found = log.read().records
    except SessionLogError:
        found = []
    rel = f"sessions/{record.session}.log.jsonl"
    by_id = {r.msg.id: r for r in found}
    wanted = list(record.messages)
    if not wanted and record.span is not None:
        lines = [by_id[i].line for i in record.span if i in by_id]
        if len(lines) == 2:
            return (
                Link(
                    f"{rel}#L{lines[0]}-L{lines[1]}",
                    "",
                    record.origin,
                    "the stretch of conversation it was extracted from",
                ),
            )
        wanted = list(record.span)
    out = []
    for ident in wanted:
        hit = by_id.get(ident)
        if hit is None:
            out.append(Link("", "", record.origin, f"message {ident} is not in {rel} (yet)"))
            continue
        role = hit.msg.role
        body = hit.msg.text or "\n".join(r.text for r in hit.msg.tool_results)
        origin = (
            "tool"
            if role == "tool"
            else {"user": "user", "assistant": "model"}.get(role, "unknown")
        )
        out.append(Link(f"{rel}#L{hit.line}", _clip(body), origin, f"{role} message"))
    return tuple(out)


def _placed(bullets: Sequence[Bullet], first: int) -> list[Bullet]:
    """``bullets`` parsed from text that starts at line ``first`` of its file, numbered as
    in the file."""
    shift = first - 1
    # The constructor, not ``dataclasses.replace``: a search places fifty hits' bullets.
    return [Bullet(b.text, b.heading, b.first_line + shift, b.last_line + shift) for b in bullets]


class SourceFinder:
    """Cheap first-level sources of memory lines, for search hits and reads.

    One finder reads each file and sidecar once. It cites ledger lines for ``MEMORY.md``,
    and for a ledger line the session log with the message ids (``memdir why`` turns them
    into line numbers); session logs are not read.
    """

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._files: dict[str, tuple[list[Bullet], list[MemoryRecord] | None]] = {}
        self._ledgers: dict[str, dict[str, list[LedgerRecord]]] = {}
        self._lines: dict[str, tuple[str, ...]] = {}

    def _file(self, path: str) -> tuple[list[Bullet], list[MemoryRecord] | None]:
        if path not in self._files:

            def parse() -> tuple[list[Bullet], list[MemoryRecord] | None]:
                text = "\n".join(read_memory(self.ws, path, 1, None).lines)
                records = (
                    reconcile(text, load_memory_records(self.ws), "") if path == MEMORY_MD else None
                )
                return parse_bullets(text), records

            sidecars = (MEMORY_RECORDS_REL,) if path == MEMORY_MD else ()
            self._files[path] = cached_parse(self.ws, (path, *sidecars), parse)
        return self._files[path]

    def sources(
        self, path: str, first: int, last: int, content: str | None = None
    ) -> tuple[str, ...]:
        """Citations of where the bullets on lines ``first..last`` of ``path`` came from.

        ``MEMORY.md``: ``memory/<day>.md#L<n>``; a ledger: ``sessions/<id>.log.jsonl#<message
        id>``, or how it was added (``added by a person (memdir add)``…); ``unsourced`` when
        nothing is known. ``content``: the text of those lines, when the caller has it (a
        search hit's), so a ledger need not be read. Never raises: provenance is an aid to a
        read, not its failure.
        """
        try:
            return self._sources(path, first, last, content)
        except Exception:
            return ()

    def _given(self, content: str, first: int) -> list[Bullet] | None:
        """The bullets of a hit's own text (a search unit is a whole bullet with its
        continuation lines), placed at line ``first``; ``None`` if it does not start one."""
        bullets = parse_bullets(content)
        if not bullets or bullets[0].first_line != 0:
            return None
        return _placed(bullets, first)

    def _window(self, path: str, first: int, last: int) -> list[Bullet] | None:
        """The bullets that start on lines ``first..last`` of a ledger, read from those lines
        and the few after them, not from the whole file (a search cites a few lines of
        ledgers thousands of lines long); ``None`` when the window cannot tell (the lines
        start inside a bullet, or one runs past the window)."""
        if path not in self._lines:
            self._lines[path] = read_memory(self.ws, path, 1, None).lines
        lines = self._lines[path]
        window = lines[first - 1 : last + _WINDOW_AFTER]
        bullets = parse_bullets("\n".join(window))
        if not bullets or bullets[0].first_line != 0:
            return None
        span = last - first
        kept = [b for b in bullets if b.first_line <= span]
        if kept[-1].last_line >= len(window) - 1 and last + _WINDOW_AFTER < len(lines):
            return None
        return _placed(kept, first)

    def _sources(self, path: str, first: int, last: int, content: str | None) -> tuple[str, ...]:
        window = None
        if path != MEMORY_MD:
            if content is not None and not self._records(path):
                # A ledger without records: a span that starts a bullet is unsourced, read
                # from its first line (a hit of a long message is not parsed whole).
                if self._given(content.partition("\n")[0], first):
                    return ("unsourced",)
            elif content is not None:
                window = self._given(content, first)
            if window is None:
                window = self._window(path, first, last)
        bullets, records = (window, None) if window is not None else self._file(path)
        out: list[str] = []
        for n, bullet in enumerate(bullets):
            if bullet.first_line + 1 > last or bullet.last_line + 1 < first:
                continue
            if records is not None:
                record = records[n]
                out += [ref.citation for ref in record.sources] or [
                    "written by a person" if record.kind == "person" else "unsourced"
                ]
            else:
                out += self._ledger_sources(path, bullet)
        return tuple(dict.fromkeys(out))

    def _records(self, path: str) -> dict[str, list[LedgerRecord]]:
        """The records of ledger ``path``'s bullets, by bullet id."""
        name = path.rsplit("/", 1)[-1]
        if name not in self._ledgers:
            rel = ledger_records_rel(name)
            self._ledgers[name] = cached_parse(
                self.ws, (rel,), lambda: _by_id(read_ledger_records(self.ws, name)), missing={}
            )
        return self._ledgers[name]

    def _ledger_sources(self, path: str, bullet: Bullet) -> list[str]:
        records = self._records(path)
        if not records:
            return ["unsourced"]  # no bullet of the ledger has a record: no need to hash it
        mine = records.get(bullet_id(bullet.text), [])
        record = next((r for r in mine if r.line == bullet.first_line + 1), None)
        record = record or (mine[0] if mine else None)
        if record is None:
            return ["unsourced"]
        if record.via == "add" or record.session is None:
            return [_ADDED.get(record.origin, "added")]
        rel = f"sessions/{record.session}.log.jsonl"
        ids = record.messages or (record.span or ())
        return [f"{rel}#{i}" for i in ids] or [rel]


def _by_id(records: Sequence[LedgerRecord]) -> dict[str, list[LedgerRecord]]:
    """A ledger's records by bullet id, each id's in file order (a hit's are looked up, not
    searched for)."""
    out: dict[str, list[LedgerRecord]] = {}
    for record in records:
        out.setdefault(record.id, []).append(record)
    return out


def with_sources(ws: Workspace, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """``hits`` with their :attr:`~memdir.index.SearchHit.sources` filled in."""
    if not hits:
        return list(hits)
    finder = SourceFinder(ws)
    return [
        dataclasses.replace(h, sources=finder.sources(h.path, h.line_number, h.line_end, h.content))
        for h in hits
    ]


def render(link: Link, indent: int = 0) -> str:
    """The chain as indented lines: ``citation  text  [origin; note]``."""
    pad = "  " * indent
    head = link.citation or "(gone)"
    text = f"  {link.text}" if link.text else ""
    lines = [f"{pad}{head}{text}  [{link.origin}; {link.note}]"]
    lines += [render(child, indent + 1) for child in link.sources]
    return "\n".join(lines)
