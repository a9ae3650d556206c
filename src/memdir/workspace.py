"""The workspace: a directory of plain files that holds one agent's memory.

The implementation lives in :mod:`memdir.store.workspace`; this module keeps the public import
path ``from memdir.workspace import Workspace`` working.
"""

from __future__ import annotations

from memdir.store.workspace import (
    AGENTS_MD,
    ARCHIVE_DIR,
    DEFAULT_WORKSPACE,
    FILE_TOOL_AREA,
    HISTORY_DIR,
    INDEX_DIR,
    LARGE_RESULTS_DIR,
    MEMORY_AREA,
    MEMORY_DIR,
    MEMORY_MD,
    SERVER_DIR,
    SESSIONS_DIR,
    TIMEZONE_ENV,
    WORKSPACE_AREA,
    WORKSPACE_ENV,
    Clock,
    Workspace,
    area_of,
    atomic_write,
    file_lock,
    fsync_dir,
    locked_append,
    resolve_workspace_root,
)

__all__ = [
    "AGENTS_MD",
    "ARCHIVE_DIR",
    "DEFAULT_WORKSPACE",
    "FILE_TOOL_AREA",
    "HISTORY_DIR",
    "INDEX_DIR",
    "LARGE_RESULTS_DIR",
    "MEMORY_AREA",
    "MEMORY_DIR",
    "MEMORY_MD",
    "SERVER_DIR",
    "SESSIONS_DIR",
    "TIMEZONE_ENV",
    "WORKSPACE_AREA",
    "WORKSPACE_ENV",
    "Clock",
    "Workspace",
    "area_of",
    "atomic_write",
    "file_lock",
    "fsync_dir",
    "locked_append",
    "resolve_workspace_root",
]
