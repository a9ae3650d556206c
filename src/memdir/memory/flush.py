"""Flush: extract durable facts from new conversation messages into today's ledger.

:class:`MemoryFlushManager` is called after each agent call and before each compaction with
the messages at hand. It extracts each message exactly once (a per-session cursor in
``memory/.flush_state/``, updated under a per-session lock, with crash recovery), drops bullets
already in today's ledger or ``MEMORY.md``, masks secrets, appends one
``## Memory Flush — <instant>`` block in a single locked write, re-indexes that file and nudges
the maintenance scheduler. A failing model writes nothing and keeps the messages for the next
flush; the failure is logged (without memory text) and reported in the result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Protocol

from memdir.errors import ConfigError
from memdir.forget import resume_erasures, without_erased
from memdir.forget._guard import guard_messages
from memdir.memory._answer import describe_error, parse_flush_answer, valid_unicode
from memdir.memory._checks import (
    check_callable,
    check_int,
    check_model,
    check_number,
    check_text,
)
from memdir.memory._cursor import FlushCursor
from memdir.memory._entries import parse_bullets
from memdir.memory._guards import flush_scaffold
from memdir.memory._prompts import DEFAULT_FLUSH_PROMPT, flush_request
from memdir.memory._remote import on_the_server
from memdir.memory._testpoint import pause_point
from memdir.messages import SUMMARY_NAME, Msg
from memdir.messages._msg import as_list
from memdir.messages._render import FLUSH_RENDER, render_transcript
from memdir.models import (
    AUTO,
    ChatModel,
    Patience,
    check_patience,
    generate_patiently,
    resolve_patience,
)
from memdir.provenance._attribute import Attribution, attribute
from memdir.provenance._records import LedgerRecord, append_ledger_records, bullet_id
from memdir.provenance._trust import ORIGINS, guard
from memdir.redact import Redactor
from memdir.sessions import validate_session_id
from memdir.sessions._record import redact_message
from memdir.store.ledger import append_bullets, normalize_bullet
from memdir.store.workspace import Workspace

if TYPE_CHECKING:
    from memdir.index import SearchIndex

__all__ = [
    "ConsolidationRequester",
    "FlushResult",
    "MemoryFlushManager",
    "flushed_message_ids",
]

log = logging.getLogger("memdir.memory")

_HEADER = "Memory Flush"


def _lock_name(session_id: str) -> str:
    """The per-session lock (lock names are at most 100 characters; session ids 128)."""
    name = f"flush-{session_id}"
    if len(name) <= 100:
        return name
    return "flush-" + hashlib.sha256(session_id.encode()).hexdigest()[:40]


def _extractable(msg: Msg) -> bool:
    """Whether a message can hold new facts (not a system prompt or a compaction summary)."""
    return msg.role != "system" and msg.name != SUMMARY_NAME


class ConsolidationRequester(Protocol):
    """Anything that can be nudged after a flush (a :class:`MemoryMaintenanceScheduler`)."""

    def request_consolidation(self) -> None:
        """Ask for a consolidation soon; must not block."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushResult:
    """What one flush did.

    Attributes:
        bullets: the bullets written (after redaction and de-duplication).
        path: the ledger written to (workspace-relative), or ``None``.
        start_line: first written line (1-based), or ``None``.
        end_line: last written line (1-based, inclusive), or ``None``. When the flush wrote
            several blocks (long input), the span covers all of them.
        skipped: why nothing (more) was written: ``"no_new_messages"``,
            ``"nothing_to_extract"``, ``"no_reply"``, ``"all_known"``, ``"model_error"``,
            ``"timeout"``, ``"blank_answer"``, ``"unusable_answer"``, ``"oversized_answer"``,
            ``"erased"`` (a message was erased while the model read it: the messages stay
            queued); ``None`` when everything went to the ledger.
        messages_flushed: messages the cursor moved past.
        duplicates_dropped: bullets dropped because they were already known or repeated.
        redacted: bullets in which a secret was masked.
    """

    bullets: tuple[str, ...] = ()
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    skipped: str | None = None
    messages_flushed: int = 0
    duplicates_dropped: int = 0
    redacted: int = 0

    @property
    def written(self) -> bool:
        """Whether anything was appended to the ledger."""
        return bool(self.bullets)


class _Accumulator:
    """Totals over the chunks of one flush."""

    def __init__(self) -> None:
        self.bullets: list[str] = []
        self.path: str | None = None
        self.first: int | None = None
        self.last: int | None = None
        self.flushed = 0
        self.dropped = 0
        self.redacted = 0

    def result(self, skipped: str | None) -> FlushResult:
        return FlushResult(
            bullets=tuple(self.bullets),
            path=self.path,
            start_line=self.first,
            end_line=self.last,
            skipped=skipped,
            messages_flushed=self.flushed,
            duplicates_dropped=self.dropped,
            redacted=self.redacted,
        )


def flushed_message_ids(workspace: Workspace, session_id: str) -> frozenset[str]:
    """Ids of the messages of ``session_id`` that the flush has already extracted.

    The flush cursor remembers the newest flushed message and a window of recent ids; an empty
    set means the session was never flushed. Used to recognise a conversation that was already
    ingested.
    """
    cursor = FlushCursor.load(workspace, validate_session_id(session_id))
    ids = set(cursor.recent_ids)
    if cursor.last_id:
        ids.add(cursor.last_id)
    return frozenset(ids)


class MemoryFlushManager:
    """Extracts new facts from conversations into the daily ledger, exactly once.

    Args:
        workspace: the workspace to write to (or its path).
        model: the model that extracts facts (any :class:`~memdir.models.ChatModel`; the
            offline ``ExtractiveModel`` works too).
        index: a search index to update after each write (only the written file).
        scheduler: nudged (``request_consolidation()``) after each write.
        prompt: the system prompt; default :data:`DEFAULT_FLUSH_PROMPT`.
        redactor: masks secrets in bullets before they are written; default
            :class:`memdir.redact.Redactor`.
        timeout: seconds the model may go without progress (each streamed piece of its answer
            counts); ``"auto"`` follows the model (its ``timeout``: 120 s for a hosted API,
            600 s for a local server; else 300 s); ``None``: no limit.
        lock_timeout: seconds to wait for another flush of the same session to finish.
        max_input_chars: the rendered conversation is sent in chunks of about this size.
        max_answer_chars: a longer answer is refused as unusable.
        origin: where every message comes from, for provenance (``"ingest"`` for an
            ingested transcript); ``None``: from each message's role (the user's words are
            ``user``, the assistant's ``model``, a tool result's ``tool``). Each bullet's
            record (``memory/.provenance/``) names the session, the messages it was taken
            from and this origin; an instruction from an untrusted origin is quoted
            (:func:`memdir.provenance.guard`).
    """

    def __init__(
        self,
        workspace: Workspace | str,
        model: ChatModel,
        *,
        index: SearchIndex | None = None,
        scheduler: ConsolidationRequester | None = None,
        prompt: str | None = None,
        redactor: Callable[[str], str] | None = None,
        timeout: Patience = AUTO,
        lock_timeout: float = 300.0,
        max_input_chars: int = 48_000,
        max_answer_chars: int = 32_000,
        origin: str | None = None,
    ) -> None:
        owner = "MemoryFlushManager"
        if origin is not None and origin not in ORIGINS:
            raise ConfigError(
                f"{owner}: origin must be one of {', '.join(ORIGINS)}, not {origin!r}"
            )
        self.origin = origin
        self.workspace = Workspace.coerce(workspace)
        self.model = check_model(owner, model)
        self.index: SearchIndex | None = check_callable(owner, "index", index, method="index_file")
        self.scheduler: ConsolidationRequester | None = check_callable(
            owner, "scheduler", scheduler, method="request_consolidation"
        )
        self.prompt = check_text(owner, "prompt", prompt) or DEFAULT_FLUSH_PROMPT
        self.redactor: Callable[[str], str] = (
            check_callable(owner, "redactor", redactor) or Redactor()
        )
        self.timeout = check_patience(f"{owner} timeout", timeout)
        self.lock_timeout = check_number(owner, "lock_timeout", lock_timeout)
        self.max_input_chars = check_int(owner, "max_input_chars", max_input_chars, minimum=1_000)
        # One message larger than a whole chunk is sent as its head and tail: whole, it would
        # fail the same way on every flush and hold back every later message of the session.
        self._render = dataclasses.replace(FLUSH_RENDER, text=max(1_000, max_input_chars * 3 // 4))
        self.max_answer_chars = check_int(owner, "max_answer_chars", max_answer_chars, minimum=100)

    def compaction_hook(self, session_id: str) -> Callable[[Sequence[Msg]], Awaitable[FlushResult]]:
        """An ``on_flush`` callback for the compactor: flushes the prefix it is about to compact.

        The cursor makes the later post-call flush skip what this one extracted.
        """
        validate_session_id(session_id)

        async def on_flush(messages: Sequence[Msg], /, *_: object, **__: object) -> FlushResult:
            return await self.flush_memories(messages, session_id=session_id)

        return on_flush

    async def flush_memories(self, messages: Sequence[Msg], *, session_id: str) -> FlushResult:
        """Extract new facts from the messages after this session's cursor.

        Pass the whole current context each time; already flushed messages are skipped. On
        a workspace on a ``memdir serve`` server the server extracts them, with its model.

        Raises:
            MemdirError: the session id is invalid, ``messages`` is not a list of
                :class:`~memdir.messages.Msg`, or another flush of the session held the lock
                for longer than ``lock_timeout``.
        """
        validate_session_id(session_id)
        messages = as_list(messages, "flush_memories", of_msgs=True)
        if on_the_server(self.workspace, "flush"):
            assert self.workspace.remote is not None
            return await asyncio.to_thread(self.workspace.remote.flush, session_id, messages)
        acc = _Accumulator()
        async with self.workspace.async_lock(_lock_name(session_id), timeout=self.lock_timeout):
            cursor = FlushCursor.load(self.workspace, session_id)
            self._recover(cursor)
            # A message erased since the caller read it is read as the forget left it.
            new = guard_messages(self.workspace, cursor.select_new(messages))
            if not new:
                return acc.result("no_new_messages")
            last_skip: str | None = None
            for chunk in self._chunks(new):
                skipped = await self._flush_chunk(cursor, chunk, acc)
                if skipped is not None and skipped not in {"no_reply", "all_known"}:
                    return acc.result(skipped)
                last_skip = skipped
            if acc.bullets:
                self._after_write(acc.path)
                return acc.result(None)
            if not any(_extractable(m) for m in new):
                return acc.result("nothing_to_extract")
            return acc.result(last_skip)

    # -- steps ------------------------------------------------------------------------------

    def _recover(self, cursor: FlushCursor) -> None:
        """Settle an append interrupted by a crash (see :mod:`memdir.memory._cursor`)."""
        if cursor.pending is None:
            return
        pending = cursor.pending
        if cursor.pending_landed(self.workspace):
            ids = [i for i in pending.get("ids", []) if isinstance(i, str)]
            cursor.recent_ids = [*cursor.recent_ids, *ids]
            if ids:
                cursor.last_id = ids[-1]
            stamp = pending.get("last_created_at")
            if isinstance(stamp, str):
                cursor.last_created_at = datetime.fromisoformat(stamp)
            log.info("flush of session %s: completing an interrupted append", cursor.session_id)
        cursor.pending = None
        cursor.save(self.workspace)

    def _chunks(self, messages: list[Msg]) -> list[list[Msg]]:
        chunks: list[list[Msg]] = [[]]
        size = 0
        for msg in messages:
            cost = len(render_transcript([msg], self._render))
            if chunks[-1] and size + cost > self.max_input_chars:
                chunks.append([])
                size = 0
            chunks[-1].append(msg)
            size += cost
        return chunks

    async def _flush_chunk(
        self, cursor: FlushCursor, chunk: list[Msg], acc: _Accumulator
    ) -> str | None:
        ws = self.workspace
        useful = [m for m in chunk if _extractable(m)]
        transcript = render_transcript(useful, self._render)
        if not transcript.strip():
            self._advance(cursor, chunk, acc)
            return None
        day = ws.today()
        known = ws.read_text("MEMORY.md"), ws.read_text(ws.ledger_rel(day))
        # The model sees masked text only: the transcript, and the messages an offline model
        # reads in their place (a secret there could come back as a bullet of its own, with
        # the key id it was found by masked in another).
        request = flush_request(
            transcript=self.redactor(transcript),
            messages=[redact_message(m, self.redactor) for m in useful],
            memory_md=known[0],
            ledger=known[1],
            ledger_rel=ws.ledger_rel(day),
            today=day.isoformat(),
        )
        try:
            patience = resolve_patience(self.timeout, self.model)
            response = await generate_patiently(
                self.model, [request], system=self.prompt, timeout=patience
            )
            text = response.text
        except TimeoutError:
            log.warning(
                "memory flush of session %s: the model made no progress for %g s; "
                "the messages stay queued for the next flush",
                cursor.session_id,
                patience,
            )
            return "timeout"
        except Exception as exc:
            log.warning(
                "memory flush of session %s: the model call failed (%s); "
                "the messages stay queued for the next flush",
                cursor.session_id,
                describe_error(exc),
            )
            return "model_error"
        if len(text) > self.max_answer_chars:
            log.warning(
                "memory flush of session %s: refused a %d-character answer (limit %d)",
                cursor.session_id,
                len(text),
                self.max_answer_chars,
            )
            return "oversized_answer"
        prompt = flush_scaffold(self.prompt, day.isoformat(), ws.ledger_rel(day), transcript)
        answer = parse_flush_answer(text, prompt)
        if answer.dropped:
            log.warning("memory flush of session %s: dropped %s", cursor.session_id, answer.dropped)
        if not answer.usable:
            reason = "blank_answer" if not text.strip() else "unusable_answer"
            log.warning(
                "memory flush of session %s: the model's answer was %s; the messages stay queued",
                cursor.session_id,
                "blank" if reason == "blank_answer" else "no bullet list of facts, no NO_REPLY",
            )
            return reason
        if answer.nothing:
            self._advance(cursor, chunk, acc)
            return "no_reply"
        return self._commit(cursor, chunk, list(answer.bullets), day, acc)

    def _commit(
        self,
        cursor: FlushCursor,
        chunk: list[Msg],
        raw_bullets: list[str],
        day: date,
        acc: _Accumulator,
    ) -> str | None:
        ws = self.workspace
        bullets: list[str] = []
        sources: dict[str, Attribution] = {}
        for raw in raw_bullets:
            clean = self.redactor(valid_unicode(raw))
            if clean != raw:
                acc.redacted += 1
            found = attribute(clean, [m for m in chunk if _extractable(m)], origin=self.origin)
            clean = guard(clean, found.origin)  # an untrusted instruction is written quoted
            sources.setdefault(normalize_bullet(clean), found)
            bullets.append(clean)
        rel = ws.ledger_rel(day)
        # One lock across "what is known" and the append, so that two sessions extracting the
        # same fact at the same moment write it once.
        with ws.lock("flush-append"):
            resume_erasures(ws)
            if guard_messages(ws, chunk) is not chunk:
                # Erased while the model read it: its answer may restate the fact in other
                # words. Nothing is written; the chunk is read again, as the forget left it.
                log.warning("memory flush: a message was erased during the flush; nothing written")
                return "erased"
            allowed = without_erased(ws, bullets)  # a fact erased since it was read stays so
            acc.dropped += len(bullets) - len(allowed)
            bullets = allowed
            known = {b.key for b in parse_bullets(ws.read_text("MEMORY.md"))}
            known |= {b.key for b in parse_bullets(ws.read_text(rel))}
            fresh: list[str] = []
            for bullet in bullets:
                key = normalize_bullet(bullet)
                if not key or key in known:
                    acc.dropped += 1
                    continue
                known.add(key)
                fresh.append(bullet)
            if not fresh:
                self._advance(cursor, chunk, acc)
                return "all_known"
            target = ws.stat(rel)
            cursor.pending = {
                "rel": rel,
                "size": target.size if target is not None else 0,
                "bullets": fresh,
                "ids": [m.id for m in chunk],
                "last_created_at": max(m.created_at for m in chunk).isoformat(),
            }
            cursor.save(ws)
            pause_point("flush:before-append")
            path, first, last = append_bullets(ws, fresh, header=_HEADER, day=day)
            pause_point("flush:after-append")
            self._record(path, first, fresh, sources, cursor.session_id, chunk)
            self._advance(cursor, chunk, acc)
        acc.bullets.extend(fresh)
        acc.path = path
        acc.first = first if acc.first is None else acc.first
        acc.last = last
        return None

    def _record(
        self,
        rel: str,
        first: int,
        bullets: list[str],
        sources: dict[str, Attribution],
        session_id: str,
        chunk: list[Msg],
    ) -> None:
        """Write where each bullet came from to the ledger's provenance sidecar."""
        at = self.workspace.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")
        span = (chunk[0].id, chunk[-1].id)
        records = []
        for n, bullet in enumerate(bullets):
            found = sources.get(normalize_bullet(bullet), Attribution((), "unknown"))
            records.append(
                LedgerRecord(
                    id=bullet_id(bullet),
                    line=first + n,
                    origin=found.origin,
                    via="flush",
                    session=session_id,
                    messages=found.messages,
                    span=span,
                    at=at,
                )
            )
        append_ledger_records(self.workspace, rel, records)

    def _advance(self, cursor: FlushCursor, chunk: list[Msg], acc: _Accumulator) -> None:
        cursor.advance(chunk)
        cursor.save(self.workspace)
        acc.flushed += len(chunk)

    def _after_write(self, rel: str | None) -> None:
        if self.index is not None and rel is not None:
            try:
                self.index.index_file(rel)
            except Exception as exc:  # the ledger is the truth; the index catches up later
                log.warning("memory flush: re-indexing %s failed (%s)", rel, type(exc).__name__)
        if self.scheduler is not None:
            try:
                self.scheduler.request_consolidation()
            except Exception as exc:
                log.warning("memory flush: consolidation request failed (%s)", type(exc).__name__)
