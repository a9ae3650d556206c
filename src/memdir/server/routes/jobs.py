"""The jobs of a namespace: flush a conversation into memory, compact one, consolidate
``MEMORY.md``, maintenance status and runs. Each is the library's own call, made by the
server's :class:`~memdir.server.jobs.JobRunner` (off the event loop, one job at a time per
tenant, bounded by the job timeout) with the server's model (``memdir serve --model``)."""

from __future__ import annotations

from typing import Any, Final

import anyio.to_thread
from fastapi import Request

from memdir.compaction import (
    CompactionConfig,
    CompactionEvent,
    CompactionPlan,
    CompactionResult,
    ConversationCompactor,
)
from memdir.memory import (
    MemoryConsolidator,
    MemoryFlushManager,
    MemoryMaintenanceScheduler,
    read_schedule,
    request_consolidation,
)
from memdir.memory._lease import lease_holder
from memdir.messages import Msg, stable_ids, to_anthropic, to_openai
from memdir.models import ChatModel
from memdir.server.auth import Scope
from memdir.server.maintenance import consolidator
from memdir.server.policy import BoundNamespace, MemdirRouter, Policy
from memdir.server.problems import Problem
from memdir.server.routes.sessions import MESSAGES_LIMIT
from memdir.server.schemas.jobs import (
    Compacted,
    CompactIn,
    CompactionPlanOut,
    ConsolidationOut,
    FlushIn,
    FlushOut,
    JobOptions,
    LeaseOut,
    LogRef,
    MaintenanceReportOut,
    MaintenanceStatus,
    Size,
)
from memdir.server.schemas.sessions import to_msgs
from memdir.server.state import ServerState, server_state
from memdir.sessions import validate_session_id
from memdir.store.workspace import Workspace
from memdir.tools._core import shared_index

__all__ = ["router"]

READ: Final = Policy(scope=Scope.READ)
JOB: Final = Policy(scope=Scope.WRITE, job=True, idempotent=True)
MESSAGES_JOB: Final = Policy(
    scope=Scope.WRITE, body_limit=MESSAGES_LIMIT, job=True, idempotent=True
)
ADMIN_JOB: Final = Policy(scope=Scope.ADMIN, job=True, idempotent=True)
JOB_PROBLEMS: Final[dict[int | str, dict[str, Any]]] = {
    429: {"model": Problem, "description": "A job of this tenant runs now (Retry-After)."},
    503: {"model": Problem, "description": "The job ran past the job timeout, or the store is "
          "unavailable."},
}  # fmt: skip

router = MemdirRouter(prefix="/v1/namespaces/{ns}")


class _Requests:
    """Persists a consolidation request after a flush wrote, for whichever replica maintains
    the namespace next."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def request_consolidation(self) -> None:
        request_consolidation(self.ws)


def _flusher(ws: Workspace, model: ChatModel) -> MemoryFlushManager:
    return MemoryFlushManager(ws, model, index=shared_index(ws), scheduler=_Requests(ws))


def _consolidator(ws: Workspace, state: ServerState, model: ChatModel) -> MemoryConsolidator:
    return consolidator(ws, state.settings, model)


def _soon(state: ServerState, ns: str) -> None:
    """A flush may have asked for a consolidation: this process's sweeper serves it first."""
    if state.sweeper is not None:
        state.sweeper.soon(ns)


def _messages(body: FlushIn, session_id: str) -> list[Msg]:
    """The body's messages with ids: a message sent without one gets an id from the session,
    its position and its content, so the same conversation sent again (a retry after a lost
    answer) is recognised by the flush cursor and the session log."""
    msgs = to_msgs(body)
    stable = stable_ids(msgs, session_id)
    if body.format != "memdir":
        return stable
    return [m if "id" in raw else s for m, s, raw in zip(msgs, stable, body.messages, strict=True)]


@router.post("/flush", policy=MESSAGES_JOB, response_model=FlushOut, responses=JOB_PROBLEMS)
async def flush(bound: BoundNamespace, body: FlushIn, request: Request) -> FlushOut:
    """Extract the conversation's new facts into today's ledger with the server's model,
    exactly once per message (what was flushed already is skipped), and ask for a
    consolidation."""
    state = server_state(request)
    session_id = validate_session_id(body.session_id)
    msgs = _messages(body, session_id)
    ws = bound.ws

    async def job() -> FlushOut:
        done = await _flusher(ws, state.model()).flush_memories(msgs, session_id=session_id)
        return FlushOut.model_validate(done)

    try:
        return await state.jobs.run(bound.principal.tenant, "flush", job)
    finally:
        _soon(state, bound.ns)


def _compaction_config(body: CompactIn) -> CompactionConfig:
    given = {
        name: getattr(body, name)
        for name in ("trigger_messages", "trigger_tokens", "keep_messages", "keep_tokens")
        if getattr(body, name) is not None
    }
    return CompactionConfig(**given)


@router.post(
    "/compact",
    policy=MESSAGES_JOB,
    response_model=Compacted | CompactionPlanOut,
    responses=JOB_PROBLEMS,
)
async def compact(
    bound: BoundNamespace, body: CompactIn, request: Request
) -> Compacted | CompactionPlanOut:
    """Compact the conversation if a trigger fires (or ``force``): its originals go to the
    session log and its facts to memory first, then a summary replaces them; the answer is the
    new context in the request's format. ``dry_run``: where it would cut, without a model."""
    state = server_state(request)
    session_id = validate_session_id(body.session_id)
    msgs = _messages(body, session_id)
    config = _compaction_config(body)
    ws = bound.ws

    def plan() -> CompactionPlan:
        return ConversationCompactor(state.model(), ws, config).plan(msgs, force=body.force)

    if body.dry_run:
        return CompactionPlanOut.model_validate(await anyio.to_thread.run_sync(plan))

    async def job() -> Compacted:
        model = state.model()
        hook = _flusher(ws, model).compaction_hook(session_id)
        compactor = ConversationCompactor(model, ws, config, on_flush=hook)
        events: list[CompactionEvent] = []
        compactor.add_listener(events.append)
        result = await compactor.compact_if_needed(msgs, session_id=session_id, force=body.force)
        failed = next((e.reason for e in events if e.kind == "compaction.failed"), None)
        tokens = compactor.measure(msgs)[1]
        return _compacted(body.format, session_id, msgs, tokens, result, failed)

    try:
        return await state.jobs.run(bound.principal.tenant, "compaction", job)
    finally:
        _soon(state, bound.ns)


def _compacted(
    fmt: str,
    session_id: str,
    msgs: list[Msg],
    tokens: int,
    result: CompactionResult | None,
    failed: str | None,
) -> Compacted:
    """The answer of a compaction of ``msgs`` (``tokens`` of them), in the format ``fmt``."""
    after = result.messages if result is not None else msgs
    system = None
    if fmt == "openai":
        out = to_openai(after)
    elif fmt == "anthropic":
        system, out = to_anthropic(after)
    else:
        out = [m.to_dict() for m in after]
    span = result.log_span if result is not None else None
    return Compacted(
        compacted=result is not None,
        session_id=session_id,
        reason=result.reason if result is not None else None,
        stages=list(result.stages) if result is not None else [],
        before=Size(messages=len(msgs), tokens=tokens),
        after=Size(messages=len(after), tokens=result.tokens_after if result else tokens),
        summary=result.summary if result is not None else "",
        messages=out,
        system=system,
        log=LogRef.model_validate(span) if span is not None else None,
        error=failed if result is None else None,
    )


@router.post("/consolidate", policy=JOB, response_model=ConsolidationOut, responses=JOB_PROBLEMS)
async def consolidate(
    bound: BoundNamespace, request: Request, body: JobOptions | None = None
) -> ConsolidationOut:
    """Merge what the ledgers gained into ``MEMORY.md`` now, within the server's budget
    (``dry_run``: the new file and the diff, nothing written). Another consolidation running
    anywhere answers ``skipped: busy``."""
    state = server_state(request)
    dry_run = body is not None and body.dry_run
    ws = bound.ws

    async def job() -> ConsolidationOut:
        done = await _consolidator(ws, state, state.model()).consolidate(dry_run=dry_run)
        return ConsolidationOut.model_validate(done)

    return await state.jobs.run(bound.principal.tenant, "consolidation", job)


@router.get("/maintenance", policy=READ, response_model=MaintenanceStatus)
def maintenance_status(bound: BoundNamespace) -> MaintenanceStatus:
    """When maintenance and consolidation last ran (any process, any replica), a
    consolidation asked for and not served yet, and the leases of the runs going on now."""
    schedule = read_schedule(bound.ws)
    leases = {}
    for name in ("maintenance", "consolidation"):
        holder = lease_holder(bound.ws, name)
        leases[name] = LeaseOut(expires_at=holder.expires_at) if holder is not None else None
    return MaintenanceStatus(
        last_tick_at=schedule.last_tick_at,
        last_consolidation_at=schedule.last_consolidation_at,
        consolidation_requested_at=schedule.consolidation_requested_at,
        maintenance_lease=leases["maintenance"],
        consolidation_lease=leases["consolidation"],
    )


@router.post(
    "/maintenance/run",
    policy=ADMIN_JOB,
    response_model=MaintenanceReportOut,
    responses=JOB_PROBLEMS,
)
async def run_maintenance(
    bound: BoundNamespace, request: Request, body: JobOptions | None = None
) -> MaintenanceReportOut:
    """One maintenance pass now: archive old ledgers, consolidate, prune old session files,
    reindex (``dry_run``: what it would do). A pass running elsewhere answers ``skipped:
    busy``."""
    state = server_state(request)
    dry_run = body is not None and body.dry_run
    config = state.settings.maintenance_config
    ws = bound.ws

    async def job() -> MaintenanceReportOut:
        consolidator = _consolidator(ws, state, state.model())
        scheduler = MemoryMaintenanceScheduler(
            ws, consolidator, config=config, index=shared_index(ws)
        )
        return MaintenanceReportOut.model_validate(await scheduler.arun_once(dry_run=dry_run))

    return await state.jobs.run(bound.principal.tenant, "maintenance run", job)
