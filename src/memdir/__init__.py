"""memdir: durable, file-based memory and lossless context compaction for LLM agents.

The names below load on first use (``memdir.Workspace`` imports the workspace, not the agent
and its models), so that ``import memdir`` and the ``memdir`` command start fast.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from memdir._lazy import lazy_exports

if TYPE_CHECKING:
    from memdir.agent import HarnessAgent, SessionBusyError
    from memdir.compaction import (
        ClearToolResultsConfig,
        CompactionConfig,
        CompactionEvent,
        CompactionResult,
        ConversationCompactor,
        TruncateArgsConfig,
        is_context_overflow,
    )
    from memdir.errors import (
        ConfigError,
        ContextOverflowError,
        IndexCorruptError,
        MemdirError,
        ModelError,
        OutcomeUnknownError,
        SessionLogError,
        ToolInputError,
        VersionConflict,
        WorkspaceError,
    )
    from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
    from memdir.index import EmbedStats, IndexStats, MemoryIndex, SearchHit
    from memdir.ingest import IngestReport, ingest, ingest_sync
    from memdir.memory import (
        ConsolidationResult,
        FlushResult,
        MaintenanceConfig,
        MaintenanceReport,
        MemoryConsolidator,
        MemoryFlushManager,
        MemoryMaintenanceScheduler,
    )
    from memdir.messages import (
        SUMMARY_NAME,
        ImageBlock,
        MessageFormatError,
        Msg,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
    )
    from memdir.models import ChatModel, ModelResponse, ToolSpec, Usage, model_from_string
    from memdir.redact import Redactor, redact
    from memdir.sessions import LogSpan, SessionLog
    from memdir.store.namespaces import IsolationScope, namespace_for
    from memdir.store.workspace import Workspace
    from memdir.tokens import (
        EstimatingCounter,
        ExactCounter,
        TokenCounter,
        UsageAnchor,
        default_counter,
    )
    from memdir.tools import memory_add, memory_get, memory_search

__version__ = "0.1.0"

__all__ = [
    "SUMMARY_NAME",
    "ChatModel",
    "ClearToolResultsConfig",
    "CompactionConfig",
    "CompactionEvent",
    "CompactionResult",
    "ConfigError",
    "ConsolidationResult",
    "ContextOverflowError",
    "ConversationCompactor",
    "EmbedStats",
    "EstimatingCounter",
    "ExactCounter",
    "FlushResult",
    "HarnessAgent",
    "ImageBlock",
    "IndexCorruptError",
    "IndexStats",
    "IngestReport",
    "IsolationScope",
    "LogSpan",
    "MaintenanceConfig",
    "MaintenanceReport",
    "MemdirError",
    "MemoryConsolidator",
    "MemoryFlushManager",
    "MemoryIndex",
    "MemoryMaintenanceScheduler",
    "MessageFormatError",
    "ModelError",
    "ModelResponse",
    "Msg",
    "OutcomeUnknownError",
    "Redactor",
    "SearchHit",
    "SessionBusyError",
    "SessionLog",
    "SessionLogError",
    "TextBlock",
    "ThinkingBlock",
    "TokenCounter",
    "ToolInputError",
    "ToolResultBlock",
    "ToolResultEvictionConfig",
    "ToolResultEvictor",
    "ToolSpec",
    "ToolUseBlock",
    "TruncateArgsConfig",
    "Usage",
    "UsageAnchor",
    "VersionConflict",
    "Workspace",
    "WorkspaceError",
    "__version__",
    "default_counter",
    "ingest",
    "ingest_sync",
    "is_context_overflow",
    "memory_add",
    "memory_get",
    "memory_search",
    "model_from_string",
    "namespace_for",
    "redact",
]

_LAZY: dict[str, str] = {
    "ChatModel": "memdir.models",
    "ClearToolResultsConfig": "memdir.compaction",
    "CompactionConfig": "memdir.compaction",
    "CompactionEvent": "memdir.compaction",
    "CompactionResult": "memdir.compaction",
    "ConfigError": "memdir.errors",
    "ConsolidationResult": "memdir.memory",
    "ContextOverflowError": "memdir.errors",
    "ConversationCompactor": "memdir.compaction",
    "default_counter": "memdir.tokens",
    "EmbedStats": "memdir.index",
    "EstimatingCounter": "memdir.tokens",
    "ExactCounter": "memdir.tokens",
    "FlushResult": "memdir.memory",
    "HarnessAgent": "memdir.agent",
    "ImageBlock": "memdir.messages",
    "IndexCorruptError": "memdir.errors",
    "IndexStats": "memdir.index",
    "ingest": "memdir.ingest",
    "ingest_sync": "memdir.ingest",
    "IngestReport": "memdir.ingest",
    "is_context_overflow": "memdir.compaction",
    "IsolationScope": "memdir.store.namespaces",
    "LogSpan": "memdir.sessions",
    "MaintenanceConfig": "memdir.memory",
    "MaintenanceReport": "memdir.memory",
    "MemdirError": "memdir.errors",
    "memory_add": "memdir.tools",
    "memory_get": "memdir.tools",
    "memory_search": "memdir.tools",
    "MemoryConsolidator": "memdir.memory",
    "MemoryFlushManager": "memdir.memory",
    "MemoryIndex": "memdir.index",
    "MemoryMaintenanceScheduler": "memdir.memory",
    "MessageFormatError": "memdir.messages",
    "model_from_string": "memdir.models",
    "ModelError": "memdir.errors",
    "ModelResponse": "memdir.models",
    "Msg": "memdir.messages",
    "OutcomeUnknownError": "memdir.errors",
    "namespace_for": "memdir.store.namespaces",
    "redact": "memdir.redact",
    "Redactor": "memdir.redact",
    "SearchHit": "memdir.index",
    "SessionBusyError": "memdir.agent",
    "SessionLog": "memdir.sessions",
    "SessionLogError": "memdir.errors",
    "SUMMARY_NAME": "memdir.messages",
    "TextBlock": "memdir.messages",
    "ThinkingBlock": "memdir.messages",
    "TokenCounter": "memdir.tokens",
    "ToolInputError": "memdir.errors",
    "ToolResultBlock": "memdir.messages",
    "ToolResultEvictionConfig": "memdir.eviction",
    "ToolResultEvictor": "memdir.eviction",
    "ToolSpec": "memdir.models",
    "ToolUseBlock": "memdir.messages",
    "TruncateArgsConfig": "memdir.compaction",
    "Usage": "memdir.models",
    "UsageAnchor": "memdir.tokens",
    "VersionConflict": "memdir.errors",
    "Workspace": "memdir.store.workspace",
    "WorkspaceError": "memdir.errors",
}
"""Where each public name lives."""


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)


class _Package(types.ModuleType):
    """The ``memdir`` module, whose ``ingest`` stays the function when ``memdir.ingest`` loads.

    Importing a sub-package binds it on its parent; the function ``memdir.ingest`` and the
    package ``memdir.ingest`` share a name, and the function is the public one.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
