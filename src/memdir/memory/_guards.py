"""What a weak model's flush or consolidation answer may not bring into memory.

Small local models answer memdir's requests with pieces of the request: the new ``MEMORY.md``
wrapped in the ``<MEMORY.md>`` tags the request shows it in, the request's own lines ("New
daily ledger entries to merge", the instructions, ``<entries>``), a tool call written as text,
headings that imitate the ledger's ``## <kind> — <instant>`` blocks. None of that is a fact.

- A flush bullet that is a line of the prompt, a tool call or one of memdir's block headings
  is dropped (:func:`screen_bullets`).
- A consolidation answer loses a wrapper the prompt suggests (a code fence, tags named like
  the file), ledger-style headings become plain section headings (memdir's own block
  headings and ledger file names are removed), and an answer that still carries the
  request's own lines is refused (:func:`screen_memory`).

The prompt's lines come from the templates with placeholders for the data
(:class:`memdir._scaffold.Scaffold`), and a line that also stands in the data (the
conversation, the current ``MEMORY.md``, the new entries) is never scaffolding. Invented
facts are not detected: that would take understanding, not a comparison.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from memdir._scaffold import Scaffold, words
from memdir.memory._entries import strip_fence
from memdir.memory._prompts import consolidation_request, flush_request
from memdir.messages import Msg
from memdir.models import CURRENT_KEY, ENTRIES_KEY
from memdir.store.ledger import BULLET_MARKER

__all__ = [
    "consolidation_scaffold",
    "flush_scaffold",
    "screen_bullets",
    "screen_memory",
    "unwrap_memory",
]

_BLANK = "\x00"  # stands for the data when the templates are rendered
_BLOCK_KINDS = ("memory flush", "memory add")  # the kinds of block memdir writes
_INSTANT = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
_LEDGER_HEADING = re.compile(rf"^(\s{{0,3}}#{{1,6}})\s+(.+?)\s+[—–-]{{1,2}}\s+{_INSTANT}\s*$")
_LEDGER_FILE_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?:memory/)?\d{4}-\d{2}-\d{2}\.md\s*$")
_BLOCK_LINE = re.compile(rf"^(.+?)\s+[—–-]{{1,2}}\s+{_INSTANT}$")
_DECORATION = "#*_` \t"  # what a model puts around a heading it copies: hashes, bold, code
_CALL_START = re.compile(
    r"^[\s`*_>\"']*(?:</?(?:tool_call|tools|function_call)>|<function=|\[TOOL_CALLS\]|"
    r"<\|python_tag\|>|\{)",
    re.IGNORECASE,
)
_CALL_BODY = re.compile(r"\{\s*\"name\"\s*:\s*\"|\[ARGS\]")
_FILE_OPEN = re.compile(r"^<MEMORY(?:\.md)?>[ \t]*\n?", re.IGNORECASE)
_FILE_CLOSE = re.compile(r"\s*</MEMORY(?:\.md)?>$", re.IGNORECASE)


def flush_scaffold(system: str, today: str, ledger_rel: str, transcript: str) -> Scaffold:
    """The lines a flush prompt (``system``, then the request) writes itself.

    ``transcript`` (the conversation) is data.
    """
    skeleton = flush_request(
        transcript=_BLANK,
        messages=(),
        memory_md=_BLANK,
        ledger=_BLANK,
        ledger_rel=ledger_rel,
        today=today,
    )
    return Scaffold([system, _without_blanks(skeleton.text)], data=[transcript])


def consolidation_scaffold(*, system: str, conversation: Sequence[Msg], max_chars: int) -> Scaffold:
    """The lines a consolidation request writes itself: the prompt, the request, follow-ups.

    The current ``MEMORY.md`` and the new entries (from the request's metadata) are data.
    """
    request = conversation[0]
    current = request.metadata.get(CURRENT_KEY)
    entries = request.metadata.get(ENTRIES_KEY)
    data = [current if isinstance(current, str) else ""]
    if isinstance(entries, list):
        data += [e for e in entries if isinstance(e, str)]
    texts = [system]
    for empty in (True, False):  # "(empty)" stands where an empty file would be
        skeleton = consolidation_request(
            current="" if empty else _BLANK, entries_text=_BLANK, entries=(), max_chars=max_chars
        )
        texts.append(_without_blanks(skeleton.text))
    texts += [m.text for m in conversation[1:] if m.role == "user"]  # "shorten it" follow-ups
    return Scaffold(texts, data=data)


def _without_blanks(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if _BLANK not in ln)


# -- flush ---------------------------------------------------------------------------------


def screen_bullets(bullets: Sequence[str], scaffold: Scaffold) -> tuple[list[str], str]:
    """The bullets that may be facts, and a log-safe note on the others (``""`` if none).

    Dropped: a line of the prompt, a tool call written as text, a ledger block heading.
    """
    kept: list[str] = []
    why: Counter[tuple[str, str]] = Counter()
    for bullet in bullets:
        if _CALL_START.match(bullet) and _CALL_BODY.search(bullet):
            why["tool call written as text", "tool calls written as text"] += 1
        elif _is_block_heading(bullet):
            why["ledger block heading", "ledger block headings"] += 1
        elif scaffold.matches(bullet):
            why["line of the prompt", "lines of the prompt"] += 1
        else:
            kept.append(bullet)
    if not why:
        return kept, ""
    kinds = ", ".join(f"{n} {many if n > 1 else one}" for (one, many), n in why.most_common())
    total = sum(why.values())
    return (
        kept,
        f"{_count(total, 'bullet')} that {'are' if total > 1 else 'is'} not a fact ({kinds})",
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _is_block_heading(text: str) -> bool:
    """Whether a bullet is a ledger block heading: memdir's own kind, or written as a heading."""
    kind = _block_kind(text)
    return kind is not None and (text.lstrip().startswith("#") or kind in _BLOCK_KINDS)


def _block_kind(line: str) -> str | None:
    """The kind of a ``<kind> — <instant>`` line (list marker, hashes, bold ignored) or ``None``."""
    match = _BLOCK_LINE.match(BULLET_MARKER.sub("", line, count=1).strip(_DECORATION))
    return words(match.group(1)) if match else None


# -- consolidation -------------------------------------------------------------------------


def unwrap_memory(text: str) -> str:
    """``text`` without a code fence or ``<MEMORY.md>`` … ``</MEMORY.md>`` tags around it.

    The request shows the current file between those tags, and models copy them. A lone
    opening or closing tag (the answer was cut off, or began inside the tags) goes too.
    """
    body = strip_fence(text).strip()
    opened = _FILE_OPEN.match(body)
    if opened:
        body = body[opened.end() :]
    closed = _FILE_CLOSE.search(body)
    if closed:
        body = body[: closed.start()]
    return strip_fence(body).strip() if opened or closed else body


def screen_memory(text: str, scaffold: Scaffold, *, current: str) -> tuple[str | None, str]:
    """``(text, note)`` with ledger-style headings fixed, or ``(None, why)`` for an echo.

    A heading that imitates a ledger block (``## Backfill runs — 2026-12-01T17:01:49Z``)
    keeps only its name; memdir's own block headings (``## Memory Flush — …``, also as a
    bullet or in bold) and ledger file names (``### 2026-11-30.md``) are removed, and the
    bullets under them stay. A heading the current file already has is
    left alone. An answer with any line of the request's own text (its instructions, its
    headings, its tags) is refused: it is the request, or the model mixed the two.
    """
    own = {ln.strip() for ln in current.splitlines()}
    lines: list[str] = []
    renamed = removed = 0
    parent: int | None = None  # indent of a removed "- **Memory Flush — …**" bullet
    shift = 0  # how far its nested bullets move left
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if parent is not None and line.strip():
            if indent <= parent:
                parent = None
            else:
                shift = shift or indent - parent
                line = line[min(shift, indent) :]
        head = _LEDGER_HEADING.match(line)
        if line.strip() in own:
            lines.append(line)
        elif _LEDGER_FILE_HEADING.match(line) or _block_kind(line) in _BLOCK_KINDS:
            removed += 1  # "## Memory Flush — …", also as a bullet or in bold; "### 2026-11-30.md"
            if BULLET_MARKER.match(line):
                parent, shift = indent, 0
        elif head is not None:
            lines.append(f"{head.group(1).strip()} {head.group(2)}")
            renamed += 1
        else:
            lines.append(line)
    echoed = [ln for ln in lines if ln.strip() and ln.strip() not in own and scaffold.matches(ln)]
    if echoed:
        return None, (
            f"it repeats {_count(len(echoed), 'line')} of the request "
            "(its instructions, headings or tags)"
        )
    notes = []
    if renamed:
        notes.append(f"{_count(renamed, 'heading')} lost a ledger timestamp")
    if removed:
        notes.append(f"{_count(removed, 'ledger block heading')} removed")
    return "\n".join(lines), "; ".join(notes)
