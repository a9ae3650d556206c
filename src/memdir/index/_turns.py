"""Dialogue turns in memory, as the vector side embeds them.

A ledger can hold a conversation turn by turn (``- 10:02 Melanie: Congrats! …`` after
``- 10:01 Caroline: I passed the adoption interviews!``, as ``memdir ingest`` writes a
transcript). A reply means little alone (``Congrats! Tell me more``), so a turn that answers
another speaker's turn is embedded after the end of that turn: the pair is one meaning.
A line that is not a turn, a speaker's second turn in a row, or the first line of a file is
embedded alone: facts stand on their own (a line's neighbours in a ledger of facts are other
facts, and reading them into its vector cost recall; docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["CONTEXT_CHARS", "embedded_texts", "speaker"]

CONTEXT_CHARS = 150
"""How much of the turn answered is read before a reply (its end: what the reply answers)."""

_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?\s+")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
# A speaker: one to three words of letters (``Caroline``, ``Dr. Chen``, ``assistant``) before
# ``": "``, or one to six Chinese characters before a colon (``小明：``): longer text before a
# colon is a sentence ("The plan for Monday: …", "招聘会的主要内容是招聘会：…"), not a name.
_NAME = rf"[^\W\d_{_HAN}](?:[^\W_{_HAN}]|['’.-])*"  # a word of letters (not Chinese)
_SPEAKER = re.compile(rf"({_NAME}(?: {_NAME}){{0,2}}):\s|([{_HAN}]{{1,6}})[:：]")


def speaker(text: str) -> str | None:
    """The speaker of a turn (``"caroline"`` for ``"10:01 Caroline: I passed…"``, after an
    optional clock time), case-folded; ``None`` when ``text`` is not a turn."""
    time = _TIME.match(text)
    found = _SPEAKER.match(text, time.end() if time else 0)
    if found is None:
        return None
    return (found.group(1) or found.group(2)).casefold()


def embedded_texts(texts: Sequence[str]) -> list[str]:
    """What is embedded for each of one file's unit texts, in order (blank texts stay blank
    and are not a turn): a turn answering the previous unit's turn by another speaker is
    read after the last :data:`CONTEXT_CHARS` characters of it."""
    out: list[str] = []
    before: str | None = None  # the previous unit's text and speaker
    said_by: str | None = None
    for text in texts:
        if not text:
            out.append(text)
            continue
        who = speaker(text)
        if who is not None and said_by is not None and who != said_by and before:
            out.append(f"{before[-CONTEXT_CHARS:].lstrip()} {text}")
        else:
            out.append(text)
        before, said_by = text, who
    return out
