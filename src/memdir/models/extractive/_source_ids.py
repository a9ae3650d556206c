"""The source-id marker of consolidation requests and answers: ``[src: e3, m1]``.

Defined here, free of other memdir imports, because the offline model reads and writes it
as any model does; :mod:`memdir.memory._markers` builds on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MARKER", "add_marker", "split_marker"]

MARKER = re.compile(r"\s*\[\s*src\s*[:：]\s*([^\]\n]{0,400})\]", re.IGNORECASE)
_ID = re.compile(r"[A-Za-z]+\d+")


def add_marker(line: str, ids: Iterable[str]) -> str:
    """``line`` with `` [src: a, b]`` after it (as it is when ``ids`` is empty)."""
    names = list(dict.fromkeys(ids))
    return f"{line.rstrip()} [src: {', '.join(names)}]" if names else line


def split_marker(text: str) -> tuple[str, list[str]]:
    """A bullet's text without its markers, and the ids they held (in order, once each)."""
    ids: list[str] = []
    for match in MARKER.finditer(text):
        ids += _ID.findall(match.group(1))
    return MARKER.sub("", text).rstrip(), list(dict.fromkeys(ids))
