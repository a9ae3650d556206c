"""``MemdirMiddleware``: memdir's memory, compaction and eviction in a LangChain v1 agent."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, RemoveMessage, SystemMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from memdir.adapters.langchain._convert import message_to_msg, msg_to_messages
from memdir.adapters.langchain._model import memdir_model
from memdir.adapters.langchain._runner import Runner
from memdir.adapters.langchain._session import Session, thread_session, tool_spec
from memdir.adapters.langchain._spaces import (
    NamespaceFrom,
    Settings,
    Space,
    check_namespace_from,
    run_namespace,
)
from memdir.adapters.langchain._tools import workspace_tools
from memdir.compaction import CompactionConfig, CompactionResult, ConversationCompactor
from memdir.errors import ConfigError, MemdirError
from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
from memdir.memory import MaintenanceConfig, MemoryFlushManager, MemoryMaintenanceScheduler
from memdir.messages import Msg
from memdir.models import ChatModel, ToolSpec
from memdir.redact import redact
from memdir.sessions import SessionLog, validate_session_id
from memdir.store.workspace import Workspace

__all__ = ["MemdirMiddleware"]

log = logging.getLogger("memdir.adapters.langchain")
_BACKGROUND_DELAY = 0.05  # seconds: the run returns before the log append and flush start
_MAX_SESSIONS = 256  # threads whose message cache is kept (another one is rebuilt when it comes)
_MAX_SPACES = 256  # run namespaces whose parts are kept (another one is rebuilt when it comes)


class MemdirMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """memdir in ``create_agent(..., middleware=[MemdirMiddleware(workspace)])``.

    Before every model call it logs the new messages to ``sessions/<thread>.log.jsonl``, keeps
    the turn's tool results within budget, and compacts when a trigger fires: the prefix is
    flushed to the daily ledger and appended to the session log first, then replaced by one
    summary naming its log lines; tool calls and their results are never separated. If the
    summary fails, the state is left as it was (the run goes on; nothing is replaced by an
    error text). Each model call gets the date, ``AGENTS.md`` and a budgeted ``MEMORY.md`` in
    its system prompt; a tool result over the eviction limit is saved to
    ``large_tool_results/`` and the model sees a preview and the path. After the run, new
    durable facts are extracted to ``memory/YYYY-MM-DD.md`` in the background.

    The conversation is the LangGraph thread: ``config={"configurable": {"thread_id": ...}}``
    names its session (an id that is not a valid session id is hashed to ``lc-<hex>``). The
    memory is the workspace's ``namespace``, or, with ``namespace_from``, the one each run
    names, so one agent serves many users, each with a memory of their own.

    Args:
        workspace: the workspace (or its path; default: the configured one).
        model: what writes summaries and extracts memories: a LangChain chat model, a memdir
            :class:`~memdir.models.ChatModel`, a name for
            :func:`~memdir.models.model_from_string`, or ``None`` for the offline
            :class:`~memdir.models.ExtractiveModel`.
        compaction: triggers and tail (``None``: no compaction).
        tool_result_eviction: when tool results go to files (``None``: never).
        memory_flush: extract facts after each run and before each compaction.
        memory_tools: offer ``memory_search``, ``memory_get`` and ``memory_add`` to the agent
            (and ``read_file`` when eviction is on, to read evicted outputs).
        workspace_context: add the date, ``AGENTS.md`` and ``MEMORY.md`` to the system prompt.
        inject_memory: include ``MEMORY.md`` (default: unless memory is off altogether).
        max_context_tokens: budget of ``AGENTS.md`` and ``MEMORY.md`` in the prompt.
        maintenance: consolidate the ledgers into ``MEMORY.md`` on a background thread
            (``None``: not here; run ``memdir maintain`` or a scheduler of your own).
        session_id: one fixed session for every thread (default: the thread id).
        namespace: the caller's namespace in the workspace (the default of every run).
        namespace_from: each run's namespace, instead: a key (``"user_id"``) whose value, in
            the run's ``context`` or else its ``config["configurable"]``, is the caller's id,
            mapped as :func:`memdir.namespace_for` maps a user id (a valid name as it is, any
            other id hashed); or a function of the run's ``Runtime`` returning a namespace
            name. A run that names none uses ``namespace``; one that names an invalid one
            (an empty id, say) fails with :class:`ConfigError`.

    Raises:
        ConfigError: a setting has the wrong type, or ``maintenance`` with ``namespace_from``
            (run ``memdir maintain --all-namespaces`` instead).
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        model: BaseChatModel | ChatModel | str | None = None,
        compaction: CompactionConfig | None = CompactionConfig(),  # noqa: B008 (frozen)
        tool_result_eviction: ToolResultEvictionConfig | None = ToolResultEvictionConfig(),  # noqa: B008
        memory_flush: bool = True,
        memory_tools: bool = True,
        workspace_context: bool = True,
        inject_memory: bool | None = None,
        max_context_tokens: int = 8_000,
        maintenance: MaintenanceConfig | None = None,
        session_id: str | None = None,
        namespace: str | None = None,
        namespace_from: NamespaceFrom | None = None,
    ) -> None:
        super().__init__()
        for label, value, kind in (
            ("compaction", compaction, CompactionConfig),
            ("tool_result_eviction", tool_result_eviction, ToolResultEvictionConfig),
            ("maintenance", maintenance, MaintenanceConfig),
        ):
            if value is not None and not isinstance(value, kind):
                raise ConfigError(f"{label} must be a {kind.__name__} or None")
        self.namespace_from = check_namespace_from(namespace_from)
        if maintenance is not None and self.namespace_from is not None:
            raise ConfigError(
                "maintenance= maintains one namespace; with namespace_from= run "
                "`memdir maintain --all-namespaces` (e.g. from cron) instead"
            )
        self.workspace = Workspace.coerce(workspace, namespace)
        self.model = memdir_model(model)
        self._fixed_session = validate_session_id(session_id) if session_id is not None else None
        self.eviction = tool_result_eviction
        if inject_memory is None:
            inject_memory = memory_tools or memory_flush
        self._settings = Settings(
            model=self.model,
            compaction=compaction,
            memory_flush=memory_flush,
            memory_tools=memory_tools,
            workspace_context=workspace_context,
            inject_memory=inject_memory,
            max_context_tokens=max_context_tokens,
            maintenance=maintenance,
        )
        self._default = Space.build(self.workspace, self._settings)
        self.scheduler: MemoryMaintenanceScheduler | None = self._default.scheduler
        self.flusher: MemoryFlushManager | None = self._default.flusher
        """The flush of ``namespace`` (each run namespace has its own)."""
        self.compactor: ConversationCompactor | None = self._default.compactor
        """The compactor of ``namespace`` (each run namespace has its own)."""
        self.context = self._default.context
        self.tools = workspace_tools(
            lambda: self._space().workspace,
            memory=memory_tools,
            files=memory_tools and self.eviction is not None,
        )
        self.last_compaction: CompactionResult | None = None
        """The latest compaction this middleware applied."""
        self._runner = Runner("memdir-langchain")
        self._spaces: dict[str | None, Space] = {}
        self._sessions: dict[tuple[str | None, str], Session] = {}
        self._lock = threading.Lock()
        self._tool_specs: dict[int, tuple[object, ToolSpec | None]] = {}
        self._learned: set[int] = set()
        self._window: int | None = None  # the smallest context window learned from a model
        self._started = False

    # -- namespaces and sessions ------------------------------------------------------------

    def _space(self) -> Space:
        """The parts of the current run's namespace.

        Raises:
            ConfigError: the run names an invalid namespace (``namespace_from``).
        """
        if self.namespace_from is None:
            return self._default
        name = run_namespace(self.namespace_from, self.workspace.namespace)
        if name == self.workspace.namespace:
            return self._default
        with self._lock:
            found = self._spaces.pop(name, None)
            if found is None:
                found = Space.build(self.workspace.namespaced(name), self._settings)
                if found.compactor is not None and self._window is not None:
                    found.compactor.learn_context_window(self._window)
            self._spaces[name] = found  # the most recent last
            while len(self._spaces) > _MAX_SPACES:  # forget the least recent namespace
                del self._spaces[next(iter(self._spaces))]
            return found

    def _session(self) -> Session:
        space = self._space()
        sid = self._fixed_session or thread_session()
        key = (space.workspace.namespace, sid)
        with self._lock:
            found = self._sessions.pop(key, None)
            if found is not None:
                found.space = space  # the same namespace's parts, maybe rebuilt since
            else:
                ws = space.workspace
                found = Session(
                    id=sid,
                    space=space,
                    log=space.compactor.session_log(sid)
                    if space.compactor
                    else SessionLog(ws, sid, redact=redact),
                    evictor=ToolResultEvictor(ws, self.eviction, session_id=sid)
                    if self.eviction
                    else None,
                )
            self._sessions[key] = found  # the most recent last
            while len(self._sessions) > _MAX_SESSIONS:  # forget the least recent thread
                del self._sessions[next(iter(self._sessions))]
            if not self._started and self.scheduler is not None:
                self._started = True
                self.scheduler.start()
            return found

    # -- before the model call: log, evict, compact ---------------------------------------

    def _prepare(self, state: AgentState[Any]) -> tuple[Session, list[Msg], list[Msg], bool] | None:
        """``(session, messages, evicted, compaction due)``; ``None`` if it cannot be done.

        Raises:
            ConfigError: the run names an invalid namespace: the run must not go on without
                its memory, nor with another's.
        """
        session = self._session()
        try:
            msgs = session.convert(state["messages"])
            changed: list[Msg] = []
            if session.evictor is not None:
                outcome = session.evictor.evict(msgs)
                if outcome.evicted:
                    changed = [n for o, n in zip(msgs, outcome.messages, strict=True) if o is not n]
                    msgs = outcome.messages
            return session, msgs, changed, self._due(session, msgs)
        except MemdirError as exc:
            log.warning("memdir left the conversation as it is: %s", exc)
            return None

    def _due(self, session: Session, msgs: list[Msg]) -> bool:
        compactor = session.space.compactor
        if compactor is None:
            return False
        count, tokens = session.measure(compactor.counter, msgs)
        if compactor.trigger_reason(count, tokens) is not None:
            return True
        ta = compactor.config.truncate_args
        return ta is not None and bool(
            (ta.trigger_messages and count >= ta.trigger_messages)
            or (ta.trigger_tokens and tokens >= ta.trigger_tokens)
        )

    async def _compact(self, session: Session, msgs: list[Msg]) -> CompactionResult | None:
        compactor = session.space.compactor
        assert compactor is not None
        try:
            return await compactor.compact_if_needed(
                msgs, session_id=session.id, system=session.system, tools=session.tools
            )
        except MemdirError as exc:
            log.warning("session %s: not compacted: %s", session.id, exc)
            return None

    def _update(
        self, session: Session, changed: list[Msg], result: CompactionResult | None
    ) -> dict[str, Any] | None:
        if result is not None:
            self.last_compaction = result
            return {
                "messages": [
                    RemoveMessage(id=REMOVE_ALL_MESSAGES),
                    *session.to_langchain(result.messages),
                ]
            }
        if changed:  # same ids: add_messages replaces them in place
            return {"messages": session.to_langchain(changed)}
        return None

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Log, evict and compact (see the class docstring)."""
        prepared = self._prepare(state)
        if prepared is None:
            return None
        session, msgs, changed, due = prepared
        result = self._runner.run(self._compact(session, msgs)) if due else None
        return self._update(session, changed, result)

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_model` for ``ainvoke`` and ``astream``."""
        prepared = self._prepare(state)
        if prepared is None:
            return None
        session, msgs, changed, due = prepared
        result = await self._runner.arun(self._compact(session, msgs)) if due else None
        return self._update(session, changed, result)

    # -- the model call: workspace context ------------------------------------------------

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        session = self._session()
        self._learn_window(request.model)
        session.tools = self._specs(request.tools)
        system = request.system_message
        context = session.space.context
        if context is None:
            session.system = system.text if system is not None else None
            return request
        section = context.render(session.id)
        if system is None:
            new = SystemMessage(content=section)
        elif isinstance(system.content, str):
            sep = "" if not system.content else "\n\n"
            new = SystemMessage(content=f"{system.content}{sep}{section}")
        else:  # content blocks (e.g. with cache_control): the context goes last
            new = SystemMessage(content=[*system.content, {"type": "text", "text": section}])
        session.system = new.text
        return request.override(system_message=new)

    def _learn_window(self, model: object) -> None:
        if self.compactor is None or id(model) in self._learned:
            return
        self._learned.add(id(model))
        profile = getattr(model, "profile", None)
        window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
        if isinstance(window, int) and window > 0:
            with self._lock:  # every namespace's compactor plans for it
                self._window = window if self._window is None else min(window, self._window)
                for space in (self._default, *self._spaces.values()):
                    if space.compactor is not None:
                        space.compactor.learn_context_window(window)

    def _specs(self, tools: Sequence[object]) -> list[ToolSpec]:
        specs = []
        for tool in tools:
            cached = self._tool_specs.get(id(tool))
            if cached is None or cached[0] is not tool:
                cached = (tool, tool_spec(tool))
                self._tool_specs[id(tool)] = cached
            if cached[1] is not None:
                specs.append(cached[1])
        return specs

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Call the model with the workspace context in its system prompt; after the final
        answer of a run, log the run and flush it to memory in the background."""
        response = handler(self._request(request))
        self._answered(request, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """:meth:`wrap_model_call` for ``ainvoke`` and ``astream``."""
        response = await handler(self._request(request))
        self._answered(request, response)
        return response

    # -- tool calls: eviction -------------------------------------------------------------

    def _evicted(
        self, request: ToolCallRequest, result: ToolMessage | Command[Any]
    ) -> ToolMessage | Command[Any]:
        if self.eviction is None or not isinstance(result, ToolMessage):
            return result
        content = result.content
        size = (
            len(content)
            if isinstance(content, str)
            else sum(len(p) if isinstance(p, str) else len(str(p.get("text", ""))) for p in content)
        )
        if size <= self.eviction.max_result_chars:
            return result
        session = self._session()  # an invalid namespace fails the run
        try:
            assert session.evictor is not None
            msg = message_to_msg(result)
            names = {result.tool_call_id: str(request.tool_call.get("name") or result.name)}
            out = session.evictor.evict_message(msg, tool_names=names)
        except MemdirError as exc:
            log.warning("tool result kept in the context: %s", exc)
            return result
        if out is msg:
            return result
        evicted = msg_to_messages(out)[0]
        assert isinstance(evicted, ToolMessage)
        return evicted

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool; an oversized result is saved to a file and previewed."""
        return self._evicted(request, handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """:meth:`wrap_tool_call` for ``ainvoke`` and ``astream``."""
        return self._evicted(request, await handler(request))

    # -- after the final answer: log and flush ----------------------------------------------

    def _answered(self, request: ModelRequest[Any], response: object) -> None:
        """After an answer without tool calls (the run ends with it): log the conversation and
        flush it to the ledger, in the background (a hook here costs no graph step)."""
        if isinstance(response, ExtendedModelResponse):
            response = response.model_response
        result = response.result if isinstance(response, ModelResponse) else [response]
        answers = [m for m in result if isinstance(m, AIMessage)]
        if not answers or answers[-1].tool_calls:
            return
        session = self._session()
        try:
            msgs = session.convert([*request.messages, *result], keep=True)
        except MemdirError as exc:
            log.warning("memdir could not read the conversation: %s", exc)
            return
        self._runner.spawn(
            _log(session, msgs, session.space.flusher),
            f"log and memory flush of session {session.id}",
            delay=_BACKGROUND_DELAY,
        )

    # -- lifecycle ------------------------------------------------------------------------

    def drain(self, timeout: float | None = 30.0) -> bool:
        """Wait for the background memory flushes; whether they finished within ``timeout``."""
        return self._runner.drain(timeout)

    def close(self, timeout: float = 30.0) -> bool:
        """Finish the background work (at most ``timeout`` seconds) and stop the threads.

        A flush cut short resumes from its cursor next time. Returns whether everything
        finished. The middleware starts again if it is used after this.
        """
        finished = self._runner.close(timeout)
        if self.scheduler is not None and self._started:
            self.scheduler.stop()
            self._started = False
        return finished


async def _log(
    session: Session, msgs: list[Msg], flusher: MemoryFlushManager | None = None
) -> None:
    """Append what is new to the session log, then (after a run) flush it to memory."""
    session.log_new(msgs)
    if flusher is not None:
        await flusher.flush_memories(msgs, session_id=session.id)
