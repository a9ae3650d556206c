"""Dialogue turns in memory, as the vector side embeds them.

A ledger can hold a conversation turn by turn (``- 10:02 Melanie: Congrats! …`` after
``- 10:01 Caroline: I passed the adoption interviews!``). A reply means little alone
(``Congrats! Tell me more``), so a turn that answers another speaker's turn is embedded after
the end of that turn: the pair is one meaning.

A line is a turn when it starts with a speaker's name and a colon, and that name starts at
least :data:`MIN_TURNS` lines of its section: a conversation. Labelled facts are not turns
(``Decision: …``, ``Fix: …``, ``经验：…`` each start one line of a flush), and facts are
embedded alone: a fact's neighbours are other facts, and reading them into its vector cost
recall (docs/benchmarks.md). A speaker's second turn in a row, a turn after a line that is
not one, and a section's first turn are embedded alone too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["CONTEXT_CHARS", "MIN_TURNS", "embedded_texts", "speaker"]

CONTEXT_CHARS = 150
"""How much of the turn answered is read before a reply (its end: what the reply answers)."""
MIN_TURNS = 2
"""A name must start this many lines of a section to be a speaker there."""

_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?\s+")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
# A speaker: one to three words of letters (``Caroline``, ``Dr. Chen``, ``assistant``) before
# ``": "``, or one to six Chinese characters before a colon (``小明：``): longer text before a
# colon is a sentence ("The plan for Monday: …", "招聘会的主要内容是招聘会：…"), not a name.
_NAME = rf"[^\W\d_{_HAN}](?:[^\W_{_HAN}]|['’.-])*"  # a word of letters (not Chinese)
_SPEAKER = re.compile(rf"({_NAME}(?: {_NAME}){{0,2}}):\s|([{_HAN}]{{1,6}})[:：]")


def speaker(text: str) -> str | None:
    """The name a line starts with (``"caroline"`` for ``"10:01 Caroline: I passed…"``, after
    an optional clock time), case-folded; ``None`` when it starts with no name and colon."""
    time = _TIME.match(text)
    found = _SPEAKER.match(text, time.end() if time else 0)
    if found is None:
        return None
    return (found.group(1) or found.group(2)).casefold()


def embedded_texts(units: Sequence[tuple[int, str]]) -> list[str]:
    """What is embedded for each of one file's units, in order.

    ``units`` holds ``(section, text)``: the line of the heading above (0: none; equal values
    are one section) and the unit's text. A blank text stays blank and is not a turn. A turn
    answering the previous unit, another speaker's turn of the same section, is read after
    the last :data:`CONTEXT_CHARS` characters of it.
    """
    names = [speaker(text) if text else None for _, text in units]
    starts = Counter(
        (section, name) for (section, _), name in zip(units, names, strict=True) if name
    )
    out: list[str] = []
    before: tuple[int, str, str] | None = None  # the previous turn: section, text, speaker
    for (section, text), name in zip(units, names, strict=True):
        if not text:
            out.append(text)
            continue
        turn = name is not None and starts[section, name] >= MIN_TURNS
        if turn and before is not None and before[0] == section and before[2] != name:
            out.append(f"{before[1][-CONTEXT_CHARS:].lstrip()} {text}")
        else:
            out.append(text)
        before = (section, text, name) if turn and name is not None else None
    return out
