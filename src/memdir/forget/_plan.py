"""Where a fact lives: from what the user named to the keys of every copy, then the places.

A fact is the line (a bullet) or the message holding the text. Its copies are found two ways:
every line anywhere in the workspace holding the text (case and width folded), and through
provenance (:mod:`memdir.provenance`): a ``MEMORY.md`` bullet whose sources cite an erased
ledger bullet is a curated copy even when reworded, and the messages a ledger bullet was
extracted from are its conversation lines.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from memdir.errors import MemdirError
from memdir.forget._keys import FORGET_DIR, Keyer, fold
from memdir.forget._scrub import Erasure, scrub_file, strings
from memdir.provenance._records import (
    MEMORY_RECORDS_REL,
    bullet_id,
    ledger_records_rel,
)
from memdir.store.workspace import INDEX_DIR, MEMORY_MD, Workspace

__all__ = ["Place", "Target", "facts_of", "files_of", "keys_for", "namespace_lines", "places_of"]

_CITATION = re.compile(r"^(?P<path>[^#\s]+)#L(?P<start>\d+)(?:-L?(?P<end>\d+))?$")
_LEDGER = re.compile(r"^memory/(?:archive/)?(\d{4}-\d{2}-\d{2}\.md)$")
_SKIPPED = (f"{INDEX_DIR}/", f"{FORGET_DIR}/")
MIN_CHARS = 4
"""The shortest text a forget takes: shorter text would match lines by accident."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the user named: text, a cited line (``memory/2026-11-30.md#L3``), or a query."""

    text: str | None = None
    citation: str | None = None
    search: str | None = None
    limit: int = 3

    @classmethod
    def of(cls, what: str) -> Target:
        """A cited line when ``what`` reads as one (``memory/2026-11-30.md#L3``), else text."""
        what = what.strip()
        return cls(citation=what) if _CITATION.match(what) else cls(text=what)


@dataclass(frozen=True, slots=True)
class Place:
    """One file an erasure changes: how many lines, or that it goes."""

    path: str
    lines: int
    deleted: bool


def files_of(ws: Workspace) -> Iterator[str]:
    """Every file of the workspace (namespace) an erasure may touch (not the index)."""
    for rel, _ in sorted(ws.walk("")):
        if not rel.startswith(_SKIPPED) and not rel.startswith("ns/"):
            yield rel


def facts_of(ws: Workspace, target: Target) -> list[str]:
    """The texts to look for: the text given, the cited lines, or the best hits' lines.

    Raises:
        MemdirError: nothing usable was named, or a citation is malformed or out of range.
    """
    if target.citation is not None:
        match = _CITATION.match(target.citation.strip())
        if match is None:
            raise MemdirError(
                f"cannot read {target.citation!r} as a line: write it as memory/2026-11-30.md#L3"
            )
        start = int(match["start"])
        end = int(match["end"] or start)
        try:
            lines = ws.read_bytes(match["path"]).decode("utf-8", errors="replace").split("\n")
        except FileNotFoundError:
            raise MemdirError(f"{match['path']} does not exist: nothing to forget") from None
        if not 1 <= start <= end <= len(lines):
            raise MemdirError(f"{target.citation} is past the end of {match['path']}")
        return [line for line in lines[start - 1 : end] if _worth(line)]
    if target.search is not None:
        from memdir.index import MemoryIndex

        with MemoryIndex(ws) as index:
            index.refresh()
            hits = index.search(target.search, limit=target.limit)
        return [line for hit in hits for line in hit.content.split("\n") if _worth(line)]
    text = (target.text or "").strip()
    if len(text) < MIN_CHARS:
        raise MemdirError(f"give at least {MIN_CHARS} characters of the fact to forget")
    return [text]


def _worth(line: str) -> bool:
    stripped = line.strip().lstrip("-*+• ").strip()
    return len(stripped) >= MIN_CHARS and not stripped.startswith("#")


def _lines_of(rel: str, text: str) -> Iterator[str]:
    if rel.endswith((".json", ".jsonl", "_state")):
        for raw in text.split("\n") if rel.endswith(".jsonl") else [text]:
            try:
                value = json.loads(raw)
            except ValueError:
                yield from raw.split("\n")
                continue
            for s in strings(value):
                yield from s.split("\n")
    else:
        yield from text.split("\n")


def _file_lines(ws: Workspace) -> Iterator[tuple[str, str]]:
    """Each file's lines (its JSON strings' lines), with the file."""
    for rel in files_of(ws):
        try:
            text = ws.read_bytes(rel).decode("utf-8", errors="replace")
        except (FileNotFoundError, MemdirError):
            continue
        for line in _lines_of(rel, text):
            yield rel, line


def namespace_lines(ws: Workspace) -> Iterator[str]:
    """Every line of the workspace's (namespace's) files long enough to be a fact."""
    return (line for _, line in _file_lines(ws) if _worth(line))


def keys_for(
    ws: Workspace,
    keyer: Keyer,
    facts: list[str],
    *,
    whole: bool = False,
    elsewhere: Iterable[str] = (),
) -> tuple[set[str], set[str], set[str]]:
    """The keyed hashes of every line holding one of ``facts`` (``whole``: every line that
    is one of them, compared as bullets are), in the files or among the lines ``elsewhere``
    (a server's records), the bullet ids of the erased ledger and ``MEMORY.md`` bullets, and
    the ids of the messages they came from."""
    needles = [fold(f.strip().lstrip("-*+• ").strip()) for f in facts]
    wanted = {keyer.key(f) for f in facts} - {""} if whole else set()

    def holds(line: str) -> bool:
        if whole:
            return keyer.key(line) in wanted
        folded = fold(line)
        return any(n and n in folded for n in needles)

    keys: set[str] = set()
    ledger_ids: dict[str, set[str]] = {}
    bullet_ids: set[str] = set()
    for rel, line in _file_lines(ws):
        if holds(line) and (key := keyer.key(line)):
            keys.add(key)
            if (m := _LEDGER.match(rel)) is not None:
                ledger_ids.setdefault(m[1], set()).add(bullet_id(line))
            elif rel == MEMORY_MD:
                bullet_ids.add(bullet_id(line))
    keys.update(key for line in elsewhere if holds(line) and (key := keyer.key(line)))
    message_ids: set[str] = set()
    for name, ids in ledger_ids.items():
        bullet_ids |= ids
        for record in _jsonl(ws, ledger_records_rel(name)):
            if record.get("id") in ids:
                message_ids.update(m for m in record.get("messages") or [] if isinstance(m, str))
    if ledger_ids:  # curated copies: the MEMORY.md bullets citing an erased ledger bullet
        keys |= _curated_copies(ws, keyer, bullet_ids)
    return keys, bullet_ids, message_ids


def _jsonl(ws: Workspace, rel: str) -> Iterator[dict[str, Any]]:
    for line in ws.read_text(rel).split("\n"):
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def _curated_copies(ws: Workspace, keyer: Keyer, bullet_ids: set[str]) -> set[str]:
    try:
        records: Any = json.loads(ws.read_text(MEMORY_RECORDS_REL) or "{}").get("bullets")
    except (ValueError, AttributeError):
        return set()
    if not isinstance(records, dict):
        return set()
    citing = {
        ident
        for ident, record in records.items()
        if isinstance(record, dict)
        and any(
            isinstance(s, dict) and s.get("id") in bullet_ids for s in record.get("sources") or []
        )
    }
    bullet_ids |= citing
    return {
        keyer.key(line)
        for line in ws.read_text(MEMORY_MD).split("\n")
        if line.strip() and bullet_id(line) in citing
    }


def places_of(ws: Workspace, erasure: Erasure) -> list[Place]:
    """Every file the erasure changes, and how."""
    places: list[Place] = []
    for rel in files_of(ws):
        try:
            data = ws.read_bytes(rel)
        except (FileNotFoundError, MemdirError):
            continue
        new = scrub_file(rel, data, erasure)
        if new is None:
            places.append(Place(rel, 0, deleted=True))
        elif new != data:
            gone = Counter(data.split(b"\n")) - Counter(new.split(b"\n"))
            places.append(Place(rel, max(sum(gone.values()), 1), deleted=False))
    return places
