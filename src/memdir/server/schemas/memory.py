"""Bodies of the memory routes: add, search, excerpt, ledgers, consolidations."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field, computed_field

from memdir.server.schemas.meta import FromLibrary
from memdir.server.schemas.sessions import SessionHitOut

__all__ = ["AddIn", "Added", "CuratedOut", "Excerpt", "Hit", "Ledger", "SearchResult"]


class AddIn(BaseModel):
    """Facts to remember: each non-blank line becomes a bullet of today's ledger."""

    text: str = Field(description="The fact(s), one per line (at most 32,000 characters).")


class Added(FromLibrary):
    """Where an add wrote."""

    path: str
    first_line: int
    last_line: int
    citation: str = Field(description="path#Lfirst-Llast")
    bullets: int
    masked: int = Field(description="Secrets masked as [REDACTED:<kind>] before writing.")
    index_error: str | None = Field(description="Why the index could not follow at once.")


class Hit(FromLibrary):
    """A memory search hit (as :class:`memdir.index.SearchHit`)."""

    path: str
    line_number: int
    line_end: int
    content: str
    score: float
    heading: str | None
    archived: bool
    sources: list[str] = Field(
        default_factory=list,
        description="Where the span's bullets came from: ledger lines for MEMORY.md, session "
        "messages or who added it for a ledger, 'unsourced' when nothing is known.",
    )
    superseded_by: str | None = Field(
        default=None,
        description="When a later line among the best hits states a changed value of what "
        "this one says, its citation (path#Lstart-Lend); it is ranked above this one.",
    )
    supersedes: list[str] = Field(
        default_factory=list,
        description="The citations of the earlier lines among the best hits whose value this "
        "line changes.",
    )

    @computed_field(description="path#Lstart-Lend")  # type: ignore[prop-decorator]
    @property
    def citation(self) -> str:
        """Where the hit is, as the tools cite it."""
        return f"{self.path}#L{self.line_number}-L{self.line_end}"


class SearchResult(BaseModel):
    """Memory hits and past-session hits, each best first."""

    hits: list[Hit]
    session_hits: list[SessionHitOut]


class Excerpt(FromLibrary):
    """Lines of a memory file."""

    path: str = Field(description="The file read.")
    requested: str = Field(description="The file asked for (differs when a ledger was archived).")
    start_line: int
    end_line: int
    total_lines: int
    lines: list[str]


class Ledger(BaseModel):
    """A daily ledger."""

    date: dt.date
    path: str
    size: int = Field(description="Bytes.")
    archived: bool


class CuratedOut(FromLibrary):
    """What a replace of ``MEMORY.md`` did (as :class:`memdir.memory.CuratedWrite`)."""

    version: str | None = Field(
        description="Its version now (also the ETag), for the next If-Match; null when another "
        "writer changed it again at once (GET it)."
    )
    changed: bool = Field(description="False: it held this text already (nothing written).")
    history_path: str | None = Field(description="Where the previous file was kept.")
    masked: int = Field(description="Secrets masked as [REDACTED:<kind>] before writing.")
    index_error: str | None = Field(description="Why the index could not follow at once.")


ConsolidationRecord = dict[str, Any]
"""A consolidation log record (see docs/memory.md)."""
