"""The public surface of ``import memdir``: sorted, unique, importable, documented, and locked.

Adding or removing a public name is a deliberate change: update ``EXPECTED`` in the same
commit (cf. encode/httpx ``tests/test_exported_members.py``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import memdir

EXPECTED = [
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


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then everything else.
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
        return 0, name
    if name[:1].isupper():
        return 1, name
    return 2, name


def test_all_is_sorted_and_unique() -> None:
    assert memdir.__all__ == sorted(memdir.__all__, key=_isort_key)
    assert len(set(memdir.__all__)) == len(memdir.__all__)


def test_every_public_name_is_importable_and_documented() -> None:
    undocumented = []
    for name in memdir.__all__:
        obj = getattr(memdir, name)  # AttributeError: listed but not imported
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants (SUMMARY_NAME, __version__) carry no docstring of their own
        doc = obj.__doc__ or ""
        # A dataclass without a docstring gets "Name(field: type, ...)" generated for it.
        generated = dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}(")
        if not doc.strip() or generated:
            undocumented.append(name)
    assert undocumented == []


def test_public_objects_live_in_memdir() -> None:
    foreign = [
        name
        for name in memdir.__all__
        if (inspect.isclass(getattr(memdir, name)) or inspect.isfunction(getattr(memdir, name)))
        and not getattr(memdir, name).__module__.startswith("memdir.")
    ]
    assert foreign == []


def test_the_public_surface_is_locked() -> None:
    assert memdir.__all__ == EXPECTED
