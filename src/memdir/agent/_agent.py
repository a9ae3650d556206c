"""HarnessAgent: a tool-calling loop with durable memory and a context that does not overflow.

::

    agent = HarnessAgent(name="MyAgent", model=model, workspace=ws, tools=[my_tool])
    reply = await agent.call("What did we decide about the database?")

Each call appends the input to the session, then loops: hooks prepare the request
(eviction, compaction, workspace context), the model answers, its tool calls run (concurrently),
results go back, until the model answers without tools or ``max_iters`` is reached. The session's
conversation is persisted after every step (``sessions/<id>.state.json``). Calls on one session
are serialised: in one process by an asyncio lock, across processes by a file lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, TypeAlias

from memdir.agent._context import WorkspaceContextHook
from memdir.agent._overflow import OverflowRecovery
from memdir.agent._runtime import (
    AgentInput,
    BackgroundTasks,
    SessionBusyError,
    SyncRunner,
    coerce_input,
    session_lock,
)
from memdir.agent._state import SessionStore, repair_dangling
from memdir.agent._toolkit import Tool, builtin_tools, tool_from_function
from memdir.agent.events import (
    AgentEvent,
    ContextOverflowEvent,
    ModelDeltaEvent,
    PostActingEvent,
    PostCallEvent,
    PostReasoningEvent,
    PreActingEvent,
    PreCallEvent,
    PreReasoningEvent,
)
from memdir.agent.hooks import (
    CompactionHook,
    HookFn,
    HookRegistry,
    MemoryFlushHook,
    ToolResultEvictionHook,
    merge_metadata,
)
from memdir.compaction import (
    CompactionConfig,
    CompactionResult,
    ConversationCompactor,
    is_context_overflow,
)
from memdir.errors import ConfigError, ModelError
from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
from memdir.forget import erasure_mark
from memdir.forget._guard import guard_messages
from memdir.memory import (
    MaintenanceConfig,
    MemoryConsolidator,
    MemoryFlushManager,
    MemoryMaintenanceScheduler,
)
from memdir.messages import SUMMARY_NAME, Msg, ToolResultBlock, ToolUseBlock
from memdir.models import ChatModel, ModelDelta, ModelResponse, ToolSpec
from memdir.redact import redact
from memdir.sessions import SessionLog, validate_session_id
from memdir.store.workspace import Workspace
from memdir.tokens import default_counter

__all__ = ["HarnessAgent", "SessionBusyError"]

logger = logging.getLogger("memdir.agent")

_Emit: TypeAlias = Callable[[AgentEvent], Awaitable[None]]

_DEFAULT_EVICTION: Final = ToolResultEvictionConfig.defaults()
_DEFAULT_COMPACTION: Final = CompactionConfig()
_DEFAULT_MAINTENANCE: Final = MaintenanceConfig()
STOPPED_KEY: Final = "memdir.stopped"
"""``Msg.metadata`` key of a reply memdir wrote because the model gave none: ``"max_iters"``
(the step limit was reached) or ``"empty_answer"`` (the model answered with nothing, twice)."""
_EMPTY_ANSWER_NOTE: Final = (
    "Your previous reply was empty. Reply to the user now: answer in text, or call a tool."
)
_NO_ANSWER: Final = (
    "(The model gave no answer: it replied with no text and no tool call, twice. Try again, "
    "rephrase the request, or use another model.)"
)
_LAST_ROUND_NOTE: Final = (
    "You have used every tool call available for this request. Answer now with what you have; "
    "say what is still open."
)


class HarnessAgent:
    """A ReAct agent whose memory lives in a workspace.

    Args:
        name: the agent's name (recorded in the session state).
        model: the chat model.
        workspace: a :class:`Workspace` or its directory.
        namespace: whose memory in that workspace the agent uses (a user's: pass
            ``memdir.namespace_for(user_id=...)``); default: the workspace's own. Sessions,
            memory files, the index and evicted results all live in the namespace.
        system_prompt: the base system prompt; the workspace context is appended to it.
        tools: extra tools: plain functions (schema from signature and docstring) or
            :class:`~memdir.agent.Tool` objects.
        compaction: when and how the conversation is compacted (on by default); ``None``
            turns compaction, and with it context-overflow recovery, off.
        tool_result_eviction: eviction settings; ``None`` turns eviction off. Evicted results
            are masked with ``compaction.redactor`` when the eviction settings keep the
            default redactor.
        memory_flush: extract durable facts into ``memory/YYYY-MM-DD.md`` after each reply
            (in the background) and before each compaction.
        memory_model: the model for memory extraction and consolidation (default: ``model``).
        maintenance: settings of the background maintenance (archive, consolidate into
            MEMORY.md, prune, reindex), started at the first call; ``None`` turns it off.
        session_id: the default session (``call(..., session_id=...)`` picks another).
        max_iters: model calls with tools per ``call()``; one more, without tools, forces a
            final answer.
        memory_tools: offer ``memory_search``, ``memory_get`` and ``memory_add``, and the
            past-session tools ``session_search``, ``session_list`` and ``session_history``.
        file_tools: offer ``read_file``, ``write_file``, ``edit_file`` and ``list_files``.
        workspace_context: inject the date, the memory guidance, AGENTS.md and MEMORY.md into
            the system prompt (``False`` turns all of it off).
        inject_agents_md: with ``workspace_context``, inject AGENTS.md.
        inject_memory: with ``workspace_context``, inject MEMORY.md. ``None`` (default):
            unless memory is off altogether (``memory_tools=False`` and
            ``memory_flush=False``).
        max_context_tokens: budget of the injected AGENTS.md and MEMORY.md.
        tool_timeout: seconds one tool call may take (``None``: no limit).
        max_output_tokens: passed to the model on every call.
        lock_timeout: seconds to wait for a session another process is using.
        close_timeout: seconds :meth:`close` waits for background memory work.

    Raises:
        ConfigError: a bad setting or tool (a duplicate name, a parameter with no JSON form).
    """

    def __init__(
        self,
        *,
        name: str = "agent",
        model: ChatModel,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        namespace: str | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Callable[..., Any] | Tool] = (),
        compaction: CompactionConfig | None = _DEFAULT_COMPACTION,
        tool_result_eviction: ToolResultEvictionConfig | None = _DEFAULT_EVICTION,
        memory_flush: bool = True,
        memory_model: ChatModel | None = None,
        maintenance: MaintenanceConfig | None = _DEFAULT_MAINTENANCE,
        session_id: str = "default",
        max_iters: int = 20,
        memory_tools: bool = True,
        file_tools: bool = True,
        workspace_context: bool = True,
        inject_agents_md: bool = True,
        inject_memory: bool | None = None,
        max_context_tokens: int = 8_000,
        tool_timeout: float | None = None,
        max_output_tokens: int | None = None,
        lock_timeout: float = 60.0,
        close_timeout: float = 30.0,
    ) -> None:
        if not callable(getattr(model, "generate", None)):
            raise ConfigError("model must be a ChatModel (an object with an async generate())")
        if isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 1:
            raise ConfigError("max_iters must be a positive integer")
        self.name = name
        self.model = model
        self.workspace = Workspace.coerce(workspace, namespace)
        self.system_prompt = system_prompt
        self.session_id = validate_session_id(session_id)
        self.max_iters = max_iters
        self.tool_timeout = tool_timeout
        self.max_output_tokens = max_output_tokens
        self.lock_timeout = lock_timeout
        self.close_timeout = close_timeout
        self._tools: dict[str, Tool] = {}
        for tool in builtin_tools(memory=memory_tools, files=file_tools):
            self._add_tool(tool)
        for extra in tools:
            self._add_tool(tool_from_function(extra))
        self._hooks = HookRegistry()
        self._store = SessionStore(self.workspace, name)
        self._sessions: dict[str, list[Msg]] = {}
        self._erasures: dict[str, str] = {}  # the erasure mark each session was checked at
        self._locks: dict[str, asyncio.Lock] = {}
        self._background = BackgroundTasks()
        self._sync = SyncRunner(f"memdir-agent-{name}")
        self.eviction_hook: ToolResultEvictionHook | None = None
        if tool_result_eviction is not None:
            if (
                compaction is not None
                and tool_result_eviction.redactor is redact
                and compaction.redactor is not redact
            ):
                # One masking policy: secrets the session log masks are masked in evicted
                # results too (and those kept raw in the log are kept raw there).
                tool_result_eviction = dataclasses.replace(
                    tool_result_eviction, redactor=compaction.redactor
                )
            self.eviction_hook = ToolResultEvictionHook(self.workspace, tool_result_eviction)
            self._hooks.add(self.eviction_hook)
        self.context_hook: WorkspaceContextHook | None = None
        for flag, value in (
            ("workspace_context", workspace_context),
            ("inject_agents_md", inject_agents_md),
            ("memory_tools", memory_tools),
            ("memory_flush", memory_flush),
            ("file_tools", file_tools),
        ):
            if not isinstance(value, bool):
                raise ConfigError(f"{flag} must be True or False, not {value!r}")
        if inject_memory is not None and not isinstance(inject_memory, bool):
            raise ConfigError(f"inject_memory must be True, False or None, not {inject_memory!r}")
        if workspace_context:
            self.context_hook = WorkspaceContextHook(
                self.workspace,
                max_context_tokens=max_context_tokens,
                memory_tools=memory_tools,
                auto_memory=memory_flush,
                agents_md=inject_agents_md,
                memory_md=(memory_tools or memory_flush)
                if inject_memory is None
                else inject_memory,
            )
            self._hooks.add(self.context_hook)
        memory_model = memory_model or model
        self.scheduler: MemoryMaintenanceScheduler | None = None
        if maintenance is not None:
            consolidator = MemoryConsolidator(
                self.workspace, memory_model, max_memory_tokens=maintenance.max_memory_tokens
            )
            self.scheduler = MemoryMaintenanceScheduler(
                self.workspace, consolidator, config=maintenance
            )
        self.flush_manager: MemoryFlushManager | None = None
        if memory_flush:
            self.flush_manager = MemoryFlushManager(
                self.workspace, memory_model, scheduler=self.scheduler
            )
            self._hooks.add(MemoryFlushHook(self.flush_manager))
        self.compaction_hook: CompactionHook | None = None
        if compaction is not None:
            compactor = ConversationCompactor(
                model, self.workspace, compaction, on_flush=self._flush_before_compaction
            )
            self.compaction_hook = CompactionHook(compactor)
            self._hooks.add(self.compaction_hook)

    async def _flush_before_compaction(self, msgs: Sequence[Msg], *, session_id: str) -> None:
        if self.flush_manager is not None:
            await self.flush_manager.flush_memories(msgs, session_id=session_id)

    # -- tools and hooks ------------------------------------------------------------------

    def _add_tool(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ConfigError(
                f"two tools are named {tool.name!r}: rename one (built-in tools can be turned "
                "off with memory_tools=False or file_tools=False)"
            )
        self._tools[tool.name] = tool

    @property
    def tools(self) -> list[ToolSpec]:
        """The tools offered to the model."""
        return [t.spec for t in self._tools.values()]

    def add_hook(
        self,
        hook: HookFn,
        *,
        priority: int | None = None,
        events: tuple[type[AgentEvent], ...] | None = None,
    ) -> None:
        """Register a hook: a (sync or async) callable taking an event.

        Args:
            hook: the callable; it may change the replaceable fields of the event.
            priority: lower runs first (default: ``hook.priority`` or 500).
            events: event classes to receive (default: ``hook.events``, or every event).
        """
        self._hooks.add(hook, priority=priority, events=events)

    def remove_hook(self, hook: HookFn) -> bool:
        """Unregister a hook; returns whether it was registered."""
        return self._hooks.remove(hook)

    @property
    def hooks(self) -> list[HookFn]:
        """The registered hooks in the order they run."""
        return self._hooks.hooks()

    # -- sessions -------------------------------------------------------------------------

    def history(self, session_id: str | None = None) -> list[Msg]:
        """The session's conversation as it will be sent to the model (a copy)."""
        sid = validate_session_id(session_id or self.session_id)
        return list(self._history(sid))

    def _history(self, sid: str) -> list[Msg]:
        if sid not in self._sessions or self._store.stale(sid):
            self._sessions[sid] = self._store.load(sid)
            self._erasures[sid] = erasure_mark(self.workspace)
        else:  # a fact erased since the session was read goes from what is held too
            held = self._sessions[sid]
            if (guarded := self._guarded(sid, held)) is not held:
                held[:] = guarded
        return self._sessions[sid]

    def _guarded(self, sid: str, msgs: list[Msg]) -> list[Msg]:
        """``msgs`` as the erasures since this session was last checked leave them."""
        mark = erasure_mark(self.workspace)
        if self._erasures.get(sid) == mark:
            return msgs
        self._erasures[sid] = mark
        return guard_messages(self.workspace, msgs)

    def _commit(self, sid: str, msgs: list[Msg]) -> None:
        self._sessions[sid] = self._guarded(sid, list(msgs))
        self._store.save(sid, self._sessions[sid])

    def _append(self, sid: str, msgs: Sequence[Msg]) -> None:
        history = self._history(sid)
        history.extend(guard_messages(self.workspace, msgs))
        self._store.save(sid, history)

    def reset(self, session_id: str | None = None) -> None:
        """Start the session afresh (the stored conversation is emptied, memory is kept)."""
        sid = validate_session_id(session_id or self.session_id)
        self._commit(sid, [])

    async def discard_unanswered(self, *, session_id: str | None = None) -> list[Msg]:
        """Remove the user messages at the end of the session that no reply answers.

        A call whose model failed before answering keeps its input, so ``call()`` with no
        input can retry it. An interface where the user retries by sending the text again
        calls this instead, so a failed attempt does not stay in the conversation. Tool
        results and compaction summaries are never removed.

        Args:
            session_id: the session (default: the agent's).

        Returns:
            The removed messages, oldest first (empty when the session ends with a reply).

        Raises:
            SessionBusyError: another process kept the session busy for ``lock_timeout``.
        """
        sid = validate_session_id(session_id or self.session_id)
        lock = self._locks.setdefault(sid, asyncio.Lock())
        async with session_lock(lock, self.workspace, sid, timeout=self.lock_timeout):
            history = self._history(sid)
            cut = len(history)
            while cut and _unanswered_input(history[cut - 1]):
                cut -= 1
            removed = history[cut:]
            if removed:
                self._commit(sid, history[:cut])
            return removed

    async def compact(
        self,
        *,
        session_id: str | None = None,
        force: bool = True,
        keep_messages: int | None = None,
    ) -> CompactionResult | None:
        """Compact the session's conversation now, with the agent's compaction settings.

        As before any compaction, the summarised messages are flushed to memory and offloaded
        to the session log first; the compacted conversation is then stored. Runs under the
        session's lock, so it waits for a call on the same session to finish.

        Args:
            session_id: the session (default: the agent's).
            force: compact even if no trigger of the compaction settings fires.
            keep_messages: how many of the newest messages stay verbatim (default: the
                settings' ``keep_messages``/``keep_tokens``); the latest user request is
                always kept.

        Returns:
            The compaction, or ``None`` when there was nothing to compact.

        Raises:
            ConfigError: compaction is off for this agent (``compaction=None``).
            SessionBusyError: another process kept the session busy for ``lock_timeout``.
        """
        if self.compaction_hook is None:
            raise ConfigError(
                "compaction is off for this agent; pass compaction=CompactionConfig()"
            )
        sid = validate_session_id(session_id or self.session_id)
        lock = self._locks.setdefault(sid, asyncio.Lock())
        async with session_lock(lock, self.workspace, sid, timeout=self.lock_timeout):
            history = self._history(sid)
            system = self.system_prompt
            if self.context_hook is not None:  # measured as the next request will carry it
                section = self.context_hook.render(sid)
                system = f"{system}\n\n{section}" if system else section
            result = await self.compaction_hook.compactor.compact_if_needed(
                list(history),
                session_id=sid,
                system=system,
                tools=self.tools,
                force=force,
                keep_messages=keep_messages,
                # keep_tokens > 0 would override keep_messages; an explicit count wins.
                keep_tokens=None if keep_messages is None else 0,
            )
            if result is not None:
                self.compaction_hook.last_result = result
                self._commit(sid, list(result.messages))
            return result

    # -- calling --------------------------------------------------------------------------

    async def call(self, input: AgentInput = None, *, session_id: str | None = None) -> Msg:
        """Run one call and return the final assistant message.

        Args:
            input: the user's text, a message, or several messages. ``None`` resumes a call
                that was interrupted (the session ends with a user message or tool results).
            session_id: the session (default: the agent's).

        Raises:
            ModelError: the model failed (a context overflow only when it could not be
                recovered).
            SessionBusyError: another process kept the session busy for ``lock_timeout``.
        """
        return await self._run(input, session_id, None)

    async def stream(
        self, input: AgentInput = None, *, session_id: str | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run one call, yielding its events as they happen; the last is a :class:`PostCallEvent`.

        Stopping the iteration early cancels the call.
        """
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()

        async def emit(event: AgentEvent) -> None:
            queue.put_nowait(event)

        task = asyncio.create_task(self._run(input, session_id, emit))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def call_sync(self, input: AgentInput = None, *, session_id: str | None = None) -> Msg:
        """:meth:`call` for synchronous code (runs on a private event-loop thread).

        Background memory work goes on after the reply; :meth:`close_sync` drains it.

        Raises:
            ConfigError: called from inside a running event loop (``await call()`` there).
        """
        return self._sync.run(self.call(input, session_id=session_id))

    async def _run(self, input: AgentInput, session_id: str | None, emit: _Emit | None) -> Msg:
        sid = validate_session_id(session_id or self.session_id)
        inputs = coerce_input(input)
        if self.scheduler is not None and not self.scheduler.running:
            self.scheduler.start()
        lock = self._locks.setdefault(sid, asyncio.Lock())
        async with session_lock(lock, self.workspace, sid, timeout=self.lock_timeout):
            history = self._history(sid)
            new: list[Msg] = []
            if inputs:
                pre = PreCallEvent(agent=self, session_id=sid, inputs=inputs)
                await self._emit(pre, emit)
                new.extend(pre.inputs)
                self._append(sid, pre.inputs)
            elif not history or (history[-1].role == "assistant" and not history[-1].tool_uses):
                raise ConfigError(
                    f"session {sid!r} has no interrupted call to resume; pass the user's input"
                )
            try:
                reply = await self._loop(sid, new, emit)
            finally:
                # A cancelled or failed call must not leave tool calls without results.
                current = self._sessions.get(sid, [])
                repaired = repair_dangling(current)
                if repaired is not current:
                    self._commit(sid, repaired)
            await self._emit(
                PostCallEvent(agent=self, session_id=sid, reply=reply, new_messages=new), emit
            )
            return reply

    async def _emit(self, event: AgentEvent, emit: _Emit | None) -> None:
        errors = await self._hooks.dispatch(event)
        if emit is not None:
            await emit(event)
        for error in errors:
            await self._hooks.dispatch(error)
            if emit is not None:
                await emit(error)

    async def _loop(self, sid: str, new: list[Msg], emit: _Emit | None) -> Msg:
        for iteration in range(self.max_iters + 1):
            last_round = iteration == self.max_iters
            message = await self._answer(sid, iteration, emit, last_round=last_round)
            self._append(sid, [message])
            new.append(message)
            if not message.tool_uses:
                return message
            if last_round:
                break
            results = await self._act(sid, message.tool_uses, emit)
            self._append(sid, [results])
            new.append(results)
        # The model still wanted tools after the last round: close the calls and stop.
        calls = new[-1].tool_uses
        skipped = Msg(
            role="tool",
            content=tuple(
                ToolResultBlock(
                    tool_use_id=c.id,
                    name=c.name,
                    output=f"Error: not run: the limit of {self.max_iters} steps was reached",
                    is_error=True,
                )
                for c in calls
            ),
        )
        reply = Msg.assistant(
            f"I stopped after {self.max_iters} steps without a final answer "
            "(raise max_iters to allow more).",
            metadata={STOPPED_KEY: "max_iters"},
        )
        self._append(sid, [skipped, reply])
        new.extend([skipped, reply])
        return reply

    async def _answer(
        self, sid: str, iteration: int, emit: _Emit | None, *, last_round: bool
    ) -> Msg:
        """The model's next message; an empty one is asked for again, once, with a nudge."""
        note: str | None = None
        for _ in range(2):
            response = await self._reason(sid, iteration, emit, last_round=last_round, note=note)
            post = PostReasoningEvent(
                agent=self, session_id=sid, response=response, iteration=iteration
            )
            await self._emit(post, emit)
            message = post.response.message
            if message.role != "assistant":
                raise ConfigError(f"the model answered with a {message.role!r} message")
            if message.tool_uses or message.text.strip():
                return message
            logger.warning(
                "session %s: the model gave an empty answer (stop reason %s)%s",
                sid,
                response.stop_reason,
                "; asking again" if note is None else "",
            )
            note = _EMPTY_ANSWER_NOTE
        return Msg.assistant(_NO_ANSWER, metadata={STOPPED_KEY: "empty_answer"})

    async def _reason(
        self,
        sid: str,
        iteration: int,
        emit: _Emit | None,
        *,
        last_round: bool,
        note: str | None = None,
    ) -> ModelResponse:
        recovery: OverflowRecovery | None = None
        while True:
            event = PreReasoningEvent(
                agent=self,
                session_id=sid,
                messages=list(self._history(sid)),
                system=self.system_prompt,
                tools=[] if last_round else self.tools,
                iteration=iteration,
                forced_compaction=recovery.attempts if recovery is not None else 0,
                _commit=lambda msgs: self._commit(sid, msgs),
            )
            await self._emit(event, emit)
            system = event.system
            for extra in (_LAST_ROUND_NOTE if last_round else None, note):
                if extra:
                    system = f"{system}\n\n{extra}" if system else extra
            try:
                if emit is not None and callable(getattr(self.model, "stream", None)):
                    return await self._streamed(sid, iteration, event, system, emit)
                return await self.model.generate(
                    event.messages,
                    tools=event.tools or None,
                    system=system,
                    max_output_tokens=self.max_output_tokens,
                )
            except Exception as exc:
                if not is_context_overflow(exc):
                    raise
                recovery = recovery or self._recovery(sid)
                smaller = await recovery.shrink(
                    self._history(sid), system=system, tools=event.tools or None, error=exc
                )
                if smaller is not None:
                    self._commit(sid, smaller[0])
                await self._emit(
                    ContextOverflowEvent(
                        agent=self,
                        session_id=sid,
                        error=exc,
                        attempt=recovery.attempts,
                        recovered=smaller is not None,
                    ),
                    emit,
                )
                if smaller is None:
                    raise

    async def _streamed(
        self, sid: str, iteration: int, event: PreReasoningEvent, system: str | None, emit: _Emit
    ) -> ModelResponse:
        """The model's answer through its ``stream()``, each piece emitted as it comes."""
        response: ModelResponse | None = None
        stream = self.model.stream(  # type: ignore[attr-defined]
            event.messages,
            tools=event.tools or None,
            system=system,
            max_output_tokens=self.max_output_tokens,
        )
        async for item in stream:
            if isinstance(item, ModelResponse):
                response = item
            elif isinstance(item, ModelDelta):
                await self._emit(
                    ModelDeltaEvent(agent=self, session_id=sid, delta=item, iteration=iteration),
                    emit,
                )
        if response is None:
            raise ModelError(f"{self.model.name}: the stream ended without an answer")
        return response

    def _recovery(self, sid: str) -> OverflowRecovery:
        """The overflow recovery of one model call in session ``sid``."""
        compactor = self.compaction_hook.compactor if self.compaction_hook is not None else None
        evictor = (
            self.eviction_hook.evictor(sid)
            if self.eviction_hook is not None
            else ToolResultEvictor(self.workspace, session_id=sid)
        )
        redactor = compactor.config.redactor if compactor is not None else redact
        return OverflowRecovery(
            compactor=compactor,
            evictor=evictor,
            log=SessionLog(self.workspace, sid, redact=redactor),
            counter=compactor.counter if compactor is not None else default_counter(),
            context=self.context_hook,
            session_id=sid,
        )

    async def _act(self, sid: str, calls: Sequence[ToolUseBlock], emit: _Emit | None) -> Msg:
        async def run_one(call: ToolUseBlock) -> tuple[ToolResultBlock, dict[str, Any]]:
            pre = PreActingEvent(agent=self, session_id=sid, tool_call=call)
            await self._emit(pre, emit)
            chosen = pre.tool_call
            tool = self._tools.get(chosen.name)
            if tool is None:
                known = ", ".join(self._tools) or "none"
                result = ToolResultBlock(
                    tool_use_id=call.id,
                    name=chosen.name,
                    output=f"Error: there is no tool named {chosen.name!r}; the tools are {known}",
                    is_error=True,
                )
            else:
                result = await tool.run(chosen, workspace=self.workspace, timeout=self.tool_timeout)
            post = PostActingEvent(agent=self, session_id=sid, tool_call=chosen, result=result)
            await self._emit(post, emit)
            return _paired(post.result, call.id), post.metadata

        outcomes = await asyncio.gather(*(run_one(c) for c in calls))
        metadata: dict[str, Any] = {}
        for _, extra in outcomes:
            merge_metadata(metadata, extra)
        return Msg(role="tool", content=tuple(r for r, _ in outcomes), metadata=metadata)

    # -- background work and shutdown -----------------------------------------------------

    def spawn_background(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run ``coro`` after the reply, tracked so that :meth:`close` can drain it."""
        return self._background.spawn(coro, name=name)

    @property
    def pending_background(self) -> int:
        """How many background tasks are still running."""
        return len(self._background)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for background work (at most ``timeout`` seconds); returns whether all finished."""
        return await self._background.drain(timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Drain background memory work within ``timeout`` (default ``close_timeout``), then stop.

        Work still running after the timeout is cancelled (a flush resumes from its cursor
        on the next call).
        """
        limit = self.close_timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        started = loop.time()
        if not await self._background.drain(limit):
            logger.warning("background memory work did not finish within %.1f s; cancelled", limit)
            await self._background.cancel_all()
        if self.scheduler is not None and self.scheduler.running:
            left = max(0.1, limit - (loop.time() - started))
            await asyncio.to_thread(self.scheduler.stop, left)

    def close_sync(self, timeout: float | None = None) -> None:
        """:meth:`close` for synchronous code; also stops the private event-loop thread."""
        if self._sync.started:
            self._sync.run(self.close(timeout))
            self._sync.stop()
        elif self.scheduler is not None and self.scheduler.running:
            self.scheduler.stop(self.close_timeout if timeout is None else timeout)

    async def __aenter__(self) -> HarnessAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> HarnessAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_sync()


def _unanswered_input(msg: Msg) -> bool:
    """Whether ``msg`` is user input (not a summary, not tool results) at the session's end."""
    return msg.role == "user" and msg.name != SUMMARY_NAME and not msg.tool_results


def _paired(result: ToolResultBlock, call_id: str) -> ToolResultBlock:
    """``result`` answering ``call_id`` (a hook may have swapped the call or the result)."""
    if result.tool_use_id == call_id:
        return result
    return dataclasses.replace(result, tool_use_id=call_id)
