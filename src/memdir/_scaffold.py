"""A prompt's own lines, recognised in a model's answer.

Small models often answer with their request: its headings, its instructions, its tags. A
:class:`Scaffold` holds the lines a prompt writes itself (built from the template, never from
the data placed in it) and says whether a line of an answer is one of them. Lines are compared
by their words (case-folded, punctuation and list markers ignored), so a copy that lost its
line breaks, its bullet marker or its colon still counts; a tag line (``<entries>``) is
compared as it is. A line also counts when it is a run of at least four words (twenty
characters) of the prompt's text: a shortened instruction is still an instruction.

``data`` is what the prompt carried besides its own words (the conversation, the current
memory): a line that stands there as well is never scaffolding, whatever the prompt says, so
a fact that happens to repeat an instruction is kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["Scaffold", "words"]

_WORD = re.compile(r"\w+")
_TAG_LINE = re.compile(r"^\s*<[^<>\n]{1,120}>\s*$")
_MIN_RUN_WORDS = 4
_MIN_RUN_CHARS = 20


def words(text: str) -> str:
    """``text`` as its case-folded words, one space apart."""
    return " ".join(_WORD.findall(text.casefold()))


class Scaffold:
    """The lines of one or more prompts, and the data that came with them.

    Args:
        prompts: the prompt texts (templates with the data left out).
        data: the texts that filled the prompt; a line found there is not scaffolding.
    """

    def __init__(self, prompts: Iterable[str], *, data: Iterable[str] = ()) -> None:
        texts = [p for p in prompts if p]
        lines = [ln for t in texts for ln in t.splitlines()]
        self._tags = {ln.strip().casefold() for ln in lines if _TAG_LINE.match(ln)}
        self._lines = {w for ln in lines if not _TAG_LINE.match(ln) and (w := words(ln))}
        self._text = " " + " ".join(words(t) for t in texts) + " "
        self._data = " " + " ".join(words(d) for d in data if d) + " "

    def matches(self, line: str) -> bool:
        """Whether ``line`` (of an answer) is a line of the prompt, or a long run of its words."""
        if _TAG_LINE.match(line):
            return line.strip().casefold() in self._tags
        key = words(line)
        if not key or f" {key} " in self._data:
            return False
        if key in self._lines and (" " in key or _punctuated(line)):
            return True
        return (
            key.count(" ") + 1 >= _MIN_RUN_WORDS
            and len(key) >= _MIN_RUN_CHARS
            and f" {key} " in self._text
        )


def _punctuated(line: str) -> bool:
    """A one-word prompt line counts only with its punctuation (``(empty)``, ``Rules:``)."""
    stripped = line.strip()
    return stripped[:1] in "([" or stripped[-1:] in ":)]"
