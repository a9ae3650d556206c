"""memdir: durable, file-based memory and lossless context compaction for LLM agents."""

from __future__ import annotations

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
from memdir.workspace import Workspace

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ContextOverflowError",
    "IndexCorruptError",
    "MemdirError",
    "ModelError",
    "SessionLogError",
    "ToolInputError",
    "Workspace",
    "WorkspaceError",
    "__version__",
]
