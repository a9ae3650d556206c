"""Hooks: code that observes or changes a stage of the agent loop.

A hook is any callable taking an :mod:`event <memdir.agent.events>` (sync or async). Register it
with :meth:`HarnessAgent.add_hook`; lower ``priority`` runs first, equal priorities run in
registration order. A hook that raises is reported (a :class:`HookErrorEvent` and a log line)
and the loop goes on without its change.

Built-in hooks and their priorities::

    ToolResultEvictionHook   50   PostActingEvent, PreReasoningEvent
    WorkspaceContextHook     60   PreReasoningEvent (system prompt)
    CompactionHook          100   PreReasoningEvent (measures the request the hooks above built)
    (user hooks)            500   by default
    MemoryFlushHook         900   PostCallEvent (the work runs in the background)

Eviction and compaction change the stored conversation (``PreReasoningEvent.replace_history``)
and reset the event's ``messages`` to it; a hook that edits only what the model sees should
run after them (priority above 100).
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from memdir.agent.events import (
    AgentEvent,
    HookErrorEvent,
    PostActingEvent,
    PostCallEvent,
    PreReasoningEvent,
)
from memdir.compaction import CompactionResult, ConversationCompactor
from memdir.errors import ConfigError
from memdir.eviction import (
    EVICTED_KEY,
    ToolResultEvictionConfig,
    ToolResultEvictor,
)
from memdir.memory import MemoryFlushManager
from memdir.messages import Msg
from memdir.store.workspace import Workspace

__all__ = [
    "DEFAULT_PRIORITY",
    "CompactionHook",
    "Hook",
    "HookFn",
    "HookRegistry",
    "MemoryFlushHook",
    "ToolResultEvictionHook",
]

logger = logging.getLogger("memdir.agent")

DEFAULT_PRIORITY = 500

HookFn: TypeAlias = Callable[[Any], Awaitable[None] | None]
"""A hook: called with an event; may be sync or async; its return value is ignored."""


class Hook:
    """Base class for hook objects.

    Attributes:
        events: the event types the hook handles (empty: every event).
        priority: the default priority (lower runs first).
    """

    events: ClassVar[tuple[type[AgentEvent], ...]] = ()
    priority: ClassVar[int] = DEFAULT_PRIORITY

    async def __call__(self, event: Any) -> None:
        """Handle ``event``."""


@dataclass(frozen=True, slots=True)
class _Entry:
    hook: HookFn
    priority: int
    events: tuple[type[AgentEvent], ...]
    seq: int
    name: str


class HookRegistry:
    """An ordered set of hooks and the dispatch of events to them."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._seq = itertools.count()
        self._by_type: dict[type[AgentEvent], list[_Entry]] = {}

    def add(
        self,
        hook: HookFn,
        *,
        priority: int | None = None,
        events: tuple[type[AgentEvent], ...] | None = None,
    ) -> None:
        """Register ``hook`` (see :meth:`HarnessAgent.add_hook`)."""
        if not callable(hook):
            raise ConfigError(f"a hook must be callable, not {type(hook).__name__}")
        chosen = priority if priority is not None else getattr(hook, "priority", DEFAULT_PRIORITY)
        if isinstance(chosen, bool) or not isinstance(chosen, int):
            raise ConfigError("hook priority must be an integer")
        kinds = events if events is not None else tuple(getattr(hook, "events", ()))
        for kind in kinds:
            if not (isinstance(kind, type) and issubclass(kind, AgentEvent)):
                raise ConfigError(f"hook events must be event classes, not {kind!r}")
        name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
        self._entries.append(_Entry(hook, chosen, kinds, next(self._seq), name))
        self._entries.sort(key=lambda e: (e.priority, e.seq))
        self._by_type.clear()

    def remove(self, hook: HookFn) -> bool:
        """Unregister ``hook``; returns whether it was registered."""
        before = len(self._entries)
        self._entries = [e for e in self._entries if e.hook is not hook]
        self._by_type.clear()
        return len(self._entries) != before

    def __len__(self) -> int:
        return len(self._entries)

    def hooks(self) -> list[HookFn]:
        """The registered hooks in the order they run."""
        return [e.hook for e in self._entries]

    def _for(self, kind: type[AgentEvent]) -> list[_Entry]:
        entries = self._by_type.get(kind)
        if entries is None:
            entries = [e for e in self._entries if not e.events or issubclass(kind, e.events)]
            self._by_type[kind] = entries
        return entries

    async def dispatch(self, event: AgentEvent) -> list[HookErrorEvent]:
        """Run the hooks for ``event`` in order; return an error event per failing hook."""
        errors: list[HookErrorEvent] = []
        for entry in self._for(type(event)):
            try:
                result = entry.hook(event)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                logger.warning(
                    "hook %s failed on %s: %s: %s",
                    entry.name,
                    type(event).__name__,
                    type(exc).__name__,
                    exc,
                    exc_info=logger.isEnabledFor(logging.DEBUG),
                )
                if isinstance(event, HookErrorEvent):
                    continue  # never report errors about error reports
                errors.append(
                    HookErrorEvent(
                        agent=event.agent,
                        session_id=event.session_id,
                        hook=entry.name,
                        event=type(event).__name__,
                        error=exc,
                    )
                )
        return errors


class ToolResultEvictionHook(Hook):
    """Moves oversized tool results to files (see :mod:`memdir.eviction`).

    Right after each tool call (so a huge output never reaches the stored conversation) and
    before each model call (the per-turn budget, and results that came from elsewhere).

    Args:
        workspace: where the files go.
        config: thresholds (default :meth:`ToolResultEvictionConfig.defaults`).
    """

    events = (PostActingEvent, PreReasoningEvent)
    priority = 50

    def __init__(
        self, workspace: Workspace, config: ToolResultEvictionConfig | None = None
    ) -> None:
        self.workspace = workspace
        self.config = config or ToolResultEvictionConfig.defaults()
        self._evictors: dict[str, ToolResultEvictor] = {}

    def evictor(self, session_id: str) -> ToolResultEvictor:
        """The evictor of ``session_id`` (created on first use)."""
        found = self._evictors.get(session_id)
        if found is None:
            found = ToolResultEvictor(self.workspace, self.config, session_id=session_id)
            self._evictors[session_id] = found
        return found

    async def __call__(self, event: Any) -> None:
        """Evict after a tool call, or enforce the limits before a model call."""
        evictor = self.evictor(event.session_id)
        if isinstance(event, PostActingEvent):
            msg = Msg(role="tool", content=(event.result,))
            names = {event.tool_call.id: event.tool_call.name}
            out = evictor.evict_message(msg, tool_names=names)
            if out is not msg:
                event.result = out.tool_results[0]
                merged = dict(event.metadata.get(EVICTED_KEY) or {})
                merged.update(out.metadata[EVICTED_KEY])
                event.metadata[EVICTED_KEY] = merged
        elif isinstance(event, PreReasoningEvent):
            outcome = evictor.evict(event.messages)
            if outcome.evicted:
                event.replace_history(outcome.messages)


class CompactionHook(Hook):
    """Compacts the conversation before a model call when a trigger fires.

    The compactor flushes the prefix to memory and offloads it to the session log before the
    context changes (see :class:`~memdir.compaction.ConversationCompactor`).

    Args:
        compactor: the compactor (its config holds the triggers).
    """

    events = (PreReasoningEvent,)
    priority = 100

    def __init__(self, compactor: ConversationCompactor) -> None:
        self.compactor = compactor
        self.last_result: CompactionResult | None = None

    async def __call__(self, event: Any) -> None:
        """Compact ``event.messages`` (the stored conversation) if needed."""
        result = await self.compactor.compact_if_needed(
            event.messages,
            session_id=event.session_id,
            system=event.system,
            tools=event.tools,
        )
        if result is not None:
            self.last_result = result
            event.replace_history(result.messages)


class MemoryFlushHook(Hook):
    """After each reply, extracts new facts into the daily ledger, in the background.

    The flush is exactly-once per message (the manager keeps a cursor), so the whole
    conversation is handed over each time. The reply is never delayed; ``agent.close()``
    drains the work. A write nudges the manager's scheduler to consolidate.

    Args:
        manager: the flush manager.
    """

    events = (PostCallEvent,)
    priority = 900

    def __init__(self, manager: MemoryFlushManager) -> None:
        self.manager = manager

    async def __call__(self, event: Any) -> None:
        """Start the flush of ``event.session_id`` as a background task of the agent."""
        history = event.agent.history(event.session_id)
        event.agent.spawn_background(
            self.manager.flush_memories(history, session_id=event.session_id),
            name=f"memdir-flush-{event.session_id}",
        )


def merge_metadata(target: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Merge per-result metadata into a tool message's metadata (one level deep for dicts)."""
    for key, value in extra.items():
        current = target.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            target[key] = {**current, **value}
        else:
            target[key] = value
