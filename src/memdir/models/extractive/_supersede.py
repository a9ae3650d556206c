"""Superseded facts: a bullet that updates an older one replaces it in ``MEMORY.md``.

"Batch size changed to 2,000 rows (was 5,000)" updates "The backfill runs in batches of 5,000
rows": the curated file keeps the first and drops the second (the daily ledger keeps both).
:func:`supersedes` decides it for one pair of :func:`~memdir.models.extractive._claims.claim`\\ s;
:class:`Updates` finds the pairs among many bullets through an index of their words, so that a
new bullet is compared only with the few that share a word with it.

The test is conservative, because a wrong answer drops a fact that is still true. The new
bullet must carry an update cue, be about the same subject, and differ in a value:

- **an old value named** ("(was 5,000)", "instead of X", 从X改为Y…): the old bullet holds it,
  and no other number, version or name the new one lacks (it would say more than the
  update); nor does it hold the new value as a fact of its own ("5,000 for the backfill,
  2,000 for sync");
- **a change without the old value** ("changed to", "is now", "now", 改为, 现在是…): the old
  bullet has a number, version or name the new one lacks, all in one place ("Server B has
  16 GB" and "Server A now has 32 GB" differ in two places), and the new one has one the old
  one lacks;
- **a negation** ("no longer", 不再…): the old bullet says what the new one negates, and
  nothing more (but when: "every morning").

Same subject, counted in subject words: at least two in common and few differences. With
an old number or name named, one side may differ by one word and the other by three ("batch
size changed to 2,000 rows (was 5,000)" and "the backfill runs in batches of 5,000 rows");
with plain words named ("instead of icons"), or a change cue, each side by at most one; with
a bare "now", one side not at all. A single word in common is enough when one side has no
other word and the other one at most ("Rent is now $1,500 (was $1,200)"). Different speakers
("Alice: …" and "Bob: …") never supersede each other.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from memdir.index._porter import stem
from memdir.models.extractive._claims import EXPLICIT, NEGATION, STRONG, Claim, claim, weight
from memdir.store.ledger import normalize_bullet

__all__ = ["Updates", "superseded_pairs", "supersedes"]

_RUN_GAP = re.compile(r"^[\s,/&+~–—-]*(?:(?:and|or|to)\b[\s,]*)?$", re.IGNORECASE)
# When a habit happens, not what it is: "I drink coffee every morning" / "I no longer drink coffee".
_HABIT_WORDS = """day days daily morning mornings evening evenings night nights week weeks weekly
weekday weekdays weekend weekends"""
_HABIT = frozenset(stem(w) for w in _HABIT_WORDS.split())


def supersedes(new: Claim, old: Claim) -> bool:
    """Whether ``new`` updates ``old``, so that ``old`` is no longer true."""
    if not new.kind or new.body == old.body:
        return False
    if new.label and old.label and new.label != old.label:
        return False
    if new.kind == NEGATION:
        return _negates(new, old)
    mine, theirs = new.units - new.was_units, old.units - new.was_units
    shared = weight(mine & theirs) + len((new.names & old.names) - new.was_values)
    only = sorted((weight(mine - theirs), weight(theirs - mine)))
    if new.kind == EXPLICIT:
        if new.was_values:
            if not new.was_values <= old.values:
                return False
        elif not new.was_units <= old.units:
            return False
        if old.values - new.values:
            return False  # the old bullet says something the update does not
        current = new.values - new.was_values
        restated = old.was_values and old.was_values == new.was_values
        if current & (old.values - old.was_values) and not restated:
            return False  # "5,000 for the backfill, 2,000 for sync": 2,000 is a fact already
        if new.now_han and new.now_han in old.body:
            return False
        # An old number or name is strong evidence; old plain words ("instead of icons") need
        # the subjects to match on both sides.
        near = only[0] <= 1 and only[1] <= 3 if new.was_values else only[1] <= 1
        return (shared >= 2 and near) or (shared >= 1 and only[0] == 0 and only[1] <= 1)
    gone = old.values - new.values
    if not gone or not new.values - old.values or not _one_place(old, gone):
        return False
    if new.kind == STRONG:
        return (shared >= 2 and only[1] <= 1) or (shared >= 1 and only[1] == 0)
    return shared >= 2 and only[0] == 0 and only[1] <= 1


def _negates(new: Claim, old: Claim) -> bool:
    if old.negative or not new.negated <= old.units | old.values:
        return False
    if old.values - new.values:
        return False
    return not (old.units - new.units - _HABIT) and bool(old.units & new.units)


class Updates:
    """Bullets indexed by their words, to find those a new bullet supersedes.

    Only a bullet with an update cue looks anything up, and only among the bullets that share
    one of its words or values, not among all of them.
    """

    def __init__(self) -> None:
        self._claims: dict[str, Claim] = {}
        self._order: dict[str, int] = {}
        self._postings: dict[str, set[str]] = {}
        self._added = 0

    def add(self, key: str, text: str) -> None:
        """Index ``text`` under ``key`` (replacing what ``key`` held)."""
        self.discard(key)
        found = claim(text)
        self._claims[key] = found
        self._order[key] = self._added
        self._added += 1
        for term in found.units | found.values:
            self._postings.setdefault(term, set()).add(key)

    def discard(self, key: str) -> None:
        """Forget ``key`` (nothing happens if it is not indexed)."""
        found = self._claims.pop(key, None)
        if found is None:
            return
        del self._order[key]
        for term in found.units | found.values:
            keys = self._postings.get(term)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._postings[term]

    def superseded_by(self, text: str) -> list[str]:
        """Keys of the indexed bullets that ``text`` supersedes, oldest first."""
        new = claim(text)
        if not new.kind:
            return []
        terms = new.units | new.values | new.was_units | new.negated
        keys: set[str] = set()
        for term in terms:
            keys |= self._postings.get(term, set())
        found = [k for k in keys if supersedes(new, self._claims[k])]
        return sorted(found, key=self._order.__getitem__)


def superseded_pairs(old: Iterable[str], new: Iterable[str]) -> dict[str, str]:
    """``{old text: the new text that supersedes it}`` (the first new one that does)."""
    updates = Updates()
    texts: dict[str, str] = {}
    for text in old:
        key = normalize_bullet(text)
        texts[key] = text
        updates.add(key, text)
    pairs: dict[str, str] = {}
    if not texts:
        return pairs
    for text in new:
        for key in updates.superseded_by(text):
            pairs[texts[key]] = text
            updates.discard(key)
    return pairs


def _one_place(old: Claim, values: frozenset[str]) -> bool:
    """Whether ``values`` sit together in ``old`` ("Postgres 16"), not in two places."""
    spans = sorted((s, e) for v, s, e in old.spans if v in values)
    return all(_RUN_GAP.match(old.body[a[1] : b[0]]) for a, b in itertools.pairwise(spans))
