"""MemdirCompaction: a Pydantic AI capability that compacts, evicts and injects memory."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import FunctionToolset, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult

from memdir.adapters._skeleton import mask_metadata
from memdir.adapters._toolset import memdir_tools
from memdir.adapters.pydantic_ai._convert import MESSAGE_KEY, messages_to_msgs, msgs_to_messages
from memdir.agent import Tool as MemdirTool
from memdir.agent import WorkspaceContextHook
from memdir.agent._runtime import BackgroundTasks
from memdir.compaction import CompactionConfig, CompactionResult, ConversationCompactor
from memdir.errors import ConfigError
from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
from memdir.memory import (
    MaintenanceConfig,
    MemoryConsolidator,
    MemoryFlushManager,
    MemoryMaintenanceScheduler,
)
from memdir.messages import Msg, ToolUseBlock
from memdir.models import ChatModel, model_from_string
from memdir.redact import redact
from memdir.sessions import SessionLog
from memdir.store.workspace import Workspace

__all__ = ["MemdirCompaction", "memdir_toolset"]

logger = logging.getLogger("memdir.adapters.pydantic_ai")

_OPAQUE = frozenset(
    {"part_kind", "kind", "tool_call_id", "id", "signature", "timestamp", "run_id", "key"}
)


def memdir_toolset(
    workspace: Workspace | str | os.PathLike[str],
    *,
    memory_add: bool = True,
    read_file: bool = True,
    namespace: str | None = None,
) -> FunctionToolset[Any]:
    """``memory_search``, ``memory_get``, ``memory_add`` and ``read_file`` as a toolset.

    The functions of :mod:`memdir.tools` with memdir's names, schemas and descriptions; errors
    come back to the model as ``Error: ...`` text.
    """
    ws = Workspace.coerce(workspace, namespace)
    tools = memdir_tools(memory_add=memory_add, file_reader=read_file)
    return FunctionToolset([_tool(t, ws) for t in tools])


def _tool(tool: MemdirTool, workspace: Workspace) -> Tool[Any]:
    async def run(**arguments: Any) -> str:
        call = ToolUseBlock(id=tool.name, name=tool.name, input=arguments)
        return (await tool.run(call, workspace=workspace)).text

    return Tool.from_schema(run, tool.name, tool.description, tool.parameters)


def _as_model(model: ChatModel | str, what: str) -> ChatModel:
    if isinstance(model, str):
        return model_from_string(model)
    if not callable(getattr(model, "generate", None)):
        raise ConfigError(f"{what} must be a memdir ChatModel or a model string like 'extractive'")
    return model


class MemdirCompaction(AbstractCapability[Any]):
    """memdir's context management for a Pydantic AI agent: ``capabilities=[MemdirCompaction(ws)]``.

    Before each model request it appends the conversation to ``sessions/<session_id>.log.jsonl``
    (each message once, secrets masked; what the run adds after its last request, its final
    answer, is appended when the run ends), moves tool returns over
    ``tool_result_eviction.max_result_chars`` to ``large_tool_results/``, and, when a trigger of
    ``compaction`` fires, compacts with :class:`~memdir.compaction.ConversationCompactor`:
    memory is flushed from the messages about to be summarised, and a summary request takes
    their place in the run's message history (a tool call and its return are never
    separated; if the summary fails the history is left as it was). Its instructions add the
    date, memory guidance, ``AGENTS.md`` and a budgeted ``MEMORY.md``; its toolset is memdir's
    memory tools. After each run new facts are flushed to the daily ledger in the background
    (:meth:`aclose` waits for them); with ``maintenance=``, a background thread consolidates
    the ledgers into ``MEMORY.md``.

    Args:
        workspace: the workspace, or its path.
        session_id: names the session log.
        compaction: when and how to compact; ``None`` never compacts.
        tool_result_eviction: when to move big tool returns to files; ``None`` keeps them.
        model: the model that writes summaries (memdir model or string, default
            ``"extractive"``, offline).
        memory_model: the model that extracts facts (default ``model``).
        memory_flush: flush facts after each run and before compaction.
        memory_tools: offer memdir's memory tools (and ``read_file``) to the agent.
        inject_memory: put ``MEMORY.md`` in the instructions.
        inject_agents_md: put ``AGENTS.md`` in the instructions.
        max_context_tokens: the budget of ``AGENTS.md`` and ``MEMORY.md``.
        maintenance: consolidate the ledgers into ``MEMORY.md`` (with ``memory_model``), archive
            and prune on a background thread (a
            :class:`~memdir.memory.MemoryMaintenanceScheduler`, started at the first run,
            stopped by :meth:`aclose`); ``None`` leaves it to ``memdir maintain``.
        namespace: the caller's namespace in the workspace.

    Raises:
        ConfigError: a bad model or configuration.
        SessionLogError: an invalid session id.
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str],
        *,
        session_id: str = "default",
        compaction: CompactionConfig | None = CompactionConfig(),  # noqa: B008 - frozen
        tool_result_eviction: ToolResultEvictionConfig | None = ToolResultEvictionConfig(),  # noqa: B008
        model: ChatModel | str = "extractive",
        memory_model: ChatModel | str | None = None,
        memory_flush: bool = True,
        memory_tools: bool = True,
        inject_memory: bool = True,
        inject_agents_md: bool = True,
        max_context_tokens: int = 8_000,
        maintenance: MaintenanceConfig | None = None,
        namespace: str | None = None,
    ) -> None:
        if compaction is not None and not isinstance(compaction, CompactionConfig):
            raise ConfigError("compaction must be a CompactionConfig or None")
        if maintenance is not None and not isinstance(maintenance, MaintenanceConfig):
            raise ConfigError("maintenance must be a MaintenanceConfig or None")
        if tool_result_eviction is not None and not isinstance(
            tool_result_eviction, ToolResultEvictionConfig
        ):
            raise ConfigError("tool_result_eviction must be a ToolResultEvictionConfig or None")
        for name, value in (("memory_flush", memory_flush), ("memory_tools", memory_tools)):
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be True or False")
        self.workspace = Workspace.coerce(workspace, namespace)
        self.redactor: Callable[[str], str] | None = (
            compaction.redactor if compaction is not None else redact
        )
        self.log = SessionLog(self.workspace, session_id, redact=self.redactor)
        self.session_id = self.log.session_id
        self.last_compaction: CompactionResult | None = None
        """The latest compaction that changed the history (``None`` before the first)."""
        summary_model = _as_model(model, "model")
        memory = _as_model(memory_model, "memory_model") if memory_model else summary_model
        self.scheduler: MemoryMaintenanceScheduler | None = None
        """The maintenance thread (``maintenance=``), or ``None``."""
        if maintenance is not None:
            consolidator = MemoryConsolidator(
                self.workspace, memory, max_memory_tokens=maintenance.max_memory_tokens
            )
            self.scheduler = MemoryMaintenanceScheduler(
                self.workspace, consolidator, config=maintenance
            )
        self.flush_manager: MemoryFlushManager | None = None
        if memory_flush:
            self.flush_manager = MemoryFlushManager(
                self.workspace, memory, scheduler=self.scheduler
            )
        self.compactor: ConversationCompactor | None = None
        if compaction is not None:
            self.compactor = ConversationCompactor(
                summary_model, self.workspace, compaction, on_flush=self._flush_before_compaction
            )
        self.evictor: ToolResultEvictor | None = None
        if tool_result_eviction is not None:
            self.evictor = ToolResultEvictor(
                self.workspace, tool_result_eviction, session_id=self.session_id
            )
        self.context = WorkspaceContextHook(
            self.workspace,
            max_context_tokens=max_context_tokens,
            memory_tools=memory_tools,
            auto_memory=memory_flush,
            agents_md=inject_agents_md,
            memory_md=inject_memory,
        )
        self.toolset = memdir_toolset(self.workspace) if memory_tools else None
        self._background = BackgroundTasks()
        self._cache: dict[int, tuple[ModelMessage, list[Msg]]] = {}
        self._logged: set[str] = set()  # ids this capability appended to the log

    # -- what the capability adds to the agent --------------------------------------------------

    def get_instructions(self) -> Any:
        """The workspace context (date, guidance, AGENTS.md, MEMORY.md), read per request."""

        def memdir_context(ctx: RunContext[Any]) -> str:
            return self.context.render(self.session_id)

        return memdir_context

    def get_toolset(self) -> Any:
        """memdir's memory tools, unless ``memory_tools=False``."""
        return self.toolset

    # -- hooks ------------------------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Log, evict and compact the conversation before it is sent."""
        messages = list(request_context.messages)
        msgs = self._convert(messages)
        await self._log(msgs)
        changed = False
        if self.evictor is not None:
            outcome = self.evictor.evict(msgs)
            if outcome.evicted:
                msgs, changed = outcome.messages, True
        if self.compactor is not None:
            system = "\n\n".join(
                p.content for p in request_context.model_request_parameters.instruction_parts or []
            )
            result = await self.compactor.compact_if_needed(
                msgs, session_id=self.session_id, system=system or None
            )
            if result is not None:
                msgs, changed = result.messages, True
                self.last_compaction = result
                await self._log(msgs)
        if changed:
            rebuilt = msgs_to_messages(msgs)
            request_context.messages = list(rebuilt)
            ctx.messages[:] = rebuilt
        return request_context

    async def before_run(self, ctx: RunContext[Any]) -> None:
        """Start the maintenance thread (``maintenance=``) at the first run."""
        if self.scheduler is not None and not self.scheduler.running:
            self.scheduler.start()

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """Log what the run added since its last model request (its final answer), then
        flush new facts of the run to the daily ledger in the background."""
        msgs = self._convert(list(result.all_messages()))
        # Not fsync'd here (the run's prompt was, before its request): the next append to
        # this log, fsync'd, makes it durable; until then a crash of the process loses nothing.
        await self._log(msgs, fsync=False)
        if self.flush_manager is not None:
            self._flush_in_background(msgs)
        return result

    async def aclose(self) -> None:
        """Wait for the background flushes to finish and stop the maintenance thread.

        The capability may run again after this (maintenance starts again with the run).
        """
        await self._background.drain()
        if self.scheduler is not None and self.scheduler.running:
            await asyncio.to_thread(self.scheduler.stop)

    # -- internals ---------------------------------------------------------------------------

    def _convert(self, messages: Sequence[ModelMessage]) -> list[Msg]:
        """The memdir messages, converted once per message object (the last one every time)."""
        cache = self._cache
        out: list[Msg] = []
        for index, message in enumerate(messages):
            hit = cache.get(id(message))
            if hit is not None and hit[0] is message and index < len(messages) - 1:
                out.extend(hit[1])
                continue
            converted = messages_to_msgs([message])
            cache[id(message)] = (message, converted)
            out.extend(converted)
        if len(cache) > 2 * len(messages) + 64:
            live = {id(m) for m in messages}
            self._cache = {k: v for k, v in cache.items() if k in live}
        return out

    async def _log(self, msgs: list[Msg], *, fsync: bool = True) -> None:
        """Append the messages this capability has not logged yet, masked.

        The log skips what it holds anyway (another process may have logged a message);
        remembering what was logged here spares masking and locking the whole history again
        on every request.
        """
        fresh = [m for m in msgs if m.id not in self._logged]
        if not fresh:
            return
        if self.redactor is not None:
            redactor = self.redactor
            fresh = [mask_metadata(m, MESSAGE_KEY, redactor, opaque=_OPAQUE) for m in fresh]
        await asyncio.to_thread(self.log.append, fresh, fsync=fsync)
        self._logged.update(m.id for m in fresh)

    async def _flush_before_compaction(self, msgs: Sequence[Msg], *, session_id: str) -> None:
        if self.flush_manager is not None:
            await self.flush_manager.flush_memories(msgs, session_id=session_id)

    def _flush_in_background(self, msgs: list[Msg]) -> None:
        assert self.flush_manager is not None
        self._background.spawn(
            self.flush_manager.flush_memories(msgs, session_id=self.session_id),
            name=f"memory flush of session {self.session_id}",
        )
