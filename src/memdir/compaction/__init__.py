"""Conversation compaction that never loses a message.

::

    compactor = ConversationCompactor(model, workspace, CompactionConfig(trigger_tokens=60_000))
    result = await compactor.compact_if_needed(messages, session_id="s1", system=system)
    if result is not None:
        messages = result.messages

See :mod:`memdir.compaction.compactor` for the stages and ``docs/compaction.md`` for the
guarantees.
"""

from __future__ import annotations

from memdir.compaction.compactor import (
    CompactionPlan,
    CompactionResult,
    ConversationCompactor,
    FlushHook,
)
from memdir.compaction.config import (
    ClearToolResultsConfig,
    CompactionConfig,
    TruncateArgsConfig,
)
from memdir.compaction.events import CompactionEvent, CompactionListener
from memdir.compaction.overflow import is_context_overflow
from memdir.compaction.summary import (
    DEFAULT_SUMMARY_PROMPT,
    SUMMARY_SECTIONS,
    build_summary_message,
    render_messages,
    summary_log,
    summary_text,
)

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "SUMMARY_SECTIONS",
    "ClearToolResultsConfig",
    "CompactionConfig",
    "CompactionEvent",
    "CompactionListener",
    "CompactionPlan",
    "CompactionResult",
    "ConversationCompactor",
    "FlushHook",
    "TruncateArgsConfig",
    "build_summary_message",
    "is_context_overflow",
    "render_messages",
    "summary_log",
    "summary_text",
]
