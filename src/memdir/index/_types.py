"""Result types of the memory index, and what a caller needs of one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["EmbedStats", "IndexStats", "IndexStatus", "SearchHit", "SearchIndex"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    """One search result: a line (usually one bullet) or a small span of lines of a memory file.

    Attributes:
        path: workspace-relative POSIX path of the file (``MEMORY.md``, ``memory/2026-11-30.md``,
            ``memory/archive/2025-01-02.md``).
        line_number: first line of the span, 1-based.
        line_end: last line of the span, 1-based, inclusive (equal to ``line_number`` for a
            one-line hit).
        content: the text of those lines as stored in the file (joined with ``\\n``).
        score: relevance; higher is better. Scores compare hits of one query only: a BM25 sum
            over the matched query terms (rare terms weigh more), scaled by the share of the
            query the span covers, plus a bonus for query terms standing close together and a
            share of the score of a strong match on the line next to it (same section), times
            small boosts for recent daily files and for ``MEMORY.md``. In hybrid search
            (an embedder is set) it is the reciprocal rank fusion of the lexical rank and the
            vector-similarity rank instead: ``1 / (10 + lexical rank) + 0.7 / (10 + vector rank)``.
        heading: text of the nearest Markdown heading above the span (without ``#``), if any.
        archived: the file lives in ``memory/archive/``.
        sources: where the span's bullets came from (:mod:`memdir.provenance`): for
            ``MEMORY.md`` the ledger lines (``memory/2026-11-30.md#L5``), for a ledger the
            session messages (``sessions/<id>.log.jsonl#<message id>``) or how it was added
            (``added by a person (memdir add)``), ``unsourced`` when nothing is known; empty
            for a span without bullets. ``memdir why`` follows them to the conversation.
        superseded_by: when a later line among the best hits states a changed value of what
            this one says ("the batch size is now 5,000" after "batches of 2,000 rows"), that
            line's citation (``memory/2026-12-01.md#L4-L4``); it is ranked above this one.
            ``None``: no newer line was found among the best hits.
        supersedes: the citations of the earlier lines among the best hits whose value this
            one changes (the reverse of ``superseded_by``); empty when none.
    """

    path: str
    line_number: int
    line_end: int
    content: str
    score: float
    heading: str | None = None
    archived: bool = False
    sources: tuple[str, ...] = ()
    superseded_by: str | None = None
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexStats:
    """What one indexing pass did.

    Attributes:
        files_indexed: files whose content changed and were (re)indexed.
        files_unchanged: files skipped because they had not changed.
        files_removed: files that no longer exist and whose rows were removed.
        lines_indexed: searchable spans inserted or replaced (unchanged spans are not counted).
        seconds: wall time of the pass.
    """

    files_indexed: int
    files_unchanged: int
    files_removed: int
    lines_indexed: int
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbedStats:
    """What one :meth:`MemoryIndex.embed_pending` call did.

    Attributes:
        embedded: distinct memory lines embedded by this call.
        pending: distinct lines still without a vector (the call ran out of time).
        total: distinct lines in the index that have text to embed.
        removed: vectors dropped because no line holds their text any more.
        seconds: wall time of the call.
    """

    embedded: int
    pending: int
    total: int
    removed: int
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexStatus:
    """What :meth:`MemoryIndex.status` found.

    Attributes:
        files: memory files in the index.
        lines: searchable units in the index.
        embedder: the embedder searches use (``None``: lexical only).
        choice: why: ``"setting"`` (the workspace's setting), ``"automatic"`` (no setting, the
            bundled e5 is installed), ``"off"``, ``"unavailable"`` (no setting and no
            embedder installed) or ``"argument"`` (given to :class:`MemoryIndex`).
        vectors: distinct lines that have a vector (0 when lexical).
        pending: distinct lines still waiting for one; searches fuse what exists.
    """

    files: int
    lines: int
    embedder: str | None
    choice: str
    vectors: int = 0
    pending: int = 0


class SearchIndex(Protocol):
    """What searching and writing memory need of an index: a workspace's
    :class:`~memdir.index.MemoryIndex`, or for a workspace on a ``memdir serve`` server the
    server's own (searched through it)."""

    def refresh(self) -> IndexStats:
        """Bring the index up to date with the memory files."""

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """The best hits for ``query``, best first."""

    def index_file(self, rel: str) -> int:
        """Index one memory file now (after a write); the lines indexed."""

    def index_appended(self, rel: str, offset: int) -> int:
        """Index what was appended to ``rel`` from byte ``offset``; that text's first line."""
