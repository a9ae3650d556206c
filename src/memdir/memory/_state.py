"""The consolidation watermark: which bytes of which ledgers are already in ``MEMORY.md``.

``memory/.consolidation_state`` is a JSON record::

    {"version": 1,
     "files": {"2026-11-30.md": {"offset": 812, "sha256": "<digest of bytes [0, offset)>"}},
     "pending": null | {"memory_sha256": "...", "files": {...}},
     "updated_at": "2026-11-30T09:00:00Z"}

Ledgers are append-only, so "what is new" is the bytes after ``offset``. Files are keyed by
name, so a ledger moved to ``memory/archive/`` keeps its mark. If a file was edited by hand
(it shrank, or the digest of its consumed prefix no longer matches) it is read again from the
start; consolidation is told about facts twice rather than missing one.

``pending`` makes the two writes of a consolidation (``MEMORY.md``, then this file) safe
against a crash in between: it names the digest of the ``MEMORY.md`` about to be written and
the marks that go with it. On the next run, if ``MEMORY.md`` has that digest, the marks are
committed; otherwise they are dropped and the entries are consolidated again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = ["STATE_REL", "ConsolidationState", "FileMark", "LedgerSlice", "read_new_slices"]

log = logging.getLogger("memdir.memory")

STATE_REL = f"{MEMORY_DIR}/.consolidation_state"


@dataclass(frozen=True, slots=True, kw_only=True)
class FileMark:
    """How much of one ledger is consumed."""

    offset: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Any) -> FileMark | None:
        try:
            offset = int(data["offset"])
            digest = str(data["sha256"])
        except (TypeError, KeyError, ValueError):
            return None
        return cls(offset=offset, sha256=digest) if offset >= 0 else None


def _marks(data: Any) -> dict[str, FileMark]:
    out: dict[str, FileMark] = {}
    if isinstance(data, dict):
        for name, raw in data.items():
            mark = FileMark.from_json(raw)
            if mark is not None:
                out[str(name)] = mark
    return out


@dataclass(slots=True, kw_only=True)
class ConsolidationState:
    """The watermark, loaded from and saved to :data:`STATE_REL`."""

    files: dict[str, FileMark] = field(default_factory=dict)
    pending_sha256: str | None = None
    pending_files: dict[str, FileMark] = field(default_factory=dict)
    updated_at: str | None = None
    exists: bool = False

    @classmethod
    def load(cls, ws: Workspace) -> ConsolidationState:
        """Read the state; a missing file is an empty state, a damaged one too (logged)."""
        try:
            raw = ws.read_bytes(STATE_REL)
        except FileNotFoundError:
            return cls()
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("version") != 1:
                raise ValueError("not a version-1 state record")
        except ValueError:
            # An older format (a bare timestamp) or damage: start over. Consolidating entries
            # twice is safe; skipping some is not.
            log.warning("%s is not a valid consolidation state; re-reading all ledgers", STATE_REL)
            return cls(exists=True)
        pending = data.get("pending")
        state = cls(
            files=_marks(data.get("files")),
            updated_at=str(data.get("updated_at")) if data.get("updated_at") else None,
            exists=True,
        )
        if isinstance(pending, dict) and isinstance(pending.get("memory_sha256"), str):
            state.pending_sha256 = pending["memory_sha256"]
            state.pending_files = _marks(pending.get("files"))
        return state

    def save(self, ws: Workspace) -> None:
        """Write the state atomically."""
        pending: dict[str, Any] | None = None
        if self.pending_sha256 is not None:
            pending = {
                "memory_sha256": self.pending_sha256,
                "files": {k: v.to_json() for k, v in sorted(self.pending_files.items())},
            }
        record = {
            "version": 1,
            "files": {k: v.to_json() for k, v in sorted(self.files.items())},
            "pending": pending,
            "updated_at": ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        ws.write_text(STATE_REL, json.dumps(record, indent=1, sort_keys=True) + "\n")
        self.exists = True

    def recover(self, memory_sha256: str | None) -> bool:
        """Settle a pending commit left by a crash. Returns whether the state changed."""
        if self.pending_sha256 is None:
            return False
        if memory_sha256 == self.pending_sha256:
            self.files.update(self.pending_files)
        self.pending_sha256 = None
        self.pending_files = {}
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerSlice:
    """The unconsumed, complete lines of one ledger."""

    name: str
    rel: str
    start: int
    end: int
    text: str
    mark: FileMark  # the mark once this slice is consumed
    first_line: int = 1  # the ledger line the slice starts on (1-based)


def sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _cut_points(data: bytes, start: int, end: int, max_bytes: int) -> list[int]:
    """Piece ends within ``[start, end)``, each piece at most about ``max_bytes``.

    A piece ends before a block header when one is in reach, else before a bullet (one block
    can be a long list), else at a line end; only a single line longer than ``max_bytes``
    makes a longer piece.
    """
    cuts: list[int] = []
    piece = start
    while end - piece > max_bytes:
        cut = _last_boundary(data, piece, piece + max_bytes)
        if cut is None:
            newline = data.find(b"\n", piece + max_bytes, end)
            cut = end if newline == -1 else newline + 1
        if cut >= end:
            break
        cuts.append(cut)
        piece = cut
    cuts.append(end)
    return cuts


def _last_boundary(data: bytes, low: int, high: int) -> int | None:
    """The last good place to cut in ``(low, high]``: a header, a bullet, a line end."""
    for needle in (b"\n## ", b"\n- ", b"\n* ", b"\n"):
        at = data.rfind(needle, low, high)
        if at != -1:
            return at + 1
    return None


def read_new_slices(
    ws: Workspace, state: ConsolidationState, *, max_chars: int = 1 << 62
) -> list[LedgerSlice]:
    """The new content of every ledger (live and archived), oldest day first.

    Only complete lines are taken, so a write in progress is picked up next time. A long new
    region is cut at block headers into slices of about ``max_chars``.
    """
    by_name: dict[str, str] = {}
    for archived in (True, False):  # a live file wins over an archived one of the same name
        for _, rel in ws.ledgers(archived=archived):
            by_name[rel.rsplit("/", 1)[-1]] = rel
    out: list[LedgerSlice] = []
    for name in sorted(by_name):
        rel = by_name[name]
        try:
            data = ws.read_bytes(rel)
        except FileNotFoundError:
            continue  # moved to the archive meanwhile; picked up next time
        end = data.rfind(b"\n") + 1
        mark = state.files.get(name)
        start = 0
        if mark is not None and mark.offset <= end and sha256(data[: mark.offset]) == mark.sha256:
            start = mark.offset
        if start >= end:
            continue
        piece_start = start
        for cut in _cut_points(data, start, end, max_chars):
            out.append(
                LedgerSlice(
                    name=name,
                    rel=rel,
                    start=piece_start,
                    end=cut,
                    text=data[piece_start:cut].decode("utf-8", errors="replace"),
                    mark=FileMark(offset=cut, sha256=sha256(data[:cut])),
                    first_line=data.count(b"\n", 0, piece_start) + 1,
                )
            )
            piece_start = cut
    return out
