"""The provenance sidecar: records kept next to the memory files, keyed by bullet id.

A bullet's id is a hash of its normalised text (:func:`bullet_id`), so it survives moves,
re-wrapping, a new list marker or a change of case, and needs no mark in the Markdown. Two
kinds of record live in ``memory/.provenance/`` (store files like any other, so they travel
with an export and live in PostgreSQL on that store):

- ``<ledger>.jsonl`` (``2026-11-30.md.jsonl``): one JSON line per bullet written to that
  ledger by a flush or an add: its line, its id, where it came from (``origin``), how
  (``via``), and for a flush the session and the message ids it was extracted from.
  Append-only, like the ledger.
- ``MEMORY.md.json``: one record per bullet of ``MEMORY.md``: how it came to be (``kind``:
  ``consolidated``, ``person``, ``edited``, ``unsourced``), the ledger lines it was
  consolidated from (file, line, id, origin), and a fingerprint (short hashes of its words,
  never its text) that recognises the bullet after a person rewords it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memdir.provenance._trust import ORIGINS, least_trusted
from memdir.store.ledger import bullet_words, normalize_bullet, parse_bullets
from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = [
    "MEMORY_RECORDS_REL",
    "PROVENANCE_DIR",
    "LedgerRecord",
    "MemoryRecord",
    "SourceRef",
    "append_ledger_records",
    "bullet_id",
    "fingerprint",
    "ledger_records_rel",
    "load_memory_records",
    "match_record",
    "read_ledger_records",
    "reconcile",
    "save_memory_records",
    "save_records",
]

log = logging.getLogger("memdir.provenance")

PROVENANCE_DIR = f"{MEMORY_DIR}/.provenance"
MEMORY_RECORDS_REL = f"{PROVENANCE_DIR}/MEMORY.md.json"
KINDS = ("consolidated", "person", "edited", "unsourced")
_EDITED = 0.5  # share of a recorded bullet's words a reworded bullet must keep


def bullet_id(text: str) -> str:
    """The stable id of a bullet: ``b`` and 16 hex digits of the hash of its normalised text."""
    return "b" + hashlib.sha256(normalize_bullet(text).encode("utf-8")).hexdigest()[:16]


def fingerprint(text: str) -> tuple[str, ...]:
    """Short hashes of the words of a bullet (enough to match a rewording, not the text)."""
    return tuple(sorted({hashlib.sha256(t.encode()).hexdigest()[:8] for t in bullet_words(text)}))


def _origin(value: Any) -> str:
    return value if isinstance(value, str) and value in ORIGINS else "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRecord:
    """Where one ledger bullet came from.

    Attributes:
        id: the bullet's :func:`bullet_id`.
        line: its line in the ledger (1-based) when written.
        origin: ``user``, ``model``, ``tool``, ``ingest`` (a flush: the least trusted of
            the messages it was found in), ``person``, ``model`` or ``client`` (an add).
        via: ``flush`` or ``add``.
        session: the session a flush read (``None`` for an add).
        messages: ids of the messages whose words the bullet holds (a flush).
        span: ids of the first and last message of the flushed stretch (a flush).
        at: when it was written (UTC, ISO 8601).
    """

    id: str
    line: int
    origin: str
    via: str
    session: str | None = None
    messages: tuple[str, ...] = ()
    span: tuple[str, str] | None = None
    at: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "line": self.line, "origin": self.origin}
        data["via"] = self.via
        if self.session is not None:
            data.update(session=self.session, messages=list(self.messages))
            data["span"] = list(self.span) if self.span else None
        data["at"] = self.at
        return data

    @classmethod
    def from_json(cls, data: Any) -> LedgerRecord | None:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            return None
        line = data.get("line")
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            return None
        span = data.get("span")
        session = data.get("session")
        return cls(
            id=data["id"],
            line=line,
            origin=_origin(data.get("origin")),
            via=str(data.get("via") or "flush"),
            session=session if isinstance(session, str) else None,
            messages=tuple(m for m in data.get("messages") or () if isinstance(m, str)),
            span=(span[0], span[1])
            if isinstance(span, list) and len(span) == 2 and all(isinstance(s, str) for s in span)
            else None,
            at=str(data.get("at") or ""),
        )


def ledger_records_rel(name: str) -> str:
    """The sidecar of ledger ``name`` (``2026-11-30.md``; a path's last part is used)."""
    return f"{PROVENANCE_DIR}/{name.rsplit('/', 1)[-1]}.jsonl"


def append_ledger_records(ws: Workspace, ledger: str, records: Iterable[LedgerRecord]) -> None:
    """Append records to the sidecar of ``ledger`` in one locked write.

    A failure is logged, not raised: the ledger (the truth) is already written, and its
    bullets read as unsourced rather than the write being lost.
    """
    lines = "".join(
        json.dumps(r.to_json(), ensure_ascii=False, sort_keys=True) + "\n" for r in records
    )
    if not lines:
        return
    try:
        ws.append_text(ledger_records_rel(ledger), lines)
    except Exception as exc:
        log.warning("provenance of %s not recorded (%s)", ledger, type(exc).__name__)


def read_ledger_records(ws: Workspace, ledger: str) -> list[LedgerRecord]:
    """Every record of ledger ``ledger``'s sidecar, in file order (damaged lines skipped)."""
    out: list[LedgerRecord] = []
    for raw in ws.read_text(ledger_records_rel(ledger)).splitlines():
        try:
            record = LedgerRecord.from_json(json.loads(raw))
        except ValueError:
            record = None
        if record is not None:
            out.append(record)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRef:
    """One ledger bullet a ``MEMORY.md`` bullet was consolidated from."""

    file: str  # the ledger's name, 2026-11-30.md (found live or in memory/archive/)
    line: int
    id: str
    origin: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "id": self.id, "origin": self.origin}

    @classmethod
    def from_json(cls, data: Any) -> SourceRef | None:
        if not isinstance(data, dict):
            return None
        file, line, ident = data.get("file"), data.get("line"), data.get("id")
        if not isinstance(file, str) or not isinstance(ident, str):
            return None
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            return None
        return cls(file=file, line=line, id=ident, origin=_origin(data.get("origin")))

    @property
    def citation(self) -> str:
        """``memory/<file>#L<line>`` (a reader finds an archived ledger by this name too)."""
        return f"{MEMORY_DIR}/{self.file}#L{self.line}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord:
    """How one ``MEMORY.md`` bullet came to be.

    Attributes:
        id: the bullet's :func:`bullet_id`.
        kind: ``consolidated`` (from ledger lines), ``person`` (written by a person),
            ``edited`` (a recorded bullet a person reworded: its sources are kept),
            ``unsourced`` (no valid source: a model wrote it with none, or it predates
            provenance).
        sources: the ledger bullets it was consolidated from.
        words: its :func:`fingerprint`.
        at: when the record was made.
    """

    id: str
    kind: str
    sources: tuple[SourceRef, ...] = ()
    words: tuple[str, ...] = ()
    at: str = ""

    @property
    def origin(self) -> str:
        """The least trusted origin of its sources (``person`` / ``unknown`` without any)."""
        if self.sources:
            return least_trusted(s.origin for s in self.sources)
        return "person" if self.kind == "person" else "unknown"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "sources": [s.to_json() for s in self.sources],
            "words": list(self.words),
            "at": self.at,
        }

    @classmethod
    def from_json(cls, ident: str, data: Any) -> MemoryRecord | None:
        if not isinstance(data, dict):
            return None
        kind = data.get("kind")
        sources = [SourceRef.from_json(s) for s in data.get("sources") or ()]
        return cls(
            id=ident,
            kind=kind if isinstance(kind, str) and kind in KINDS else "unsourced",
            sources=tuple(s for s in sources if s is not None),
            words=tuple(w for w in data.get("words") or () if isinstance(w, str)),
            at=str(data.get("at") or ""),
        )


def load_memory_records(ws: Workspace) -> dict[str, MemoryRecord]:
    """The records of ``MEMORY.md``'s bullets by id (empty when none; damage is logged)."""
    raw = ws.read_text(MEMORY_RECORDS_REL)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
        bullets = data["bullets"]
        if not isinstance(bullets, dict):
            raise TypeError("bullets is not an object")
    except (ValueError, KeyError, TypeError):
        log.warning("%s is damaged; MEMORY.md's bullets read as unsourced", MEMORY_RECORDS_REL)
        return {}
    out: dict[str, MemoryRecord] = {}
    for ident, value in bullets.items():
        record = MemoryRecord.from_json(str(ident), value)
        if record is not None:
            out[record.id] = record
    return out


def save_records(
    ws: Workspace, records: Iterable[MemoryRecord], *, keep: Iterable[MemoryRecord]
) -> None:
    """Write the records of a new ``MEMORY.md`` (and ``keep``, where no new one has the id)."""
    merged: dict[str, MemoryRecord] = {}
    for record in (*records, *keep):
        merged.setdefault(record.id, record)
    save_memory_records(ws, merged)


def save_memory_records(ws: Workspace, records: Mapping[str, MemoryRecord]) -> None:
    """Write ``MEMORY.md``'s records atomically."""
    data = {
        "version": 1,
        "bullets": {k: records[k].to_json() for k in sorted(records)},
    }
    ws.write_text(MEMORY_RECORDS_REL, json.dumps(data, ensure_ascii=False, indent=1) + "\n")


@dataclass(slots=True)
class Match:
    """What :func:`match_record` found for one bullet."""

    record: MemoryRecord | None
    edited: bool = False
    score: float = 0.0
    candidates: list[str] = field(default_factory=list)


def match_record(
    text: str, records: Mapping[str, MemoryRecord], present: Iterable[str] = ()
) -> Match:
    """The record of a bullet: by id, else the record of a bullet it rewords.

    A reworded bullet keeps at least half of the words of a recorded bullet that is no
    longer in the file (``present``: ids still there); the best such record is taken.
    """
    ident = bullet_id(text)
    if ident in records:
        return Match(records[ident])
    taken = set(present)
    mine = set(fingerprint(text))
    best: MemoryRecord | None = None
    best_score = 0.0
    for record in records.values():
        if record.id in taken or not record.words:
            continue
        theirs = set(record.words)
        score = len(mine & theirs) / len(theirs)
        if score > best_score:
            best, best_score = record, score
    if best is not None and best_score >= _EDITED:
        return Match(best, edited=True, score=best_score)
    return Match(None)


def reconcile(text: str, records: Mapping[str, MemoryRecord], at: str) -> list[MemoryRecord]:
    """A record for every bullet of a ``MEMORY.md`` text, in file order.

    A bullet keeps its record when its id has one; a bullet a person reworded takes the
    record of the bullet it rewords (kind ``edited``, same sources); any other is
    ``unsourced``.
    """
    bullets = parse_bullets(text)
    present = {bullet_id(b.text) for b in bullets} & set(records)
    out: list[MemoryRecord] = []
    for bullet in bullets:
        found = match_record(bullet.text, records, present)
        ident = bullet_id(bullet.text)
        if found.record is None:
            out.append(
                MemoryRecord(id=ident, kind="unsourced", words=fingerprint(bullet.text), at=at)
            )
        elif found.edited:
            present.add(found.record.id)  # one rewording per recorded bullet
            out.append(
                MemoryRecord(
                    id=ident,
                    kind="edited",
                    sources=found.record.sources,
                    words=fingerprint(bullet.text),
                    at=at,
                )
            )
        else:
            out.append(found.record)
    return out
