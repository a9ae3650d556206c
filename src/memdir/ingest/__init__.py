"""Ingest: past agent conversations become searchable long-term memory.

::

    from memdir.ingest import ingest_sync

    report = ingest_sync(["~/.claude/projects/my-app/"], workspace="~/notes/memory")
    print(report.bullets, "facts,", report.compactions, "compactions")

Each transcript (any format :func:`memdir.ingest.transcripts.load_transcript` reads: memdir session
logs, OpenAI and Anthropic message lists, Claude Code sessions) is replayed as its own session
through the same hooks and components a :class:`~memdir.agent.HarnessAgent` uses: huge tool
results are evicted to ``large_tool_results/``, the conversation is compacted when it passes the
triggers (flush to the ledger, offload to ``sessions/<id>.log.jsonl``, summary), the rest is
flushed at the end, new ledger entries are consolidated into ``MEMORY.md``, and the memory files
are indexed. Secrets are masked before anything is written or sent to a model.

Ingest is idempotent: a transcript ingested before writes nothing new (the session log and the
flush cursor know its messages). Facts are filed under the day they were said when the
transcript carries times (memdir logs, Claude Code), else under today. See ``docs/ingest.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdir._sync import run_sync
from memdir.compaction import CompactionConfig
from memdir.errors import ConfigError, MemdirError
from memdir.eviction import ToolResultEvictionConfig
from memdir.index import IndexStats
from memdir.ingest._prepare import Prepared, allocate_session_id, prepare
from memdir.ingest._replay import ReplayClock, Replayer, SessionOutcome
from memdir.ingest.transcripts import TranscriptFormat, load_transcript, session_id_for
from memdir.memory import ConsolidationResult
from memdir.models import ChatModel
from memdir.redact import Redactor
from memdir.store.workspace import MEMORY_MD, Workspace

__all__ = [
    "DEFAULT_INGEST_EVICTION",
    "IngestFailure",
    "IngestProgress",
    "IngestReport",
    "SessionReport",
    "expand_paths",
    "ingest",
    "ingest_sync",
]

DEFAULT_INGEST_EVICTION = ToolResultEvictionConfig(excluded_tool_names=frozenset())
"""Eviction for replays: the default limits, and no tool is exempt. The live agent never evicts
its own ``read_file`` (it pages), but a transcript's tools are someone else's: a 200 kB file
read is just a 200 kB result."""

_SUFFIXES = (".json", ".jsonl")
_DEFAULT_COMPACTION = CompactionConfig()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionReport:
    """What ingesting one transcript did.

    Attributes:
        source: the file.
        session_id: the session it was replayed as (``sessions/<id>.log.jsonl``).
        format: the transcript format.
        messages: messages in the transcript.
        logged: messages of the transcript newly written to the session log (0 on a repeated
            ingest; compaction summaries folded into the log are not counted).
        compactions: compactions during the replay.
        bullets: facts written to the ledgers.
        ledgers: the ledgers written to (workspace-relative).
        evicted: tool results moved to ``large_tool_results/``.
        already_ingested: every message was already in the session log.
        warnings: things that went wrong without stopping the ingest (e.g. a failed flush).
    """

    source: str
    session_id: str
    format: TranscriptFormat
    messages: int
    logged: int
    compactions: int
    bullets: tuple[str, ...]
    ledgers: tuple[str, ...]
    evicted: int
    already_ingested: bool = False
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "source": self.source,
            "session_id": self.session_id,
            "format": self.format,
            "messages": self.messages,
            "logged": self.logged,
            "compactions": self.compactions,
            "bullets": list(self.bullets),
            "ledgers": list(self.ledgers),
            "evicted": self.evicted,
            "already_ingested": self.already_ingested,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestFailure:
    """A file that could not be ingested.

    Attributes:
        source: the file.
        error: one line saying why.
    """

    source: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestProgress:
    """Where an ingest stands, for progress displays.

    Attributes:
        source: the file being replayed.
        session_id: its session id.
        done: messages of this file replayed so far.
        total: messages in this file.
        file_number: 1 for the first file, then 2, 3...
        files: files to ingest.
    """

    source: str
    session_id: str
    done: int
    total: int
    file_number: int
    files: int


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestReport:
    """What an ingest did.

    Attributes:
        workspace: the workspace root.
        sessions: one report per ingested transcript, in the order given.
        failures: files that could not be read or replayed.
        consolidation: the consolidation into ``MEMORY.md`` (``None`` when it was off or no
            file was ingested).
        memory_chars: size of ``MEMORY.md`` afterwards, in characters.
        memory_lines: lines of ``MEMORY.md`` afterwards.
        index: what indexing did (``None`` if it failed; the next search catches up).
    """

    workspace: str
    sessions: tuple[SessionReport, ...]
    failures: tuple[IngestFailure, ...] = ()
    consolidation: ConsolidationResult | None = None
    memory_chars: int = 0
    memory_lines: int = 0
    index: IndexStats | None = field(default=None)

    @property
    def ok(self) -> bool:
        """Whether every file was ingested."""
        return not self.failures

    @property
    def messages(self) -> int:
        """Messages in all ingested transcripts."""
        return sum(s.messages for s in self.sessions)

    @property
    def compactions(self) -> int:
        """Compactions over all transcripts."""
        return sum(s.compactions for s in self.sessions)

    @property
    def bullets(self) -> int:
        """Facts written to the ledgers."""
        return sum(len(s.bullets) for s in self.sessions)

    @property
    def evicted(self) -> int:
        """Tool results moved to files."""
        return sum(s.evicted for s in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``memdir ingest --json`` prints)."""
        cons = self.consolidation
        return {
            "workspace": self.workspace,
            "ok": self.ok,
            "sessions": [s.to_dict() for s in self.sessions],
            "failures": [{"source": f.source, "error": f.error} for f in self.failures],
            "totals": {
                "files": len(self.sessions),
                "messages": self.messages,
                "compactions": self.compactions,
                "bullets": self.bullets,
                "evicted": self.evicted,
            },
            "consolidation": None
            if cons is None
            else {
                "applied": cons.applied,
                "skipped": cons.skipped,
                "entries": cons.entries,
                "added": len(cons.added),
                "before_chars": cons.before_chars,
                "after_chars": cons.after_chars,
            },
            "memory_md": {"chars": self.memory_chars, "lines": self.memory_lines},
            "index": None
            if self.index is None
            else {
                "files_indexed": self.index.files_indexed,
                "lines_indexed": self.index.lines_indexed,
            },
        }


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files to ingest: files as given; for a directory, its ``*.json`` and ``*.jsonl`` files
    (sorted, not recursive). A missing path is kept (it is reported as a failure)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            out.extend(sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES))
        else:
            out.append(path)
    return out


async def ingest(
    paths: Iterable[str | os.PathLike[str]],
    *,
    workspace: Workspace | str | os.PathLike[str] | None = None,
    namespace: str | None = None,
    model: ChatModel | None = None,
    compaction: CompactionConfig | None = _DEFAULT_COMPACTION,
    tool_result_eviction: ToolResultEvictionConfig | None = DEFAULT_INGEST_EVICTION,
    session_id: str | None = None,
    consolidate: bool = True,
    max_memory_tokens: int = 4000,
    redactor: Callable[[str], str] | None = None,
    progress: Callable[[IngestProgress], None] | None = None,
) -> IngestReport:
    """Replay transcripts into the workspace's memory (see the module docstring).

    Args:
        paths: transcript files, or directories of ``*.json`` / ``*.jsonl`` files.
        workspace: the workspace (a :class:`Workspace`, a directory, or ``None`` for the
            default).
        namespace: whose memory in that workspace the transcripts go to (a user's; see
            :func:`memdir.namespace_for`); default: the workspace's own.
        model: writes summaries, extracts facts and consolidates; default the offline
            :class:`~memdir.models.ExtractiveModel`.
        compaction: triggers and tail size (default :class:`CompactionConfig`, as the agent);
            ``None`` turns compaction off (facts are still extracted, in chunks).
        tool_result_eviction: eviction settings; ``None`` turns eviction off.
        session_id: the session id for the transcripts (default: each file's own); when it
            is taken by another conversation, ``-2``, ``-3``... is appended.
        consolidate: merge the new ledger entries into ``MEMORY.md`` at the end (only when
            at least one file was ingested).
        max_memory_tokens: the size budget of ``MEMORY.md``.
        redactor: masks secrets (default :class:`memdir.redact.Redactor`).
        progress: called after each replayed message.

    Returns:
        The report. Files that cannot be read or replayed are listed in ``failures``; the
        others are ingested all the same.

    Raises:
        ConfigError: bad settings (e.g. an invalid ``session_id``).
    """
    from memdir.agent import HarnessAgent
    from memdir.models import ExtractiveModel

    ws = Workspace.coerce(workspace, namespace)
    if session_id is not None and session_id_for(session_id) != session_id:
        raise ConfigError(
            f"invalid session id {session_id!r}: use 1-128 characters from [A-Za-z0-9._-]"
        )
    model = model or ExtractiveModel()
    mask = redactor or Redactor()
    clock = ReplayClock(ws.utc_now)
    replay_ws = ws.with_clock(clock)
    agent = HarnessAgent(
        name="ingest",
        model=model,
        workspace=replay_ws,
        compaction=compaction,
        tool_result_eviction=tool_result_eviction,
        memory_flush=True,
        maintenance=None,
        memory_tools=False,
        file_tools=False,
    )
    if agent.flush_manager is not None:
        agent.flush_manager.redactor = mask
        agent.flush_manager.origin = "ingest"  # an ingested file is not the user speaking
    replayer = Replayer(agent, clock)
    paths = list(paths)
    files = expand_paths(paths)
    sessions: list[SessionReport] = []
    failures = [
        IngestFailure(source=str(path), error=f"no transcript files (*.json, *.jsonl) in {path}")
        for path in map(Path, paths)
        if path.expanduser().is_dir() and not expand_paths([path])
    ]
    taken: set[str] = set()
    try:
        for number, path in enumerate(files, start=1):
            try:
                prepared = prepare(load_transcript(path), mask)
                sid = allocate_session_id(
                    ws, session_id or prepared.transcript.session_id, prepared.messages, taken
                )
                taken.add(sid)
                outcome = await replayer.replay(
                    sid,
                    prepared.messages,
                    timestamped=prepared.timestamped,
                    progress=_progress_for(progress, prepared, sid, number, len(files)),
                )
            except (MemdirError, OSError) as exc:
                failures.append(IngestFailure(source=str(path), error=_one_line(exc)))
                continue
            sessions.append(_session_report(prepared, sid, outcome))
    finally:
        await agent.close()
    return await _finish(ws, model, sessions, failures, consolidate, max_memory_tokens, mask)


def ingest_sync(paths: Iterable[str | os.PathLike[str]], **kwargs: Any) -> IngestReport:
    """:func:`ingest` for synchronous code (same arguments).

    Raises:
        ConfigError: called inside a running event loop (``await ingest(...)`` there).
    """
    return run_sync(
        ingest(paths, **kwargs),
        name="ingest_sync",
        instead="use `await ingest(...)` there",
    )


async def _finish(
    ws: Workspace,
    model: ChatModel,
    sessions: list[SessionReport],
    failures: list[IngestFailure],
    consolidate: bool,
    max_memory_tokens: int,
    redactor: Callable[[str], str],
) -> IngestReport:
    from memdir.index import MemoryIndex
    from memdir.memory import MemoryConsolidator

    consolidation = None
    # Only after something was ingested: a run of bad paths must not merge unrelated entries.
    if consolidate and sessions:
        consolidation = await MemoryConsolidator(
            ws, model, max_memory_tokens=max_memory_tokens, redactor=redactor
        ).consolidate()
    stats: IndexStats | None = None
    try:
        with MemoryIndex(ws) as index:
            stats = index.index_all_from_workspace()
    except MemdirError:
        stats = None  # the files are written; the next search re-indexes
    text = ws.read_text(MEMORY_MD)
    return IngestReport(
        workspace=ws.describe(),
        sessions=tuple(sessions),
        failures=tuple(failures),
        consolidation=consolidation,
        memory_chars=len(text),
        memory_lines=len(text.splitlines()),
        index=stats,
    )


def _progress_for(
    callback: Callable[[IngestProgress], None] | None,
    prepared: Prepared,
    sid: str,
    number: int,
    files: int,
) -> Callable[[int], None] | None:
    if callback is None:
        return None
    source, total = prepared.transcript.source, len(prepared.messages)

    def report(done: int) -> None:
        callback(
            IngestProgress(
                source=source,
                session_id=sid,
                done=done,
                total=total,
                file_number=number,
                files=files,
            )
        )

    return report


def _session_report(prepared: Prepared, sid: str, outcome: SessionOutcome) -> SessionReport:
    t = prepared.transcript
    return SessionReport(
        source=t.source,
        session_id=sid,
        format=t.format,
        messages=len(prepared.messages),
        logged=outcome.logged,
        compactions=outcome.compactions,
        bullets=tuple(outcome.bullets),
        ledgers=tuple(sorted(outcome.ledgers)),
        evicted=len(outcome.evicted),
        already_ingested=outcome.already_ingested,
        warnings=tuple(outcome.warnings),
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
