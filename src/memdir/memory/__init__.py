"""Long-term memory: flush to the daily ledger, consolidation into ``MEMORY.md``, maintenance.

- :class:`MemoryFlushManager` extracts new facts from conversation messages into
  ``memory/YYYY-MM-DD.md``, exactly once per message.
- :class:`MemoryConsolidator` merges new ledger entries into ``MEMORY.md`` within a size budget,
  keeping previous versions and refusing destructive rewrites.
- :class:`MemoryMaintenanceScheduler` archives, consolidates, prunes and reindexes in the
  background, once across processes; :func:`request_consolidation` asks any of them for a
  consolidation, :func:`read_schedule` tells when they last ran.
- :func:`replace_memory_md` replaces ``MEMORY.md`` for a person or a client, by
  compare-and-swap, with history.
"""

from __future__ import annotations

from memdir.memory._history import read_log as read_consolidation_log
from memdir.memory._prompts import DEFAULT_CONSOLIDATION_PROMPT, DEFAULT_FLUSH_PROMPT
from memdir.memory._schedule import MaintenanceSchedule, read_schedule, request_consolidation
from memdir.memory.consolidate import ConsolidationResult, MemoryConsolidator
from memdir.memory.curated import CuratedWrite, replace_memory_md
from memdir.memory.flush import FlushResult, MemoryFlushManager, flushed_message_ids
from memdir.memory.maintenance import (
    MaintenanceConfig,
    MaintenanceReport,
    MemoryMaintenanceScheduler,
)

__all__ = [
    "DEFAULT_CONSOLIDATION_PROMPT",
    "DEFAULT_FLUSH_PROMPT",
    "ConsolidationResult",
    "CuratedWrite",
    "FlushResult",
    "MaintenanceConfig",
    "MaintenanceReport",
    "MaintenanceSchedule",
    "MemoryConsolidator",
    "MemoryFlushManager",
    "MemoryMaintenanceScheduler",
    "flushed_message_ids",
    "read_consolidation_log",
    "read_schedule",
    "replace_memory_md",
    "request_consolidation",
]
