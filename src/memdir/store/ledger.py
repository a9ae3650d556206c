"""Daily ledger blocks: ``## <kind> — <UTC instant>`` followed by ``- `` bullets.

Ledgers are append-only. A block is written in one locked append, so concurrent writers never
interleave or tear each other's lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from memdir.errors import MemdirError
from memdir.store.workspace import Workspace

__all__ = [
    "AppendedBlock",
    "Bullet",
    "append_block",
    "append_bullets",
    "bullet_words",
    "format_block",
    "landed_since",
    "line_at",
    "normalize_bullet",
    "parse_bullets",
]

BULLET_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
"""A list marker at the start of a line (``- ``, ``* ``, ``1. ``...)."""
_SPACE = re.compile(r"\s+")
_BLOCK_HEAD = re.compile(r"^##\s+(.+?)\s+[—-]\s+(\S+)\s*$")  # "## <kind> — <instant>"


def normalize_bullet(text: str) -> str:
    """Comparable form of a bullet: no list marker, case-folded, whitespace collapsed."""
    if not isinstance(text, str):
        raise MemdirError(f"a bullet must be a string, not {type(text).__name__}")
    text = BULLET_MARKER.sub("", text.strip(), count=1)
    # str.split() cuts at the characters ``\s`` matches, several times faster than the regex.
    return " ".join(text.split()).casefold().rstrip(" .。!！")


_LIST_ITEM = re.compile(r"^(\s{0,3})(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def bullet_words(text: str) -> set[str]:
    """Words (CJK: characters) of a bullet, as :func:`normalize_bullet` sees them."""
    return set(_TOKEN.findall(normalize_bullet(text)))


@dataclass(frozen=True, slots=True)
class Bullet:
    """One list item: its text (marker removed, continuations joined), heading and lines."""

    text: str
    heading: str | None
    first_line: int  # 0-based, inclusive
    last_line: int  # 0-based, inclusive

    @property
    def key(self) -> str:
        """The normalized text used for equality."""
        return normalize_bullet(self.text)


def parse_bullets(text: str) -> list[Bullet]:
    """Every bullet of ``text`` in order. Lines inside code fences are not bullets."""
    bullets: list[Bullet] = []
    heading: str | None = None
    lines = text.splitlines()
    in_code = False
    current: list[str] = []
    start = last = -1

    def close() -> None:
        nonlocal current
        if current:
            body = " ".join(part.strip() for part in current if part.strip())
            if body:
                bullets.append(Bullet(body, heading, start, last))
        current = []

    for number, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            close()
            in_code = not in_code
            continue
        if in_code:
            continue
        match = _LIST_ITEM.match(line)
        if match:
            close()
            current, start, last = [match.group(2)], number, number
            continue
        head = _HEADING.match(line)
        if head:
            close()
            heading = head.group(2) or None
            continue
        if current and line.strip() and line[:1].isspace():
            current.append(line)
            last = number
            continue
        close()
    close()
    return bullets


def format_block(bullets: Iterable[str], *, header: str, instant: str) -> str:
    """Render a ledger block; every bullet becomes one ``- `` line (inner newlines flattened).

    Raises:
        MemdirError: ``bullets`` is a string rather than a list of strings, a bullet is not
            a string, or no bullet has any text.
    """
    if isinstance(bullets, str) or not isinstance(bullets, Iterable):
        raise MemdirError(f"bullets must be a list of bullet strings, not {type(bullets).__name__}")
    lines = []
    for bullet in bullets:
        if not isinstance(bullet, str):
            raise MemdirError(f"a bullet must be a string, not {type(bullet).__name__}")
        body = _SPACE.sub(" ", BULLET_MARKER.sub("", bullet.strip(), count=1)).strip()
        if body:
            lines.append(f"- {body}")
    if not lines:
        raise MemdirError("a ledger block needs at least one non-blank bullet")
    if not isinstance(header, str) or not header.strip():
        raise MemdirError(f"a ledger block needs a non-blank header, not {header!r}")
    title = _SPACE.sub(" ", header).strip()  # the heading must stay one line
    return f"\n## {title} — {instant}\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendedBlock:
    """Where :func:`append_block` wrote: the ledger, the block's first byte, its bullets.

    The block is a blank line, its ``## `` header line, then one line per bullet.
    """

    rel: str
    start: int
    bullets: int

    def bullet_lines(self, line: int) -> tuple[int, int]:
        """``(first, last)`` bullet line, given the number of the block's first line."""
        return line + 2, line + 1 + self.bullets


def append_block(
    ws: Workspace, bullets: Iterable[str], *, header: str, day: date | None = None
) -> AppendedBlock:
    """Append a block of bullets to the ledger of ``day`` (default today in the workspace zone).

    One locked append; nothing else of the file is read.
    """
    instant = ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")
    block = format_block(bullets, header=header, instant=instant)
    rel = ws.ledger_rel(day)
    start, _ = ws.append_text(rel, block)
    return AppendedBlock(rel=rel, start=start, bullets=block.count("\n- "))


def line_at(ws: Workspace, rel: str, offset: int) -> int:
    """The number of the line that starts at byte ``offset`` of a file (reads up to there)."""
    return ws.read_bytes(rel)[: max(0, offset)].count(b"\n") + 1


def append_bullets(
    ws: Workspace, bullets: Iterable[str], *, header: str, day: date | None = None
) -> tuple[str, int, int]:
    """Append a block of bullets to the ledger of ``day`` (default today in the workspace zone).

    Returns ``(rel path, first bullet line, last bullet line)`` (1-based), counted by
    reading the file up to the block (:meth:`MemoryIndex.index_appended` knows them
    without that).
    """
    block = append_block(ws, bullets, header=header, day=day)
    first, last = block.bullet_lines(line_at(ws, block.rel, block.start))
    return block.rel, first, last


def landed_since(
    ws: Workspace, rel: str, offset: int, bullets: Iterable[str]
) -> AppendedBlock | None:
    """The block after byte ``offset`` of ledger ``rel`` that holds every one of ``bullets``.

    An append whose answer was lost (a crash, a dropped connection) may or may not have
    landed. Recording the ledger, its size before the append and the bullets first, then
    asking this before writing again, makes the append happen once: a found block is the
    earlier append (bullets compare as :func:`normalize_bullet` does). Only the bytes after
    ``offset`` are read.

    Args:
        ws: the workspace.
        rel: the ledger (``ws.ledger_rel(day)``), workspace-relative.
        offset: the ledger's size before the append.
        bullets: the bullets as they were to be written (after masking).

    Returns:
        Where the block is (as :func:`append_block` answers), or ``None`` when it is not
        there, or the ledger does not exist.

    Raises:
        MemdirError: bad arguments (no bullet, a negative offset).
        WorkspaceError: the ledger cannot be read (the store is unreachable).
    """
    if isinstance(bullets, str) or not isinstance(bullets, Iterable):
        raise MemdirError(f"bullets must be a list of bullet strings, not {type(bullets).__name__}")
    wanted = {normalize_bullet(b) for b in bullets} - {""}
    if not wanted:
        raise MemdirError("landed_since needs at least one non-blank bullet to look for")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise MemdirError(f"offset must be a byte offset (an integer >= 0), not {offset!r}")
    try:
        tail = ws.read_from(rel, offset)
    except FileNotFoundError:
        return None
    for start, found in _blocks(tail):
        if wanted <= {normalize_bullet(b) for b in found}:
            return AppendedBlock(rel=rel, start=offset + start, bullets=len(found))
    return None


def _blocks(data: bytes) -> list[tuple[int, list[str]]]:
    """The blocks of ledger bytes: where each starts (the blank line before its header, as
    :func:`append_block` writes it) and its bullet lines."""
    blocks: list[tuple[int, list[str]]] = []
    at = 0
    for line in data.splitlines(keepends=True):
        text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
        if _BLOCK_HEAD.match(text):
            blocks.append((max(0, at - 1), []))
        elif blocks and BULLET_MARKER.match(text):
            blocks[-1][1].append(text)
        at += len(line)
    return blocks
