"""Which stored units of a file a new parse replaces, keeps, or only re-heads (any engine)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memdir.index._markdown import Unit

__all__ = ["UnitDiff", "diff_units"]


@dataclass(frozen=True, slots=True)
class UnitDiff:
    """What to write so the stored units equal the parsed ones.

    Attributes:
        gone: ``(row id, old content)`` of the stored units to delete.
        heads: ``(new head, row id)`` of kept units whose heading line moved.
        fresh: the parsed units to insert (new, or replacing one in ``gone``).
    """

    gone: list[tuple[int, str]]
    heads: list[tuple[int, int]]
    fresh: list[Unit]


def diff_units(
    old: Mapping[int, tuple[int, int, str]], new: Mapping[int, Unit], *, force: bool
) -> UnitDiff:
    """Diff stored units ``{row id: (line end, head, content)}`` against parsed ``new``.

    ``force`` replaces every stored unit, changed or not.
    """
    gone: list[tuple[int, str]] = []
    heads: list[tuple[int, int]] = []
    for rowid, (end, head, content) in old.items():
        unit = new.get(rowid)
        if force or unit is None or unit.end != end or unit.content != content:
            gone.append((rowid, content))
        elif unit.head != head:
            heads.append((unit.head, rowid))
    dropped = {rowid for rowid, _ in gone}
    fresh = [u for rowid, u in new.items() if rowid not in old or rowid in dropped]
    return UnitDiff(gone, heads, fresh)
