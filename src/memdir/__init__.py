"""memdir: durable, file-based memory and lossless context compaction for LLM agents."""

from __future__ import annotations

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
    SessionLogError,
    ToolInputError,
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
