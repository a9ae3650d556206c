"""The results of :mod:`memdir.client` that the library has no type of its own for.

Everything else a call returns is the library's own type: ``SearchHit``, ``AddResult``,
``MemoryExcerpt``, ``SessionHit``, ``LogRecord``, ``LogSpan``, ``FlushResult``,
``ConsolidationResult``, ``MaintenanceReport``, ``CuratedWrite``, ``TransferReport``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, NamedTuple

from memdir.sessions import LogSpan

__all__ = ["Compacted", "Ledger", "MaintenanceStatus", "MemoryMd", "SessionSummary", "WhoAmI"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WhoAmI:
    """The caller, as its key says.

    Attributes:
        tenant: the key's tenant.
        key_id: the key's public id (what ``memdir keys list`` and the access log show).
        scope: ``read``, ``write`` or ``admin``.
        namespace_prefix: the key reaches the namespaces whose names start with this.
        namespace: when set, the one namespace the key reaches.
        expires_at: when the key expires (``None``: never).
    """

    tenant: str
    key_id: str
    scope: str
    namespace_prefix: str
    namespace: str | None
    expires_at: dt.datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """A daily ledger of a namespace.

    Attributes:
        date: its day.
        path: its workspace-relative path (``memory/2026-10-14.md``, or under
            ``memory/archive/``).
        size: its size in bytes.
        archived: it was moved to ``memory/archive/``.
    """

    date: dt.date
    path: str
    size: int
    archived: bool


class MemoryMd(NamedTuple):
    """``MEMORY.md`` and its version (pass the version to ``replace_memory_md``).

    Unpacks as ``text, version = ns.read_memory_md()``.
    """

    text: str
    version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """A logged session (what ``session_list`` shows).

    Attributes:
        session_id: the session id.
        path: its log, ``sessions/<id>.log.jsonl``.
        first_at: when its first logged message was written.
        last_at: when its last logged message was written.
        messages: how many messages it holds.
        summary: its first user message, on one line and shortened.
        lines: how many lines its log has (``0``: a server that does not say).
    """

    session_id: str
    path: str
    first_at: dt.datetime | None
    last_at: dt.datetime | None
    messages: int
    summary: str
    lines: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A job someone runs now: when its lease ends unless it is renewed."""

    expires_at: dt.datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceStatus:
    """When a namespace was last maintained, and what runs on it now.

    Attributes:
        last_tick_at: the last maintenance run.
        last_consolidation_at: the last consolidation.
        consolidation_requested_at: a consolidation asked for (by a flush) and not yet run.
        maintenance_lease: a maintenance run holds it now (``None``: nobody).
        consolidation_lease: a consolidation runs now (``None``: nobody).
    """

    last_tick_at: dt.datetime | None = None
    last_consolidation_at: dt.datetime | None = None
    consolidation_requested_at: dt.datetime | None = None
    maintenance_lease: Lease | None = None
    consolidation_lease: Lease | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationSize:
    """How big a conversation is: its messages and the estimated tokens of the request."""

    messages: int
    tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """A conversation compacted by the server.

    Attributes:
        compacted: whether anything was compacted (``False``: under every trigger).
        session_id: the session whose log holds what was taken out.
        reason: what triggered it (``messages``, ``tokens``, ``forced``...).
        stages: the stages applied, in order (as ``CompactionResult.stages``).
        before: the conversation's size before.
        after: its size after.
        messages: the compacted conversation, to send to the model instead: ``Msg`` objects
            for the ``memdir`` format, else dicts in the format of the request.
        summary: the summary text (``""``: none was made).
        system: the system prompt (``anthropic`` format only).
        log: the session-log lines holding the messages taken out (``None``: none).
        error: why nothing was compacted, when it was tried.
    """

    compacted: bool
    session_id: str = ""
    reason: str | None = None
    stages: tuple[str, ...] = ()
    before: ConversationSize
    after: ConversationSize
    messages: list[Any]
    summary: str = ""
    system: str | None = None
    log: LogSpan | None = None
    error: str | None = None
