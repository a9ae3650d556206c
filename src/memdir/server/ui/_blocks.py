"""Markdown memory as blocks a template shows: headings, bullets (with their line and
provenance) and other lines, always as text.

Nothing of the Markdown becomes markup: a link, an image or inline HTML in a bullet is shown
as the characters it is made of (a page never runs or follows stored text).
"""

from __future__ import annotations

from dataclasses import dataclass

from memdir.store.ledger import parse_bullets

__all__ = ["Block", "blocks_of"]


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a Markdown memory file.

    Attributes:
        kind: ``heading``, ``bullet``, ``text`` or ``code`` (a line inside a code fence).
        text: its text (a bullet's without its marker, continuations joined).
        line: its first line, 1-based (what a citation names).
        level: a heading's level (1 for ``#``).
        index: a bullet's position among the file's bullets (0-based), else -1.
    """

    kind: str
    text: str
    line: int
    level: int = 0
    index: int = -1


def blocks_of(text: str, first: int = 1) -> list[Block]:
    """The blocks of ``text``, in order, numbered as lines ``first..`` of their file; blank
    lines are dropped."""
    bullets = {b.first_line: (i, b) for i, b in enumerate(parse_bullets(text))}
    inside: set[int] = set()
    for _, bullet in bullets.values():
        inside.update(range(bullet.first_line, bullet.last_line + 1))
    blocks: list[Block] = []
    fenced = False
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if number in bullets:
            index, bullet = bullets[number]
            blocks.append(Block("bullet", bullet.text, number + first, index=index))
            continue
        if number in inside:
            continue
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not stripped:
            continue
        if fenced:
            blocks.append(Block("code", line, number + first))
        elif stripped.startswith("#") and stripped.lstrip("#").startswith(" "):
            level = len(stripped) - len(stripped.lstrip("#"))
            blocks.append(
                Block("heading", stripped.lstrip("#").strip(), number + first, level=level)
            )
        else:
            blocks.append(Block("text", line, number + first))
    return blocks
