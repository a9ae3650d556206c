"""A forget: its preview, then the erasure, journaled so that a crash is completed later.

The erasure is written in this order, each step safe to run again:

1. the journal (``memory/.forget/journal.json``): the keyed hashes, bullet and message ids,
   when, who asked, and the files to change; never the text;
2. the erasure record in ``memory/.forget/erased.jsonl`` (the denylist): from here on no flush
   or consolidation writes a line with one of those keys;
3. each file, rewritten whole (atomically: old or new, never half) or deleted;
4. the records of ``memdir serve``'s idempotency keys holding an erased line, replaced by
   markers without content (:mod:`memdir.forget._records`);
5. the index, brought in line and its freed pages, WAL and dead rows cleared (the records'
   table too);
6. the journal removed.

A run killed at any point leaves the journal; the next forget, namespace delete,
consolidation or flush (or :func:`resume_erasures`) runs steps 2 to 6 again from it.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from memdir._testpoint import pause_point
from memdir.errors import MemdirError
from memdir.forget._keys import ERASED_REL, FORGET_DIR, Keyer
from memdir.forget._plan import Place, Target, facts_of, files_of, keys_for, places_of
from memdir.forget._records import RECORDS_PLACE, erase_records, record_lines, records_holding
from memdir.forget._scrub import Erasure, scrub_file
from memdir.store.workspace import Workspace

__all__ = ["JOURNAL_REL", "ForgetPlan", "ForgetReport", "apply_forget", "plan_forget",
           "resume_erasures"]  # fmt: skip

log = logging.getLogger("memdir.forget")

JOURNAL_REL: Final = f"{FORGET_DIR}/journal.json"
_LOCK: Final = "forget"
_ATTEMPTS: Final = 20


@dataclass(frozen=True, slots=True)
class ForgetPlan:
    """What a forget would remove (its preview): hand it to :func:`apply_forget` to do it.

    Attributes:
        facts: how many distinct lines and messages hold the fact (keyed hashes).
        places: every file it changes (path, lines, or deleted); last, when a server's
            idempotency records hold it, ``server idempotency records`` with their number
            as ``lines``.
        keys: the keyed hashes of the erased lines (no text).
    """

    facts: int
    places: tuple[Place, ...]
    keys: frozenset[str]
    bullet_ids: frozenset[str] = frozenset()
    message_ids: frozenset[str] = frozenset()
    store: str = ""

    @property
    def empty(self) -> bool:
        """Whether nothing holds the fact (a forget then changes nothing)."""
        return not self.places

    def describe(self) -> str:
        """The preview, one place a line."""
        if self.empty:
            return "nothing holds that text: nothing to forget, nothing changed"
        files = sum(1 for place in self.places if place.path != RECORDS_PLACE)
        lines = [f"{len(self.keys)} line(s) or message(s) hold it, in {files} file(s):"]
        for place in self.places:
            if place.path == RECORDS_PLACE:
                lines.append(f"  {RECORDS_PLACE}: {place.lines}")
                continue
            what = "deleted" if place.deleted else f"{place.lines} line(s)"
            lines.append(f"  {place.path}: {what}")
        lines.append(
            "  and the rows of those files in the full-text index, the pairs table and the "
            f"vectors ({self.store})"
        )
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What a forget removed.

    Attributes:
        erased: how many distinct lines and messages (keyed hashes).
        files: the files rewritten.
        deleted: the files deleted.
        record: the erasure record's id.
        resumed: erasures a crash had interrupted, completed first.
        records: the server's idempotency records erased.
    """

    erased: int
    files: tuple[str, ...]
    deleted: tuple[str, ...]
    record: str
    resumed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    records: int = 0

    def describe(self) -> str:
        """What was erased, in one sentence (no text)."""
        records = f", {self.records} server idempotency record(s)" if self.records else ""
        return (
            f"Erased {self.erased} line(s) or message(s) from {len(self.files)} file(s)"
            f" ({len(self.deleted)} deleted){records}; erasure record {self.record}."
        )


def _store_words(ws: Workspace) -> str:
    return "SQLite, vacuumed" if ws.is_local else "PostgreSQL rows, vacuumed"


def plan_forget(ws: Workspace, target: Target) -> ForgetPlan:
    """The preview of forgetting ``target``: every place its fact lives. Changes nothing
    (except making the workspace's secret on first use).

    Raises:
        MemdirError: the target is malformed (see :func:`facts_of`).
    """
    facts = facts_of(ws, target)
    keyer = Keyer(ws)
    # Text names every line that mentions it; a cited line or a hit is that line (and its
    # copies): a short line such as "- TODO" must not take every line that says "todo".
    whole = target.text is None
    keys, bullet_ids, message_ids = (
        keys_for(ws, keyer, facts, whole=whole, elsewhere=record_lines(ws))
        if facts
        else (set(), set(), set())
    )
    if not keys:
        return ForgetPlan(facts=0, places=(), keys=frozenset(), store=_store_words(ws))
    erasure = _erasure(keyer, frozenset(keys), bullet_ids, message_ids, marker="")
    places = places_of(ws, erasure)
    if records := len(records_holding(ws, erasure)):
        places.append(Place(RECORDS_PLACE, records, deleted=False))
    return ForgetPlan(
        facts=len(keys),
        places=tuple(places),
        keys=frozenset(keys),
        bullet_ids=frozenset(bullet_ids),
        message_ids=frozenset(message_ids),
        store=_store_words(ws),
    )


def _erasure(
    keyer: Keyer, keys: frozenset[str], bullet_ids: Any, message_ids: Any, *, marker: str
) -> Erasure:
    return Erasure(
        keys=keys,
        bullet_ids=frozenset(bullet_ids),
        message_ids=frozenset(message_ids),
        key_of=keyer.key,
        marker=marker,
    )


def _marker(at: str, by: str, record: str) -> str:
    return (
        f"<!-- memdir: a fact was erased here at {at} at the request of {by} (erasure {record}) -->"
    )


def apply_forget(ws: Workspace, plan: ForgetPlan, *, by: str = "person") -> ForgetReport:
    """Erase what ``plan`` found (see the module notes); an empty plan changes nothing.

    Raises:
        MemdirError: ``by`` is not a short name.
        WorkspaceError: the store failed (the journal completes the erasure later).
    """
    if not isinstance(by, str) or not by.strip() or len(by) > 64 or "\n" in by:
        raise MemdirError("by must be a short name of who asked (such as 'person')")
    if plan.empty:
        return ForgetReport(erased=0, files=(), deleted=(), record="")
    with ws.lock(_LOCK):
        resumed = _resume(ws)
        at = ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")
        journal = {
            "version": 1,
            "record": uuid.uuid4().hex[:12],
            "at": at,
            "by": by.strip(),
            "keys": sorted(plan.keys),
            "bullet_ids": sorted(plan.bullet_ids),
            "message_ids": sorted(plan.message_ids),
            "files": [p.path for p in plan.places if p.path != RECORDS_PLACE],
        }
        ws.write_text(JOURNAL_REL, json.dumps(journal, indent=1))
        pause_point("forget:journal-written")
        report = _complete(ws, journal)
    return ForgetReport(
        erased=report.erased,
        files=report.files,
        deleted=report.deleted,
        record=report.record,
        resumed=resumed,
        records=report.records,
    )


def resume_erasures(ws: Workspace) -> int:
    """Complete an erasure a crash interrupted (from its journal); how many were completed."""
    if ws.stat(JOURNAL_REL) is None:
        return 0
    with ws.lock(_LOCK):
        return _resume(ws)


def _resume(ws: Workspace) -> int:
    raw = ws.read_text(JOURNAL_REL)
    if not raw:
        return 0
    try:
        journal = json.loads(raw)
    except ValueError:
        log.warning("an erasure journal that is not JSON was found and dropped")
        ws.delete(JOURNAL_REL)
        return 0
    log.warning("completing erasure %s, interrupted earlier", journal.get("record"))
    _complete(ws, journal)
    return 1


def _complete(ws: Workspace, journal: dict[str, Any]) -> ForgetReport:
    keyer = Keyer(ws)
    record = str(journal["record"])
    if record not in ws.read_text(ERASED_REL):
        line = {
            "at": journal["at"],
            "by": journal["by"],
            "record": record,
            "kind": "facts",
            "keys": journal["keys"],
            "messages": journal.get("message_ids", []),
        }
        ws.append_text(ERASED_REL, json.dumps(line) + "\n")
    erasure = _erasure(
        keyer,
        frozenset(journal["keys"]),
        journal.get("bullet_ids", ()),
        journal.get("message_ids", ()),
        marker=_marker(str(journal["at"]), str(journal["by"]), record),
    )
    files: list[str] = []
    deleted: list[str] = []
    # Every file, not only those the preview listed: a write since (a flush, a log append)
    # may have copied a line, and a resumed run must find what is left wherever it is.
    for rel in files_of(ws):
        outcome = _scrub_one(ws, rel, erasure)
        if outcome is None:
            continue
        (deleted if outcome else files).append(rel)
        pause_point("forget:file-scrubbed")
    records = erase_records(ws, erasure)  # before the index: its vacuum clears their rows
    pause_point("forget:before-index")
    from memdir.index._erase import scrub_index

    scrub_index(ws)
    ws.delete(JOURNAL_REL)
    if not ws.is_local:
        from memdir.index._erase import vacuum_postgres

        vacuum_postgres(ws, ("files", "chunks"))  # the journal's rows
    return ForgetReport(
        erased=len(journal["keys"]),
        files=tuple(files),
        deleted=tuple(deleted),
        record=record,
        records=records,
    )


def _scrub_one(ws: Workspace, rel: str, erasure: Erasure) -> bool | None:
    """Scrub one file: ``True`` deleted, ``False`` rewritten, ``None`` nothing to do.

    The rewrite is a compare-and-swap on the version read, so a line appended meanwhile (a
    session log, a ledger) is never lost: the file is read and scrubbed again.
    """
    for _ in range(_ATTEMPTS):
        try:
            found = ws.read_versioned(rel)
        except MemdirError:
            return None
        if found is None:
            return None
        new = scrub_file(rel, found.data, erasure)
        if new is None:
            ws.delete(rel)
            return True
        if new == found.data:
            return None
        if rel.startswith("memory/") and rel.endswith(".md"):
            _move_mark(ws, rel, found.data, erasure)
        if ws.replace_if(rel, new, found.version):
            return False
    raise MemdirError(f"{rel} kept changing during the erasure; run the forget again")


def _move_mark(ws: Workspace, rel: str, old: bytes, erasure: Erasure) -> None:
    """Keep the consolidation watermark of a rewritten ledger on the same entry (its bytes
    before the mark are scrubbed the same way, so the mark moves by what they lost)."""
    from memdir.memory._state import ConsolidationState, sha256

    name = rel.rsplit("/", 1)[-1]
    state = ConsolidationState.load(ws)
    changed = False
    for marks in (state.files, state.pending_files or {}):
        mark = marks.get(name)
        if mark is None or sha256(old[: mark.offset]) != mark.sha256:
            continue
        head = scrub_file(rel, old[: mark.offset], erasure) or b""
        marks[name] = type(mark)(offset=len(head), sha256=sha256(head))
        changed = True
    if changed:
        state.save(ws)
