"""Replaying one prepared transcript through the agent's memory hooks.

The replay walks the conversation as the agent lived it. Every assistant message stands for a
model call, so before it the conversation so far goes through the agent's own
``PreReasoningEvent`` hooks (tool-result eviction, workspace context, compaction with its flush
and offload); each tool message is evicted as it arrives, as after a tool call. The workspace
clock follows the messages' times when the transcript has them, and the conversation is
flushed whenever a day ends, so facts land in the ledger of the day they were said. At the end
the rest is flushed and every message not yet offloaded goes to the session log.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memdir.agent import HarnessAgent, PreReasoningEvent
from memdir.compaction import CompactionEvent
from memdir.errors import ConfigError
from memdir.eviction import EVICTED_KEY, ToolResultEvictor
from memdir.memory import FlushResult, MemoryFlushManager
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.store.workspace import Workspace

__all__ = ["ReplayClock", "Replayer", "SessionOutcome"]

Progress = Callable[[int], None]

# Flush outcomes that leave the messages queued (the model did not give a usable answer).
_FLUSH_FAILURES = frozenset(
    {"model_error", "timeout", "blank_answer", "unusable_answer", "oversized_answer"}
)


class ReplayClock:
    """The replay workspace's clock: the time of the message at hand, else the real clock."""

    def __init__(self, fallback: Callable[[], datetime]) -> None:
        self.fallback = fallback
        self.at: datetime | None = None

    def __call__(self) -> datetime:
        return self.at if self.at is not None else self.fallback()


@dataclass(slots=True, kw_only=True)
class SessionOutcome:
    """What the replay of one session did (the public report is built from it)."""

    logged: int = 0
    compactions: int = 0
    bullets: list[str] = field(default_factory=list)
    ledgers: list[str] = field(default_factory=list)
    evicted: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    already_ingested: bool = False

    def add_flush(self, result: FlushResult) -> None:
        """Record one flush."""
        self.bullets.extend(result.bullets)
        if result.path and result.path not in self.ledgers:
            self.ledgers.append(result.path)
        if result.skipped in _FLUSH_FAILURES:
            note = f"memory flush failed ({result.skipped}); run ingest again to retry"
            if note not in self.warnings:
                self.warnings.append(note)


class Replayer:
    """Replays conversations into one workspace with one agent's hooks.

    Args:
        agent: a :class:`HarnessAgent` on the replay workspace (its clock is ``clock``), with
            memory flush on; its eviction and compaction hooks are used when present.
        clock: the replay workspace's clock.
    """

    def __init__(self, agent: HarnessAgent, clock: ReplayClock) -> None:
        if agent.flush_manager is None:
            raise ConfigError("the replay agent needs memory_flush=True")
        self.agent = agent
        self.flush_manager: MemoryFlushManager = agent.flush_manager
        self.clock = clock
        self.ws: Workspace = agent.workspace
        self._outcome = SessionOutcome()
        self._hooks = [hook for hook in agent.hooks if _handles(hook, PreReasoningEvent)]
        if agent.compaction_hook is not None:
            compactor = agent.compaction_hook.compactor
            compactor.on_flush = self._flush_prefix
            compactor.add_listener(self._on_compaction)

    async def replay(
        self,
        session_id: str,
        msgs: Sequence[Msg],
        *,
        timestamped: bool,
        progress: Progress | None = None,
    ) -> SessionOutcome:
        """Replay ``msgs`` as session ``session_id``; see the module docstring."""
        out = self._outcome = SessionOutcome()
        if not msgs:
            return out
        log = SessionLog(self.ws, session_id)
        source = {m.id for m in msgs}
        known = source & log.ids()
        if known == source:
            # Replayed to the end before: only a flush that failed then may be left to do.
            self._at(msgs[-1], timestamped)
            await self._flush(msgs, session_id)
            out.already_ingested = True
            if progress is not None:
                progress(len(msgs))
            return out
        evictor = self._evictor(session_id)
        history: list[Msg] = []
        names: dict[str, str] = {}  # tool name by call id, for results that lack one
        for number, msg in enumerate(msgs, start=1):
            if timestamped and history and self._new_day(msg):
                await self._flush(history, session_id)
            self._at(msg, timestamped)
            if msg.role == "assistant" and history:
                history = await self._before_model_call(session_id, history)
            if msg.role == "tool" and evictor is not None:
                msg = evictor.evict_message(msg, tool_names=names)
                self._note_evictions([msg])
            names.update((call.id, call.name) for call in msg.tool_uses)
            history.append(msg)
            if progress is not None:
                progress(number)
        if evictor is not None:
            history = evictor.evict(history).messages
            self._note_evictions(history)
        await self._flush(history, session_id)
        # The transcript's own messages, not the summaries this replay made.
        log.append([m for m in history if m.id in source])
        out.logged = len(source & log.ids()) - len(known)
        return out

    # -- steps ----------------------------------------------------------------------------

    def _evictor(self, session_id: str) -> ToolResultEvictor | None:
        hook = self.agent.eviction_hook
        return hook.evictor(session_id) if hook is not None else None

    def _at(self, msg: Msg, timestamped: bool) -> None:
        self.clock.at = msg.created_at if timestamped else None

    def _new_day(self, msg: Msg) -> bool:
        if self.clock.at is None:
            return False
        zone = self.ws.now().tzinfo
        return msg.created_at.astimezone(zone).date() != self.ws.today()

    async def _before_model_call(self, session_id: str, history: list[Msg]) -> list[Msg]:
        """The agent's hooks for the model call that produced the next message."""
        event = PreReasoningEvent(
            agent=self.agent,
            session_id=session_id,
            messages=list(history),
            system=self.agent.system_prompt,
            tools=[],
            iteration=0,
        )
        for hook in self._hooks:
            result = hook(event)
            if inspect.isawaitable(result):
                await result
        before = {id(m) for m in history}
        self._note_evictions([m for m in event.messages if id(m) not in before])
        return list(event.messages)

    async def _flush(self, msgs: Sequence[Msg], session_id: str) -> None:
        result = await self.flush_manager.flush_memories(msgs, session_id=session_id)
        self._outcome.add_flush(result)

    async def _flush_prefix(self, msgs: Sequence[Msg], *, session_id: str) -> None:
        # What the agent does before a compaction, with the result kept for the report.
        await self._flush(msgs, session_id)

    def _on_compaction(self, event: CompactionEvent) -> None:
        if event.kind == "compaction.completed":
            self._outcome.compactions += 1

    def _note_evictions(self, history: Sequence[Msg]) -> None:
        for msg in history:
            flags = msg.metadata.get(EVICTED_KEY)
            if isinstance(flags, Mapping):
                self._outcome.evicted.update(flags)


def _handles(hook: object, kind: type) -> bool:
    kinds = getattr(hook, "events", ())
    return not kinds or any(issubclass(kind, k) for k in kinds)
