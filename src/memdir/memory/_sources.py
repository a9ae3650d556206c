"""The sources of one consolidation batch: ids for the request, records for the answer.

:class:`SourceBook` gives each new ledger entry an id ``e<n>`` (its ledger line and that
line's record) and each bullet of the current ``MEMORY.md`` an id ``m<n>`` (its record). The
request shows them as ``[src: …]`` markers (:mod:`memdir.memory._markers`); from the
answer's markers it builds each new bullet's :class:`MemoryRecord`: ids it did not give are
dropped (and counted), and a bullet left with no valid id is ``unsourced`` unless its text is
exactly that of an entry or of a bullet already in ``MEMORY.md`` (then it is that bullet).
:meth:`SourceBook.guard` quotes what an untrusted origin tried to make an instruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from memdir.memory._entries import parse_bullets
from memdir.memory._markers import add_marker, mark_bullets
from memdir.provenance._records import (
    LedgerRecord,
    MemoryRecord,
    SourceRef,
    bullet_id,
    fingerprint,
    load_memory_records,
    read_ledger_records,
    reconcile,
)
from memdir.provenance._trust import guard, risk
from memdir.store.ledger import normalize_bullet
from memdir.store.workspace import Workspace

__all__ = ["Entry", "SourceBook"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One new ledger bullet as the batch sends it."""

    alias: str
    text: str
    ref: SourceRef


@dataclass(slots=True)
class SourceBook:
    """The ids of one consolidation request and what they stand for."""

    at: str
    entries: dict[str, Entry] = field(default_factory=dict)
    current: dict[str, MemoryRecord] = field(default_factory=dict)  # m<n> -> record
    by_key: dict[str, MemoryRecord] = field(default_factory=dict)  # current text -> record
    entry_keys: dict[str, str] = field(default_factory=dict)  # entry text -> e<n>
    invented: int = 0
    unsourced: int = 0
    quoted: int = 0

    @classmethod
    def open(cls, ws: Workspace, current: str, at: str) -> SourceBook:
        """A book with an id for every bullet of ``current`` (records reconciled)."""
        book = cls(at=at)
        records = load_memory_records(ws)
        for n, (bullet, record) in enumerate(
            zip(parse_bullets(current), reconcile(current, records, at), strict=True), 1
        ):
            book.current[f"m{n}"] = record
            book.by_key[bullet.key] = record
        return book

    def mark_current(self, current: str) -> str:
        """``current`` with each bullet's ``m<n>`` marker."""
        bullets = parse_bullets(current)
        return mark_bullets(current, {b.first_line: [f"m{n}"] for n, b in enumerate(bullets, 1)})

    def add_entries(
        self, ws: Workspace, name: str, first_line: int, text: str, clip: Callable[[str], str]
    ) -> tuple[list[str], str]:
        """Give ids to the bullets of a ledger slice.

        Args:
            ws: the workspace (for the ledger's sidecar).
            name: the ledger's name (``2026-11-30.md``).
            first_line: the ledger line the slice starts on (1-based).
            text: the slice.
            clip: what a line is sent as (a long one clipped, with a pointer to its ledger).

        Returns:
            The ids of the slice's bullets, in order, and the slice as the request shows it
            (each bullet's last line clipped and ending with its ``[src: e<n>]``).
        """
        by_line: dict[int, LedgerRecord] = {}
        by_id: dict[str, LedgerRecord] = {}
        for written in read_ledger_records(ws, name):
            by_line[written.line] = written
            by_id.setdefault(written.id, written)
        lines = text.split("\n")
        aliases: list[str] = []
        ends: dict[int, str] = {}
        for bullet in parse_bullets(text):
            alias = f"e{len(self.entries) + 1}"
            line = first_line + bullet.first_line
            ident = bullet_id(bullet.text)
            record = by_line.get(line)
            if record is None or record.id != ident:
                record = by_id.get(ident)
            ref = SourceRef(
                file=name, line=line, id=ident, origin=record.origin if record else "unknown"
            )
            self.entries[alias] = Entry(alias, bullet.text, ref)
            self.entry_keys.setdefault(bullet.key, alias)
            aliases.append(alias)
            ends[bullet.last_line] = alias
        out = [
            add_marker(clip(line), [ends[i]]) if i in ends else clip(line)
            for i, line in enumerate(lines)
        ]
        return aliases, "\n".join(out)

    def resolve(self, text: str, ids: Sequence[str]) -> MemoryRecord:
        """The record of an answer bullet, from the ids it was given (unknown ids dropped)."""
        key = normalize_bullet(text)
        refs: list[SourceRef] = []
        carried: list[MemoryRecord] = []
        for name in ids:
            if name in self.entries:
                refs.append(self.entries[name].ref)
            elif name in self.current:
                carried.append(self.current[name])
                refs += self.current[name].sources
            else:
                self.invented += 1
        if not refs and not carried:
            if key in self.by_key:  # the same text as a bullet already there: that bullet
                carried.append(self.by_key[key])
            elif key in self.entry_keys:  # the same text as an entry: that entry
                refs.append(self.entries[self.entry_keys[key]].ref)
        unique = tuple(dict.fromkeys(refs))
        ident, words = bullet_id(text), fingerprint(text)
        if unique and (len(carried) != 1 or any(n in self.entries for n in ids)):
            return MemoryRecord(
                id=ident, kind="consolidated", sources=unique, words=words, at=self.at
            )
        if carried:
            first = carried[0]
            return MemoryRecord(id=ident, kind=first.kind, sources=unique, words=words, at=first.at)
        if unique:
            return MemoryRecord(
                id=ident, kind="consolidated", sources=unique, words=words, at=self.at
            )
        return MemoryRecord(id=ident, kind="unsourced", words=words, at=self.at)

    def guard(
        self, text: str, ids_by_key: Mapping[str, Sequence[str]]
    ) -> tuple[str, dict[str, list[str]]]:
        """Quote every bullet an untrusted origin made an instruction (see :func:`guard`).

        Returns the text and the ids by the (possibly quoted) bullets' keys. A bullet already
        in ``MEMORY.md`` as it is keeps its form unless it is an injection.
        """
        lines = text.split("\n")
        out_ids: dict[str, list[str]] = {}
        for bullet in parse_bullets(text):
            ids = list(ids_by_key.get(bullet.key, ()))
            record = self.resolve(bullet.text, ids)
            origin = record.origin if record.kind != "unsourced" else "unknown"
            kind = risk(bullet.text)
            # A bullet already in MEMORY.md as it is was judged when it came in (or a person
            # wrote it): only an injection is quoted now.
            keep = kind is None or (kind == "directive" and bullet.key in self.by_key)
            new = bullet.text if keep else guard(bullet.text, origin)
            if new != bullet.text:
                self.quoted += 1
                head = lines[bullet.first_line]
                indent = head[: len(head) - len(head.lstrip())]
                lines[bullet.first_line] = f"{indent}- {new}"
                for i in range(bullet.first_line + 1, bullet.last_line + 1):
                    lines[i] = "\x00"
            out_ids.setdefault(normalize_bullet(new), []).extend(ids)
        return "\n".join(ln for ln in lines if ln != "\x00"), out_ids

    def records(self, final: str, ids_by_key: Mapping[str, Sequence[str]]) -> list[MemoryRecord]:
        """The record of every bullet of the file to be written."""
        self.invented = 0
        out = [self.resolve(b.text, ids_by_key.get(b.key, ())) for b in parse_bullets(final)]
        self.unsourced = sum(r.kind == "unsourced" for r in out)
        return out
