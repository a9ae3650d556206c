"""A unified line diff between two texts, as rows a template shows (never as markup)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["DiffLine", "diff_lines"]


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One row of a diff.

    Attributes:
        kind: ``add`` (only in the newer text), ``del`` (only in the older one), ``ctx`` (in
            both) or ``hunk`` (where a group of changes starts: ``@@ -3,4 +3,5 @@``).
        sign: ``+``, ``-``, a space, or ``""`` for a hunk.
        text: the line, without its newline.
    """

    kind: str
    sign: str
    text: str


_KINDS = {"+": "add", "-": "del", " ": "ctx"}


def diff_lines(old: str, new: str, *, context: int = 3) -> list[DiffLine]:
    """The unified diff from ``old`` to ``new``, ``context`` unchanged lines around each
    change (empty: the texts have the same lines)."""
    rows: list[DiffLine] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context):
        if line.startswith(("---", "+++")) and not rows:
            continue  # the file header: the page names both versions itself
        if line.startswith("@@"):
            rows.append(DiffLine("hunk", "", line))
        else:
            rows.append(DiffLine(_KINDS.get(line[:1], "ctx"), line[:1], line[1:]))
    return rows
