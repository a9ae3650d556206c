"""Source ids in a consolidation request and its answer: ``[src: e3, m1]`` after a bullet.

The request gives every new ledger entry an id (``e1``, ``e2``…) and every bullet of the
current ``MEMORY.md`` one (``m1``…); the consolidator ends each bullet it writes with the ids
of the bullets it came from. The ids are stripped from the answer before anything else reads
it: they never reach ``MEMORY.md``. An id the request did not give is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memdir.memory._entries import parse_bullets
from memdir.models.extractive._source_ids import MARKER, add_marker, split_marker

__all__ = ["MARKER", "add_marker", "mark_bullets", "split_marker", "strip_markers"]


def mark_bullets(text: str, ids: Mapping[int, Sequence[str]]) -> str:
    """``text`` with markers after the last line of bullets, by 0-based first line."""
    lines = text.split("\n")
    for bullet in parse_bullets(text):
        names = ids.get(bullet.first_line)
        if names:
            lines[bullet.last_line] = add_marker(lines[bullet.last_line], names)
    return "\n".join(lines)


def strip_markers(text: str) -> tuple[str, dict[str, list[str]]]:
    """The answer without markers, and the ids given to each bullet, by its normalised key."""
    lines = text.split("\n")
    found: dict[int, list[str]] = {}
    for number, line in enumerate(lines):
        clean, names = split_marker(line)
        if names or clean != line:
            lines[number] = clean
            found[number] = names
    clean_text = "\n".join(lines)
    by_key: dict[str, list[str]] = {}
    for bullet in parse_bullets(clean_text):
        names = [
            n for i in range(bullet.first_line, bullet.last_line + 1) for n in found.get(i, [])
        ]
        if names:
            merged = by_key.setdefault(bullet.key, [])
            merged += [n for n in names if n not in merged]
    return clean_text, by_key
