"""A model's answer that keeps both a fact and its update keeps only the update.

The consolidation prompt asks a model to remove the old bullet when a new entry updates it,
and a model often keeps both ("Batches of 2,000 rows" beside "The batch size is now 5,000"),
so that ``MEMORY.md`` would say two values of one thing. :func:`drop_superseded` removes,
from the answer, each bullet that a later bullet of the answer supersedes, by the offline
consolidator's conservative test (:mod:`memdir.models.extractive._supersede`). Which is later
is known only for bullets the answer kept word for word: those of ``MEMORY.md`` are older
than the entries, and the entries are in ledger order; a bullet the model wrote in its own
words counts as the newest and is never dropped. The old value stays in the ledger and in
the ``memory/.history/`` version saved before the file is rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.memory._entries import parse_bullets
from memdir.models.extractive._supersede import Updates
from memdir.store.ledger import normalize_bullet

__all__ = ["drop_superseded"]


def drop_superseded(text: str, current: Sequence[str], entries: Sequence[str]) -> str:
    """``text`` (a proposed ``MEMORY.md``) without the bullets a later bullet of it
    supersedes (``current``: the bullets of the file before; ``entries``: the new ledger
    entries, oldest first)."""
    bullets = parse_bullets(text)
    age: dict[str, int] = {normalize_bullet(t): 0 for t in current}
    for number, entry in enumerate(entries, start=1):
        age[normalize_bullet(entry)] = number
    newest = len(entries) + 1
    updates = Updates()
    gone: set[str] = set()
    for bullet in sorted(bullets, key=lambda b: age.get(b.key, newest)):
        if bullet.key in gone:
            continue
        if age.get(bullet.key, newest) > 0:
            for key in updates.superseded_by(bullet.text):
                if key != bullet.key and key in age:
                    gone.add(key)
                    updates.discard(key)
        updates.add(bullet.key, bullet.text)
    if not gone:
        return text
    lines = text.splitlines(keepends=True)
    dropped = {
        number
        for bullet in bullets
        if bullet.key in gone
        for number in range(bullet.first_line, bullet.last_line + 1)
    }
    return "".join(line for number, line in enumerate(lines) if number not in dropped)
