"""Cut a memory file into searchable units: one bullet (plus its continuation lines) each.

Lines are the ``\\n``-separated lines of the file, numbered from 1 (a trailing ``\\r`` is
dropped). Rules, in order:

* a blank line ends the current unit;
* a heading (``#`` … ``######``) ends the current unit and becomes the heading of the
  units below it; headings are not units themselves;
* inside a fenced code block every non-blank line is its own unit;
* a list item (``-``, ``*``, ``+``, ``1.``) or a table row starts a new unit;
* any other line continues the current unit while that stays small
  (:data:`MAX_SPAN_LINES` lines), else starts a new one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_LINE", "MAX_SPAN_LINES", "ParsedFile", "Unit", "ends_in_fence", "parse_markdown"]

MAX_SPAN_LINES = 4
MAX_SPAN_CHARS = 2_000
MAX_LINE = (1 << 24) - 1
"""Lines past this number are not indexed (the row id holds 24 bits of line number)."""

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_FENCES = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)
_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,9}[.)])(?:[ \t]|$)|^[ \t]*\|")


@dataclass(frozen=True, slots=True)
class Unit:
    """A searchable span: lines ``start``..``end`` (1-based, inclusive) under heading ``head``.

    ``head`` is the line number of the heading above the unit (0: none).
    """

    start: int
    end: int
    head: int
    content: str


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """Units and headings (line number -> heading text) of one file."""

    units: list[Unit]
    headings: dict[int, str]


def parse_markdown(text: str, *, first_line: int = 1, head: int = 0) -> ParsedFile:
    """Split ``text`` into :class:`Unit` spans and headings (see the module rules).

    ``first_line`` and ``head`` let a caller parse the tail of a file: the number of the
    first line of ``text`` and the heading line in force there (0: none).
    """
    units: list[Unit] = []
    headings: dict[int, str] = {}
    fence: str | None = None
    start = 0  # first line of the open unit (0: none)
    span: list[str] = []
    chars = 0

    def close() -> None:
        nonlocal start, span, chars
        if start:
            units.append(Unit(start, start + len(span) - 1, head, "\n".join(span)))
        start, span, chars = 0, [], 0

    for number, raw in enumerate(text.split("\n"), start=first_line):
        if number > MAX_LINE:
            break
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip():
            close()
            continue
        fence_match = _FENCE.match(line)
        if fence is not None:
            close()
            if fence_match and fence_match.group(1) == fence:
                fence = None
            else:
                units.append(Unit(number, number, head, line))
            continue
        if fence_match:
            close()
            fence = fence_match.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            head = number
            headings[number] = (heading.group(2) or "").strip()
            continue
        if (
            start
            and not _ITEM.match(line)
            and len(span) < MAX_SPAN_LINES
            and chars + len(line) <= MAX_SPAN_CHARS
        ):
            span.append(line)
            chars += len(line)
            continue
        close()
        start, span, chars = number, [line], len(line)
    close()
    return ParsedFile(units, headings)


def ends_in_fence(text: str) -> bool:
    """Whether ``text`` may end inside a fenced code block (an odd number of fence lines)."""
    return len(_FENCES.findall(text)) % 2 == 1
