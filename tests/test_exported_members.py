"""The public surface of ``import memdir``: sorted, unique, importable, documented, and locked.

Adding or removing a public name is a deliberate change: update ``EXPECTED`` in the same
commit (cf. encode/httpx ``tests/test_exported_members.py``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

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


# -- public modules ----------------------------------------------------------------------------

_DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
_SRC = Path(__file__).resolve().parents[1] / "src"


def _documented() -> tuple[list[str], dict[str, str]]:
    """The public modules and the deprecated paths (old -> new) that docs/design.md lists."""
    text = _DESIGN.read_text("utf-8")
    public_part, _, deprecated_part = text.partition("Deprecated paths")
    public = re.findall(r"^\| `(memdir[\w.]*)` \|", public_part.split("## Public modules")[1], re.M)
    deprecated = dict(
        re.findall(r"^\| `(memdir[\w.]*)` \| `(memdir[\w.]*)` \|", deprecated_part, re.M)
    )
    return public, deprecated


def test_every_public_module_is_documented_and_imports() -> None:
    public, deprecated = _documented()
    found = set()
    for path in (_SRC / "memdir").rglob("*.py"):
        parts = path.relative_to(_SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(p.startswith("_") for p in parts):
            found.add(".".join(parts))
    assert sorted(found - set(deprecated)) == sorted(public)
    for name in public:
        importlib.import_module(name)


def test_a_moved_module_still_imports_with_a_warning() -> None:
    _, deprecated = _documented()
    assert deprecated  # memdir.ledger moved to memdir.store.ledger
    for old, new in deprecated.items():
        sys.modules.pop(old, None)
        with pytest.warns(DeprecationWarning, match=re.escape(new)):
            moved = importlib.import_module(old)
        target = importlib.import_module(new)
        for name in target.__all__:
            assert getattr(moved, name) is getattr(target, name)
