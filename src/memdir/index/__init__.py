"""Full-text search over a workspace's memory files (SQLite FTS5, CJK-correct).

:class:`MemoryIndex` keeps ``<workspace>/.index/memory_index.db`` in step with ``MEMORY.md``,
``memory/*.md`` and ``memory/archive/*.md`` and answers :meth:`MemoryIndex.search` with
:class:`SearchHit` spans (path, 1-based line range, heading, text, score).
"""

from __future__ import annotations

from memdir.index._core import MemoryIndex
from memdir.index._types import EmbedStats, IndexStats, IndexStatus, SearchHit, SearchIndex

__all__ = ["EmbedStats", "IndexStats", "IndexStatus", "MemoryIndex", "SearchHit", "SearchIndex"]
