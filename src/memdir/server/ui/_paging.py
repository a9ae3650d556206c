"""Long lists and files a page at a time: the numbers a query gives, and the window of items
a page shows (around a cited line, or from where the reader paged to)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from memdir.server.ui._session import Refused

__all__ = ["Window", "number", "window"]

_MAX: Final = 10**9


def number(value: str, name: str) -> int | None:
    """The positive whole number a query parameter ``name`` holds (``""``: ``None``).

    Raises:
        Refused: 400 for anything else.
    """
    if value == "":
        return None
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= _MAX:
        raise Refused(400, f"{name} must be a whole number from 1")
    return int(value)


@dataclass(frozen=True, slots=True)
class Window:
    """Items ``first..last`` (1-based, inclusive) of ``total`` shown on a page.

    Attributes:
        first: the first shown (``last < first`` when there is none).
        last: the last shown.
        total: how many there are.
        size: how many a page shows.
    """

    first: int
    last: int
    total: int
    size: int

    @property
    def previous(self) -> int | None:
        """Where the page before starts (``None``: this is the first)."""
        return max(1, self.first - self.size) if self.first > 1 else None

    @property
    def next(self) -> int | None:
        """Where the page after starts (``None``: this is the last)."""
        return self.last + 1 if self.last < self.total else None


def window(total: int, size: int, *, start: int | None = None, focus: int | None = None) -> Window:
    """The page of ``total`` items that starts at ``start``, else holds ``focus`` near its
    top quarter, else starts at the first."""
    if start is not None:
        first = min(start, max(total, 1))
    elif focus is not None:
        first = max(1, min(focus - size // 4, total - size + 1))
    else:
        first = 1
    return Window(first=first, last=min(total, first + size - 1), total=total, size=size)
