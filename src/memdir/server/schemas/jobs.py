"""Bodies of the job routes: flush, compact, consolidate, maintenance status and runs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from memdir.server.schemas.meta import FromLibrary
from memdir.server.schemas.sessions import MessagesIn

__all__ = [
    "CompactIn",
    "Compacted",
    "CompactionPlanOut",
    "ConsolidationOut",
    "EmbedStatsOut",
    "FlushIn",
    "FlushOut",
    "IndexStatsOut",
    "JobOptions",
    "LeaseOut",
    "LogRef",
    "MaintenanceReportOut",
    "MaintenanceStatus",
    "Size",
]


class FlushIn(MessagesIn):
    """A conversation to extract facts from (send all of it each time: what was flushed
    already is skipped)."""

    session_id: str = Field(description="The session: [A-Za-z0-9._-], at most 128 characters.")


class FlushOut(FromLibrary):
    """What a flush wrote (as :class:`memdir.memory.FlushResult`)."""

    bullets: list[str] = Field(description="The bullets written (secrets masked).")
    path: str | None = Field(description="The ledger written to.")
    start_line: int | None
    end_line: int | None
    skipped: str | None = Field(
        description="Why nothing (more) was written: no_new_messages, nothing_to_extract, "
        "all_known, model_error, timeout, ...; null: everything went to the ledger."
    )
    messages_flushed: int
    duplicates_dropped: int
    redacted: int
    written: bool


class CompactIn(FlushIn):
    """A conversation to compact, and how (unset: the library's defaults)."""

    trigger_messages: int | None = Field(default=None, ge=0, description="0: off.")
    trigger_tokens: int | None = Field(default=None, ge=0, description="0: off.")
    keep_messages: int | None = Field(default=None, ge=0)
    keep_tokens: int | None = Field(default=None, ge=0)
    force: bool = Field(default=False, description="Compact even below the triggers.")
    dry_run: bool = Field(default=False, description="Only say where it would cut.")


class Size(BaseModel):
    """The size of a conversation."""

    messages: int
    tokens: int = Field(description="Estimated tokens of the whole request.")


class LogRef(FromLibrary):
    """Lines of the session log that hold the messages a compaction took out."""

    path: str
    start_line: int
    end_line: int


class Compacted(BaseModel):
    """A compaction's result: the new context, in the format of the request."""

    dry_run: Literal[False] = False
    compacted: bool = Field(description="False: nothing changed (messages are the input's).")
    session_id: str
    reason: str | None = Field(description="What triggered it: messages, tokens, forced, ...")
    stages: list[str]
    before: Size
    after: Size
    summary: str = Field(description="The summary text ('' without a summary).")
    messages: list[dict[str, Any]] = Field(description="The compacted conversation.")
    system: str | None = Field(description="The system prompt (anthropic format only).")
    log: LogRef | None = Field(description="Where the summarised originals are logged.")
    error: str | None = Field(description="Why nothing was compacted, when it was tried.")


class CompactionPlanOut(FromLibrary):
    """Where a compaction would cut (a dry run: no model call, nothing written)."""

    dry_run: Literal[True] = True
    reason: str | None = Field(description="The trigger that fires; null: none would run.")
    messages: int
    tokens: int
    cut_index: int | None
    summarized: int
    kept: int


class JobOptions(BaseModel):
    """Options of a consolidation or a maintenance run."""

    dry_run: bool = Field(default=False, description="Compute what would change; write nothing.")


class ConsolidationOut(FromLibrary):
    """What a consolidation did (as :class:`memdir.memory.ConsolidationResult`)."""

    added: list[str]
    # Pairs as arrays of two strings, not tuples: a tuple's `prefixItems` (JSON Schema 2020-12)
    # is turned by schemathesis 4, like other tools of older drafts, into an `items` array, a
    # schema OpenAPI 3.1 does not allow: it refused the consolidate routes' answers.
    changed: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        description="[old, new] pairs."
    )
    removed: list[str]
    trimmed: list[str]
    entries: int = Field(description="Ledger bullets consumed.")
    files: list[str]
    before_chars: int
    after_chars: int
    max_chars: int
    skipped: str | None = Field(
        description="Why nothing (more) was applied: busy, nothing_new, model_error, ...",
    )
    dry_run: bool
    text: str | None = Field(description="The new MEMORY.md (in a dry run too).")
    history_path: str | None
    batches: int
    applied: bool


class LeaseOut(BaseModel):
    """A job being run now, somewhere (its lease)."""

    expires_at: datetime = Field(description="When its lease ends unless renewed.")


class MaintenanceStatus(BaseModel):
    """When maintenance last ran, a consolidation waiting, and what runs now."""

    last_tick_at: datetime | None
    last_consolidation_at: datetime | None
    consolidation_requested_at: datetime | None = Field(
        description="A consolidation asked for (by a flush) and not served yet."
    )
    maintenance_lease: LeaseOut | None = Field(description="A maintenance run holds it now.")
    consolidation_lease: LeaseOut | None = Field(description="A consolidation runs now.")


class IndexStatsOut(FromLibrary):
    """What reindexing did."""

    files_indexed: int
    files_unchanged: int
    files_removed: int
    lines_indexed: int
    seconds: float


class EmbedStatsOut(FromLibrary):
    """What computing vectors did."""

    embedded: int
    pending: int
    total: int
    removed: int
    seconds: float


class MaintenanceReportOut(FromLibrary):
    """What a maintenance run did (as :class:`memdir.memory.MaintenanceReport`)."""

    archived: list[str]
    consolidation: ConsolidationOut | None
    sessions_deleted: list[str]
    tool_results_deleted: list[str]
    cursors_deleted: list[str]
    index: IndexStatsOut | None
    vectors: EmbedStatsOut | None
    errors: list[str]
    skipped: str | None = Field(description="busy: another process runs maintenance now.")
    dry_run: bool
