"""Consolidation: merge new ledger entries into ``MEMORY.md``, safely.

:class:`MemoryConsolidator` reads what the ledgers gained since the watermark (byte offsets,
:mod:`memdir.memory._state`), asks the model for the complete new ``MEMORY.md``, and writes it
only if it is sound:

- a blank, failed, timed-out, garbage (no bullets) or grossly oversized answer changes nothing;
- an answer over the budget is sent back once to be shortened, then trimmed deterministically
  (:mod:`memdir.memory._budget`): the file written is never over budget;
- an answer that drops more than ``max_drop_ratio`` of the existing entries without a
  replacement is refused (a single removal is always allowed; an answer at 80 % of the budget
  or more may drop one old bullet per new one, since a full file must make room);
- ``MEMORY.md`` edited by someone else during the call is not overwritten;
- the previous file is kept in ``memory/.history/``; the write is atomic, and the watermark
  moves only after it (with crash recovery);
- one consolidation runs at a time across processes (a lease).

Every run that reached the model is recorded in ``memory/.history/consolidation.log.jsonl``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from memdir.errors import ConfigError
from memdir.forget import erasure_mark, resume_erasures, without_erased
from memdir.memory._budget import fit_budget
from memdir.memory._checks import (
    check_callable,
    check_duration,
    check_int,
    check_model,
    check_number,
    check_text,
)
from memdir.memory._entries import EntryDiff, diff_entries, parse_bullets
from memdir.memory._history import log_run, save_version
from memdir.memory._lease import Lease
from memdir.memory._prompts import (
    DEFAULT_CONSOLIDATION_PROMPT,
    consolidation_request,
)
from memdir.memory._propose import propose
from memdir.memory._remote import on_the_server
from memdir.memory._sources import SourceBook
from memdir.memory._state import ConsolidationState, FileMark, LedgerSlice, read_new_slices, sha256
from memdir.memory._testpoint import pause_point
from memdir.memory._updates import drop_superseded
from memdir.models import AUTO, ChatModel, Patience, check_patience, resolve_patience
from memdir.provenance._records import MemoryRecord, load_memory_records, save_records
from memdir.redact import Redactor
from memdir.store.workspace import MEMORY_MD, Workspace

if TYPE_CHECKING:
    from collections.abc import Callable

    from memdir.index import SearchIndex

__all__ = ["ConsolidationResult", "MemoryConsolidator"]

_ENTRY_SHARE = 4  # one entry may take at most a quarter of the budget
_MIN_ENTRY = 200

log = logging.getLogger("memdir.memory")

_CHARS_PER_TOKEN = 4
_PRESSURE = 0.8  # an answer this close to the budget may drop old bullets for new ones


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsolidationResult:
    """What one consolidation did (or, with ``dry_run``, would do).

    Attributes:
        added: bullets new in ``MEMORY.md``.
        changed: ``(old, new)`` pairs of reworded or updated bullets.
        removed: bullets no longer in ``MEMORY.md`` (including trimmed ones).
        trimmed: bullets dropped by the consolidator to meet the budget.
        entries: ledger bullets consumed.
        files: ledgers read.
        before_chars: size of ``MEMORY.md`` before.
        after_chars: size after (equal to ``before_chars`` when nothing was written).
        max_chars: the budget.
        skipped: why nothing (more) was applied: ``"busy"``, ``"nothing_new"``,
            ``"model_error"``, ``"timeout"``, ``"blank_answer"``, ``"unusable_answer"``,
            ``"oversized_answer"``, ``"over_budget"``, ``"too_many_removals"``,
            ``"memory_changed"``, ``"lease_lost"``, ``"erased"`` (a fact was erased during
            the run: it is read again next time); ``None`` when everything was applied.
        dry_run: nothing was written.
        text: the new ``MEMORY.md`` (also in a dry run), or ``None``.
        history_path: where the previous version was saved, or ``None``.
        batches: model calls that were applied (long backlogs are sent in batches).
    """

    added: tuple[str, ...] = ()
    changed: tuple[tuple[str, str], ...] = ()
    removed: tuple[str, ...] = ()
    trimmed: tuple[str, ...] = ()
    entries: int = 0
    files: tuple[str, ...] = ()
    before_chars: int = 0
    after_chars: int = 0
    max_chars: int = 0
    skipped: str | None = None
    dry_run: bool = False
    text: str | None = None
    history_path: str | None = None
    batches: int = 0

    @property
    def applied(self) -> bool:
        """Whether ``MEMORY.md`` or the watermark changed."""
        return self.batches > 0 and not self.dry_run


@dataclass(slots=True)
class _Run:
    """Totals across the batches of one run."""

    before: str
    trimmed: list[str] = field(default_factory=list)
    entries: int = 0
    files: list[str] = field(default_factory=list)
    history: str | None = None
    batches: int = 0
    erasures: str = ""
    """The erasure mark when the run began: a fact erased since must not come back."""
    wrote: str | None = None
    """The SHA-256 of the ``MEMORY.md`` the last batch wrote (``None``: it wrote nothing)."""


class MemoryConsolidator:
    """Merges new ledger entries into ``MEMORY.md`` within a size budget.

    Args:
        workspace: the workspace.
        model: the model that writes the new file.
        max_memory_tokens: the budget, in tokens; enforced as ``4 ×`` that many characters.
        max_drop_ratio: the share of existing entries a rewrite may drop without a
            replacement; a rewrite that drops more is refused.
        history_versions: previous versions of ``MEMORY.md`` kept in ``memory/.history/``.
        index: a search index to update after a write.
        prompt: the system prompt, with ``{max_tokens}`` and ``{max_chars}`` placeholders.
        redactor: masks secrets in the new file (default :class:`memdir.redact.Redactor`).
        timeout: seconds each model call may go without progress (each streamed piece of the
            answer counts); ``"auto"`` follows the model (its ``timeout``: 120 s for a hosted
            API, 600 s for a local server; else 300 s); ``None``: no limit.
        max_input_chars: the most new ledger text sent in one model call. A longer backlog
            is sent in batches of about this size, one after another in the same run, each
            applied on its own; a line longer than a quarter of the budget (or than this) is
            sent clipped, with a pointer to its ledger, which keeps it whole.
        lease_ttl: how long the consolidation lease lasts without renewal.
        progress: called as ``progress(done, total)`` with the batches of a run: once with
            ``done=0`` before the first model call, then after each batch. Not called when
            there is nothing new.
    """

    def __init__(
        self,
        workspace: Workspace | str,
        model: ChatModel,
        *,
        max_memory_tokens: int = 4000,
        max_drop_ratio: float = 0.25,
        history_versions: int = 20,
        index: SearchIndex | None = None,
        prompt: str | None = None,
        redactor: Callable[[str], str] | None = None,
        timeout: Patience = AUTO,
        max_input_chars: int = 48_000,
        lease_ttl: timedelta = timedelta(minutes=15),
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        owner = "MemoryConsolidator"
        check_int(owner, "max_memory_tokens", max_memory_tokens, minimum=50)
        template = check_text(owner, "prompt", prompt) or DEFAULT_CONSOLIDATION_PROMPT
        try:
            self.prompt = template.format(
                max_tokens=max_memory_tokens, max_chars=max_memory_tokens * _CHARS_PER_TOKEN
            )
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                "the consolidation prompt may only use the {max_tokens} and {max_chars} "
                "placeholders (double other braces)"
            ) from exc
        self.workspace = Workspace.coerce(workspace)
        self.model = check_model(owner, model)
        self.max_memory_tokens = max_memory_tokens
        self.max_chars = max_memory_tokens * _CHARS_PER_TOKEN
        self.max_drop_ratio = check_number(
            owner, "max_drop_ratio", max_drop_ratio, low=0.0, high=1.0
        )
        self.history_versions = check_int(owner, "history_versions", history_versions, minimum=1)
        self.index: SearchIndex | None = check_callable(owner, "index", index, method="index_file")
        self.redactor: Callable[[str], str] = (
            check_callable(owner, "redactor", redactor) or Redactor()
        )
        self.timeout = check_patience(f"{owner} timeout", timeout)
        self.max_input_chars = check_int(owner, "max_input_chars", max_input_chars, minimum=1_000)
        self.lease_ttl = check_duration(owner, "lease_ttl", lease_ttl)
        self.progress: Callable[[int, int], None] | None = check_callable(
            owner, "progress", progress
        )

    async def consolidate(self, *, dry_run: bool = False) -> ConsolidationResult:
        """Merge what the ledgers gained since the last run into ``MEMORY.md``.

        Args:
            dry_run: compute the new file and the diff, write nothing.

        Returns:
            The diff and sizes; ``skipped`` says why nothing (more) was applied. Model failures
            are reported there (and logged), never raised. On a workspace on a ``memdir
            serve`` server the server consolidates, with its model and budget.
        """
        if on_the_server(self.workspace, "consolidation"):
            assert self.workspace.remote is not None
            return await asyncio.to_thread(self.workspace.remote.consolidate, dry_run=dry_run)
        lease = Lease(self.workspace, "consolidation", ttl=self.lease_ttl)
        if not lease.try_acquire():
            current = self.workspace.read_text(MEMORY_MD)
            return self._result(_Run(current), current, skipped="busy", dry_run=dry_run)
        try:
            return await self._run(lease, dry_run=dry_run)
        finally:
            lease.release()

    # -- the run -------------------------------------------------------------------------

    async def _run(self, lease: Lease, *, dry_run: bool) -> ConsolidationResult:
        ws = self.workspace
        resume_erasures(ws)  # an erasure a crash interrupted is completed before any read
        state = ConsolidationState.load(ws)
        memory_bytes = _read_bytes(ws)
        settled = state.recover(sha256(memory_bytes) if memory_bytes is not None else None)
        if settled and not dry_run:
            state.save(ws)
        if memory_bytes is None and state.exists and state.files:
            log.info("MEMORY.md is missing; rebuilding it from every ledger, archive included")
            state.files = {}
        current = memory_bytes.decode("utf-8", errors="replace") if memory_bytes else ""
        run = _Run(current, erasures=erasure_mark(ws))
        slices = read_new_slices(ws, state, max_chars=self.max_input_chars)
        if not slices:
            return self._result(run, current, skipped="nothing_new", dry_run=dry_run)
        batches = _batches(slices, self.max_input_chars)
        self._report(0, len(batches))
        for done, batch in enumerate(batches, start=1):
            skipped, current = await self._batch(lease, state, batch, current, run, dry_run)
            if skipped is not None:
                return self._result(run, current, skipped=skipped, dry_run=dry_run)
            self._report(done, len(batches))
        return self._result(run, current, skipped=None, dry_run=dry_run)

    def _report(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done, total)

    async def _batch(
        self,
        lease: Lease,
        state: ConsolidationState,
        batch: list[LedgerSlice],
        current: str,
        run: _Run,
        dry_run: bool,
    ) -> tuple[str | None, str]:
        ws = self.workspace
        limit = max(_MIN_ENTRY, self.max_chars // _ENTRY_SHARE)
        entries = [_clip(b.text, limit, s.rel) for s in batch for b in parse_bullets(s.text)]
        marks = {s.name: s.mark for s in batch}
        for s in batch:
            if s.name not in run.files:
                run.files.append(s.name)
        if not entries:  # only headers or blank lines: nothing to merge, just move on
            if not dry_run:
                state.files.update(marks)
                state.save(ws)
            run.batches += 1
            return None, current
        # Every entry and every bullet of MEMORY.md goes with an id the answer must cite.
        book = SourceBook.open(ws, current, _instant(ws))
        aliases: list[str] = []
        pieces: list[str] = []
        # Long lines are sent clipped, as their entries are: a line longer than a batch makes
        # a batch of its own, and no call may carry much more than max_input_chars of ledger.
        line_limit = min(limit, self.max_input_chars)
        for s in batch:
            sent, shown = book.add_entries(
                ws, s.name, s.first_line, s.text, functools.partial(_clip_to, line_limit, s.rel)
            )
            aliases += sent
            pieces.append(f"### {s.name}\n" + shown.strip())
        request = consolidation_request(
            current=current,
            entries_text="\n\n".join(pieces),
            entries=entries,
            max_chars=self.max_chars,
            marked_current=book.mark_current(current),
            entry_ids=aliases,
        )
        new_text, reason, given = await propose(
            self.model,
            request,
            system=self.prompt,
            max_chars=self.max_chars,
            max_output_tokens=2 * self.max_memory_tokens + 500,
            timeout=resolve_patience(self.timeout, self.model),
            redactor=self.redactor,
        )
        if new_text is None:
            self._log("failed", reason, run, entries, (), dry_run=dry_run)
            return reason, current
        old_bullets = [b.text for b in parse_bullets(current)]
        proposed = [b.text for b in parse_bullets(new_text)]
        if not proposed:
            if old_bullets:  # an empty file may not replace a non-empty one
                log.warning("consolidation: the model's answer was blank; nothing changed")
                self._log("failed", "blank_answer", run, entries, (), dry_run=dry_run)
                return "blank_answer", current
            log.warning(
                "consolidation: the answer kept none of %d new entries; moving past them",
                len(entries),
            )
        model_diff = diff_entries(old_bullets, proposed)
        unreplaced = len(model_diff.removed)
        if len(new_text) >= _PRESSURE * self.max_chars:
            # A full file must make room: each new bullet may take an old one's place.
            unreplaced = max(0, unreplaced - len(model_diff.added))
        if unreplaced > max(1.0, self.max_drop_ratio * len(old_bullets)):
            log.warning(
                "consolidation refused: the answer drops %d of %d entries without a "
                "replacement (limit %.0f%%); MEMORY.md is unchanged",
                unreplaced,
                len(old_bullets),
                self.max_drop_ratio * 100,
            )
            self._log(
                "refused", "too_many_removals", run, entries, model_diff.removed, dry_run=dry_run
            )
            return "too_many_removals", current
        newest = {b.key for b in parse_bullets("\n".join(f"- {e}" for e in entries))}
        if proposed:
            # A fact kept beside its update: only the update stays.
            new_text = drop_superseded(new_text, old_bullets, entries)
            # What an untrusted origin made an instruction is quoted before the budget is
            # applied, so that the file written is within it.
            new_text, given = book.guard(new_text, given)
            fitted = fit_budget(new_text, self.max_chars, newest=newest)
        else:  # keep the file as it is (its prose, its title), or start it with the answer
            fitted = (current if current.strip() else new_text), []
        if fitted is None:
            log.warning(
                "consolidation refused: the answer cannot be trimmed to %d characters",
                self.max_chars,
            )
            self._log("refused", "over_budget", run, entries, (), dry_run=dry_run)
            return "over_budget", current
        final, trimmed = fitted
        if trimmed:
            log.warning(
                "consolidation: trimmed %d bullets to keep MEMORY.md within %d characters",
                len(trimmed),
                self.max_chars,
            )
        if not dry_run:
            records = book.records(final, given)
            skipped = self._commit(lease, state, marks, current, final, run, records)
            if skipped is not None:
                return skipped, current
        diff = diff_entries(old_bullets, [b.text for b in parse_bullets(final)])
        run.trimmed += trimmed
        run.entries += len(entries)
        run.batches += 1
        if not dry_run:
            counts = {"invented_ids": book.invented, "unsourced": book.unsourced}
            counts["quoted"] = book.quoted
            self._log(
                "applied",
                None,
                run,
                entries,
                (),
                dry_run=False,
                diff=diff,
                trimmed=trimmed,
                provenance=counts,
            )
            self._reindex()
        return None, final

    def _commit(
        self,
        lease: Lease,
        state: ConsolidationState,
        marks: dict[str, FileMark],
        before: str,
        final: str,
        run: _Run,
        records: list[MemoryRecord],
    ) -> str | None:
        ws = self.workspace
        if not lease.verify():
            log.warning("consolidation: lost the lease during the model call; nothing written")
            return "lease_lost"
        if erasure_mark(ws) != run.erasures:
            log.warning("consolidation: a fact was erased during the run; nothing written")
            return "erased"
        final = "\n".join(without_erased(ws, final.split("\n")))
        found = ws.read_versioned(MEMORY_MD)
        now_bytes = found.data if found is not None else None
        now_text = now_bytes.decode("utf-8", errors="replace") if now_bytes else ""
        if now_text != before:
            log.warning("consolidation: MEMORY.md changed during the run; it was left as is")
            return "memory_changed"
        run.wrote = None
        if final == before:
            save_records(ws, records, keep=())
            state.files.update(marks)
            state.save(ws)
            return None
        if run.history is None and now_bytes is not None and before.strip():
            run.history = save_version(ws, before, keep=self.history_versions)
        pause_point("consolidate:before-replace")
        encoded = final.encode("utf-8")
        state.pending_sha256 = sha256(encoded)
        state.pending_files = dict(marks)
        state.save(ws)
        # The records go first, with the old ones kept: a crash after the replace leaves every
        # bullet of either file with its record; the old ones are dropped after it.
        old = load_memory_records(ws)
        save_records(ws, records, keep=old.values())
        # A compare-and-swap: an edit made since the read above (a person, another writer)
        # is kept, never overwritten; its entries are consolidated by the next run.
        if not ws.replace_if(MEMORY_MD, final, found.version if found is not None else None):
            state.recover(None)
            state.save(ws)
            log.warning("consolidation: MEMORY.md changed during the run; it was left as is")
            return "memory_changed"
        pause_point("consolidate:after-replace")
        run.wrote = sha256(encoded)
        state.recover(sha256(encoded))
        state.save(ws)
        save_records(ws, records, keep=())
        return None

    def _reindex(self) -> None:
        if self.index is None:
            return
        try:
            self.index.index_file(MEMORY_MD)
        except Exception as exc:  # the file is the truth; the index catches up later
            log.warning("consolidation: re-indexing MEMORY.md failed (%s)", type(exc).__name__)

    # -- reporting -------------------------------------------------------------------------

    def _log(
        self,
        status: str,
        reason: str | None,
        run: _Run,
        entries: list[str],
        removed: tuple[str, ...],
        *,
        dry_run: bool,
        diff: EntryDiff | None = None,
        trimmed: list[str] | None = None,
        provenance: dict[str, int] | None = None,
    ) -> None:
        if dry_run:
            return
        log_run(
            self.workspace,
            model=getattr(self.model, "name", type(self.model).__name__),
            status=status,
            reason=reason,
            entries=len(entries),
            files=run.files,
            budget_chars=self.max_chars,
            before_chars=len(run.before),
            removed=removed,
            diff=diff,
            trimmed=trimmed or [],
            history=run.history,
            provenance=provenance,
            written_sha256=run.wrote if diff is not None else None,
        )

    def _result(
        self, run: _Run, current: str, *, skipped: str | None, dry_run: bool
    ) -> ConsolidationResult:
        diff = diff_entries(
            [b.text for b in parse_bullets(run.before)], [b.text for b in parse_bullets(current)]
        )
        return ConsolidationResult(
            added=diff.added,
            changed=diff.changed,
            removed=diff.removed,
            trimmed=tuple(run.trimmed),
            entries=run.entries,
            files=tuple(run.files),
            before_chars=len(run.before),
            after_chars=len(current),
            max_chars=self.max_chars,
            skipped=skipped,
            dry_run=dry_run,
            text=current if run.batches else None,
            history_path=run.history,
            batches=run.batches,
        )


def _clip(text: str, limit: int, rel: str) -> str:
    """``text``, or its head and a pointer to the ledger holding the rest when over ``limit``.

    A single entry larger than the whole budget could never be merged, and would stop every
    later run at the same place.
    """
    if len(text) <= limit:
        return text
    pointer = f" … (full text in {rel})"
    head = " ".join(text.split())[: max(1, limit - len(pointer))].rstrip()
    return head + pointer


def _instant(ws: Workspace) -> str:
    return ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")


def _clip_to(limit: int, rel: str, text: str) -> str:
    return _clip(text, limit, rel)


def _read_bytes(ws: Workspace) -> bytes | None:
    try:
        return ws.read_bytes(MEMORY_MD)
    except FileNotFoundError:
        return None


def _batches(slices: list[LedgerSlice], max_chars: int) -> list[list[LedgerSlice]]:
    batches: list[list[LedgerSlice]] = [[]]
    size = 0
    for piece in slices:
        if batches[-1] and size + len(piece.text) > max_chars:
            batches.append([])
            size = 0
        batches[-1].append(piece)
        size += len(piece.text)
    return batches
