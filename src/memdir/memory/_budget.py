"""Enforce the size budget of ``MEMORY.md`` by dropping bullets deterministically.

The model is asked to stay within the budget; when it does not (twice), the consolidator
trims the answer itself instead of writing an over-budget file. Bullets go in this order:
those that did not just arrive from the ledger, from the end of the file backwards (the
prompt asks for the most important facts first in each section), then the new ones, also from
the end. Sections left empty lose their heading. Trimmed facts are not lost: they stay in the
ledgers, and the previous ``MEMORY.md`` stays in ``memory/.history/``.
"""

from __future__ import annotations

import re

from memdir.memory._entries import parse_bullets

__all__ = ["fit_budget", "tidy"]

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s")


def tidy(text: str) -> str:
    """Drop headings of empty sections, collapse blank runs, end with one newline."""
    lines = text.replace("\r\n", "\n").splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        head = _HEADING.match(line)
        if head:
            level = len(head.group(1))
            nxt = next((ln for ln in lines[i + 1 :] if ln.strip()), None)
            nxt_head = _HEADING.match(nxt) if nxt is not None else None
            if nxt is None or (nxt_head is not None and len(nxt_head.group(1)) <= level):
                continue
        if not line.strip() and (not keep or not keep[-1].strip()):
            continue
        keep.append(line.rstrip())
    while keep and not keep[-1].strip():
        keep.pop()
    return "\n".join(keep) + "\n" if keep else ""


def fit_budget(text: str, max_chars: int, *, newest: set[str]) -> tuple[str, list[str]] | None:
    """Return ``(text within max_chars, trimmed bullets)``, or ``None`` if that is impossible.

    Args:
        text: the proposed ``MEMORY.md``.
        max_chars: the budget.
        newest: normalized keys of the bullets that just arrived (trimmed last).
    """
    text = tidy(text)
    if len(text) <= max_chars:
        return text, []
    lines = text.splitlines()
    bullets = parse_bullets(text)
    order = [b for b in reversed(bullets) if b.key not in newest]
    order += [b for b in reversed(bullets) if b.key in newest]
    dropped: set[int] = set()
    trimmed: list[str] = []
    size = len(text)
    for bullet in order:
        span = range(bullet.first_line, bullet.last_line + 1)
        dropped.update(span)
        size -= sum(len(lines[i]) + 1 for i in span)
        trimmed.append(bullet.text)
        if size > max_chars:
            continue
        candidate = tidy("\n".join(ln for i, ln in enumerate(lines) if i not in dropped))
        if len(candidate) <= max_chars:
            return candidate, trimmed
        size = len(candidate)
    return None
