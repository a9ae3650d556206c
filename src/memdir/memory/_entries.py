"""Bullets of a Markdown memory file: parsing, comparison and the entry-level diff.

A bullet is a list item (``-``, ``*``, ``+``, ``•`` or ``1.``) plus its indented continuation
lines. Comparison uses :func:`memdir.store.ledger.normalize_bullet`; "the same fact reworded" is
decided by word overlap, and "the same fact updated" by
:mod:`memdir.models.extractive._supersede`, so that an updated fact counts as *changed*, not as
removed + added.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memdir.models.extractive._supersede import superseded_pairs
from memdir.store.ledger import Bullet, bullet_words, normalize_bullet, parse_bullets

__all__ = [
    "Bullet",
    "EntryDiff",
    "diff_entries",
    "parse_bullets",
    "strip_fence",
]

_FENCE = re.compile(r"^\s*```[\w+-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)
_SIMILAR = 0.5


def strip_fence(text: str) -> str:
    """Remove one enclosing Markdown code fence (models like to wrap files in them)."""
    match = _FENCE.match(text.strip())
    return match.group(1) if match else text


tokens = bullet_words


@dataclass(frozen=True, slots=True)
class EntryDiff:
    """Entry-level difference between two versions of a memory file."""

    added: tuple[str, ...]
    changed: tuple[tuple[str, str], ...]
    removed: tuple[str, ...]
    unchanged: int


def _containment(old: set[str], new: set[str]) -> float:
    return len(old & new) / len(old) if old else 0.0


def diff_entries(old: Iterable[str], new: Iterable[str]) -> EntryDiff:
    """Compare bullet texts: exact (normalized) matches, rewordings (changed), the rest.

    An old bullet counts as *changed* when at least half of its words appear in one new
    bullet that has no exact counterpart (several old bullets may merge into one new one),
    or when such a new bullet supersedes it ("batch size changed to 2,000 (was 5,000)"
    replaces "the backfill runs in batches of 5,000 rows").
    """
    old_list = _unique(old)
    new_list = _unique(new)
    new_keys = {normalize_bullet(t) for t in new_list}
    old_keys = {normalize_bullet(t) for t in old_list}
    gone = [t for t in old_list if normalize_bullet(t) not in new_keys]
    fresh = [t for t in new_list if normalize_bullet(t) not in old_keys]
    fresh_tokens = [(t, tokens(t)) for t in fresh]
    pairs: dict[str, str] = {}
    for text in gone:
        mine = tokens(text)
        best, best_score = None, 0.0
        for candidate, theirs in fresh_tokens:
            score = _containment(mine, theirs)
            if score > best_score:
                best, best_score = candidate, score
        if best is not None and best_score >= _SIMILAR:
            pairs[text] = best
    if fresh:
        pairs.update(superseded_pairs([t for t in gone if t not in pairs], fresh))
    changed = [(t, pairs[t]) for t in gone if t in pairs]
    removed = [t for t in gone if t not in pairs]
    replacements = set(pairs.values())
    added = tuple(t for t in fresh if t not in replacements)
    return EntryDiff(
        added=added,
        changed=tuple(changed),
        removed=tuple(removed),
        unchanged=len(old_list) - len(gone),
    )


def _unique(texts: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for text in texts:
        key = normalize_bullet(text)
        if key and key not in seen:
            seen.add(key)
            out.append(text)
    return out
