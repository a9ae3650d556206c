"""Which memdir namespace a LangChain run uses, and the middleware's parts in each namespace.

One agent may serve many users: ``namespace_from`` names, per run, the namespace whose memory
the run reads and writes (its session log, ledger, ``MEMORY.md``, evicted results and memory
tools). It is a key looked up in the run's context (``invoke(..., context=...)``) and then in
``config["configurable"]``, its value a caller id mapped as LangGraph's store maps a label
(:func:`~memdir.store.namespaces.namespace_for`), or a function of the run's ``Runtime`` that
returns the namespace itself. A run that names none uses the middleware's own namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from langgraph.config import get_config
from langgraph.runtime import Runtime, get_runtime

from memdir.agent import WorkspaceContextHook
from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.errors import ConfigError
from memdir.memory import (
    MaintenanceConfig,
    MemoryConsolidator,
    MemoryFlushManager,
    MemoryMaintenanceScheduler,
)
from memdir.models import ChatModel
from memdir.store.namespaces import namespace_for, validate_namespace
from memdir.store.workspace import Workspace

__all__ = ["NamespaceFrom", "Settings", "Space", "check_namespace_from", "run_namespace"]

NamespaceFrom: TypeAlias = str | Callable[[Runtime[Any]], str | None]
"""A key of the run's context or configurable, or a function of the run's ``Runtime``."""


def check_namespace_from(value: object) -> NamespaceFrom | None:
    """``value`` if it can name a run's namespace, else :class:`ConfigError`."""
    if value is None or callable(value) or (isinstance(value, str) and value):
        return value
    raise ConfigError(
        "namespace_from must be a key of the run's context or configurable (e.g. 'user_id'), "
        f"a function of the run's Runtime, or None; not {type(value).__name__} {value!r:.40}"
    )


def run_namespace(source: NamespaceFrom, default: str | None) -> str | None:
    """The namespace of the LangGraph run in progress (see the module docstring).

    ``default`` outside a run, and for a run that names none.

    Raises:
        ConfigError: the run names no valid namespace: an id that is empty or not a string,
            or a name from the function that is not a valid namespace name.
    """
    try:
        config = get_config()
        found: Runtime[Any] | None = get_runtime()  # None in a graph run without one
    except RuntimeError:  # not inside a run (a tool called directly, say)
        return default
    runtime = found if found is not None else Runtime()
    if callable(source):
        name = source(runtime)
        if name is None:
            return default
        if name == "":
            raise ConfigError(
                "namespace_from returned an empty namespace: return a name, or None for "
                "the middleware's own namespace"
            )
        return validate_namespace(name)
    value = _context_value(runtime.context, source)
    if value is None:
        value = (config.get("configurable") or {}).get(source)
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        shown = "an empty string" if value == "" else type(value).__name__
        raise ConfigError(
            f"the run's {source!r} names its memdir namespace (namespace_from) and must be a "
            f"non-empty string, not {shown}"
        )
    return namespace_for(user_id=value)


def _context_value(context: object, key: str) -> object:
    """``context[key]`` of a mapping, ``context.key`` of an object (a dataclass, a model)."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What the parts of every namespace are built from (the middleware's arguments)."""

    model: ChatModel
    compaction: CompactionConfig | None
    memory_flush: bool
    memory_tools: bool
    workspace_context: bool
    inject_memory: bool
    max_context_tokens: int
    maintenance: MaintenanceConfig | None


@dataclass(frozen=True, slots=True)
class Space:
    """The middleware's parts bound to one namespace of the workspace."""

    workspace: Workspace
    compactor: ConversationCompactor | None
    flusher: MemoryFlushManager | None
    context: WorkspaceContextHook | None
    scheduler: MemoryMaintenanceScheduler | None

    @classmethod
    def build(cls, workspace: Workspace, settings: Settings) -> Space:
        """The parts of ``workspace`` (one namespace), as ``settings`` asks."""
        scheduler = None
        if settings.maintenance is not None:
            consolidator = MemoryConsolidator(
                workspace,
                settings.model,
                max_memory_tokens=settings.maintenance.max_memory_tokens,
            )
            scheduler = MemoryMaintenanceScheduler(
                workspace, consolidator, config=settings.maintenance
            )
        flusher = (
            MemoryFlushManager(workspace, settings.model, scheduler=scheduler)
            if settings.memory_flush
            else None
        )
        compactor = (
            ConversationCompactor(
                settings.model,
                workspace,
                settings.compaction,
                on_flush=flusher.flush_memories if flusher is not None else None,
            )
            if settings.compaction is not None
            else None
        )
        context = (
            WorkspaceContextHook(
                workspace,
                max_context_tokens=settings.max_context_tokens,
                memory_tools=settings.memory_tools,
                auto_memory=settings.memory_flush,
                memory_md=settings.inject_memory,
            )
            if settings.workspace_context
            else None
        )
        return cls(workspace, compactor, flusher, context, scheduler)
