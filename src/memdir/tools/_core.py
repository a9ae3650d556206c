"""The work behind the memory tools: argument checks, citations, reads, adds, one shared index.

Everything here raises :class:`~memdir.errors.MemdirError` subclasses. :mod:`memdir.tools` turns
those into ``Error: ...`` text a model can act on; the CLI prints them as one-line errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memdir._opencache import OpenCache, index_cache
from memdir._testpoint import pause_point
from memdir.errors import MemdirError, ToolInputError, WorkspaceError
from memdir.provenance._records import LedgerRecord, append_ledger_records, bullet_id
from memdir.provenance._trust import ORIGINS, guard
from memdir.redact import Redactor
from memdir.store._safeopen import PathMissing
from memdir.store.ledger import AppendedBlock, append_block, line_at
from memdir.store.workspace import ARCHIVE_DIR, MEMORY_AREA, MEMORY_DIR, MEMORY_MD, Workspace

if TYPE_CHECKING:
    from memdir.index import MemoryIndex, SearchIndex

logger = logging.getLogger("memdir.tools")

MAX_QUERY_CHARS = 1_000
MAX_ADD_CHARS = 8_000
"""What the ``memory_add`` tool takes at once: a model saves facts, not documents."""
MAX_ENTRY_CHARS = 32_000
"""The largest text one add writes to a ledger (``memdir add``, the tool, MCP).

Consolidation reads every new ledger entry, so an unbounded one (a file piped to
``memdir add -``) would make every later run slow; a longer text is refused whole.
"""
MAX_PATH_CHARS = 1_000
ADD_HEADER = "Memory Add"

BeforeAppend = Callable[[str, int, list[str]], AppendedBlock | None]
"""``add_memory``'s ``before_append(rel, offset, bullets)``: called before the bullets are
appended to ledger ``rel`` (``offset``: its size then); returns the block when an earlier try
of the same add already landed (nothing is appended then), else ``None``."""

_INT_TEXT = re.compile(r"\s*[+-]?\d{1,9}\s*")
# Citations as search results print them (``memory/x.md#L3-L5``) and as editors write them
# (``memory/x.md:3-5``); models copy both back as the ``path`` argument.
_CITE_HASH = re.compile(r"(?P<path>.+?)#L(?P<start>\d{1,9})(?:-L?(?P<end>\d{1,9}))?")
_CITE_COLON = re.compile(r"(?P<path>.+?):(?P<start>\d{1,9})(?:-(?P<end>\d{1,9}))?")
_LEDGER_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.md")
_REDACTOR = Redactor()


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def check_int(name: str, value: object, *, minimum: int) -> int:
    """Return ``value`` as an int; integral floats and digit strings (as models send) pass."""
    number: int
    if isinstance(value, bool):
        raise ToolInputError(f"{name} must be an integer, not a boolean")
    if isinstance(value, int):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and _INT_TEXT.fullmatch(value)
    ):
        number = int(value)
    else:
        shown = repr(value) if isinstance(value, str | float) else _kind(value)
        raise ToolInputError(f"{name} must be an integer (got {shown[:40]})")
    if number < minimum:
        raise ToolInputError(f"{name} must be at least {minimum} (got {number})")
    return number


def check_text(name: str, value: object, *, max_chars: int, hint: str = "") -> str:
    """Return ``value`` if it is non-blank text without NUL bytes or broken surrogates.

    ``hint`` is added to the message for blank text (what the caller should give instead).
    """
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string (got {_kind(value)})")
    if "\x00" in value:
        raise ToolInputError(f"{name} contains a NUL byte; remove it and try again")
    if not value.strip():
        raise ToolInputError(f"{name} is blank" + (f": {hint}" if hint else ""))
    if len(value) > max_chars:
        raise ToolInputError(
            f"{name} is too long ({len(value)} characters; the limit is {max_chars})"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolInputError(f"{name} is not valid Unicode text (is the input UTF-8?)") from None
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Citation:
    """A path with an optional line range, as parsed from ``path#L3-L5`` or ``path:3-5``."""

    path: str
    start: int | None = None
    end: int | None = None


def parse_citation(text: str) -> Citation:
    """Split a citation into path and line range; plain paths come back unchanged."""
    cleaned = text.strip().strip("`'\"").strip()
    for pattern in (_CITE_HASH, _CITE_COLON):
        match = pattern.fullmatch(cleaned)
        if match:
            start = int(match["start"])
            end = int(match["end"]) if match["end"] else start
            if start < 1:
                raise ToolInputError(f"line numbers start at 1 (got {cleaned!r})")
            if end < start:
                raise ToolInputError(f"the line range in {cleaned!r} ends before it starts")
            return Citation(path=match["path"], start=start, end=end)
    return Citation(path=cleaned)


def update_marks(superseded_by: str | None, supersedes: Sequence[str]) -> str:
    """`` [superseded by CITATION]`` and `` [updates CITATION, ...]`` as a hit line says them
    (empty when the hit neither is nor has an update)."""
    marks = f" [superseded by {superseded_by}]" if superseded_by else ""
    if supersedes:
        marks += f" [updates {', '.join(supersedes)}]"
    return marks


def memory_relpath(ws: Workspace, path: str) -> str:
    """Confine ``path`` to ``MEMORY.md`` and ``memory/**`` and return it workspace-relative."""
    rel = ws.relpath(path)
    shown = rel if rel.isprintable() else repr(rel)  # control characters, escaped
    if rel.startswith(MEMORY_DIR + "/") and any(p.startswith(".") for p in rel.split("/")[1:]):
        # memory/.forget/ (the erasures' secret), .provenance/, .flush_state/...: memdir's own
        raise ToolInputError(f"{shown} is memdir's own state, not a memory file")
    if rel == MEMORY_MD or rel.startswith(MEMORY_DIR + "/"):
        return rel
    raise ToolInputError(
        f"{shown} is not a memory file: only MEMORY.md and files under memory/ can be read"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryExcerpt:
    """Lines read from one memory file.

    Attributes:
        path: the workspace-relative file that was read.
        requested: the path asked for (differs when a ledger had moved to ``memory/archive/``).
        start_line: 1-based number of the first line in ``lines``.
        lines: the lines, without line endings.
        total_lines: how many lines the file has.
    """

    path: str
    requested: str
    start_line: int
    lines: tuple[str, ...]
    total_lines: int

    @property
    def end_line(self) -> int:
        """1-based number of the last line returned (``start_line - 1`` when none were)."""
        return self.start_line + len(self.lines) - 1


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only (as the index numbers lines); a final newline ends the last line."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def is_memory_file(ws: Workspace, path: str) -> bool:
    """Whether ``path`` names a memory file that :func:`read_memory` can open.

    Nothing outside the workspace is looked at, so the answer for ``/etc/passwd`` is the
    answer for a path that exists nowhere.
    """
    try:
        return ws.stat(memory_relpath(ws, path), area=MEMORY_AREA) is not None
    except MemdirError:
        return False


def _read_memory_bytes(ws: Workspace, rel: str) -> tuple[str, bytes]:
    """``(rel read, bytes)``: opened once, race-free, confined to the memory files."""
    try:
        return rel, ws.read_bytes(rel, area=MEMORY_AREA)
    except PathMissing:
        name = rel.removeprefix(MEMORY_DIR + "/")
        if _LEDGER_FILE.fullmatch(name):
            moved = f"{ARCHIVE_DIR}/{name}"
            with contextlib.suppress(PathMissing):
                return moved, ws.read_bytes(moved, area=MEMORY_AREA)
    if rel == MEMORY_MD:
        raise WorkspaceError(
            "MEMORY.md does not exist yet; memory_search finds facts in the daily notes"
        )
    raise WorkspaceError(
        f"file not found: {rel} (ledgers are memory/YYYY-MM-DD.md; older ones move to "
        "memory/archive/; memory_search finds the right file)"
    )


def read_memory(ws: Workspace, path: str, start_line: int, num_lines: int | None) -> MemoryExcerpt:
    """Read ``num_lines`` lines (``None``: to the end) of a memory file from ``start_line``.

    A ledger cited before it was archived (``memory/2026-01-02.md``) is found in
    ``memory/archive/``. The file is opened once, from the workspace root: a symlink is
    followed only to another memory file, and a FIFO, socket or device is refused unopened.
    """
    requested = memory_relpath(ws, path)
    rel, data = _read_memory_bytes(ws, requested)
    lines = split_lines(data.decode("utf-8", errors="replace"))
    if not lines:
        raise WorkspaceError(f"{rel} is empty")
    if start_line > len(lines):
        raise ToolInputError(
            f"start_line {start_line} is past the end of {rel} ({len(lines)} lines)"
        )
    stop = len(lines) if num_lines is None else min(len(lines), start_line - 1 + num_lines)
    return MemoryExcerpt(
        path=rel,
        requested=requested,
        start_line=start_line,
        lines=tuple(lines[start_line - 1 : stop]),
        total_lines=len(lines),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    """Where :func:`add_memory` wrote.

    ``masked`` counts the secrets replaced by ``[REDACTED:<kind>]`` before writing;
    ``index_error`` says why the index could not follow.
    """

    path: str
    first_line: int
    last_line: int
    bullets: int
    masked: int = 0
    index_error: str | None = None

    @property
    def citation(self) -> str:
        """``path#Lfirst-Llast`` of the bullets written."""
        return f"{self.path}#L{self.first_line}-L{self.last_line}"


def masked_note(count: int) -> str:
    """The sentence telling the user how many secrets an add masked."""
    noun = "secret was" if count == 1 else "secrets were"
    return f"{count} {noun} masked as [REDACTED:<kind>]."


def add_memory(
    ws: Workspace,
    text: str,
    *,
    redactor: Redactor | None = None,
    before_append: BeforeAppend | None = None,
    origin: str = "client",
) -> AddResult:
    """Append each non-blank line of ``text`` as a bullet to today's ledger, then re-index it.

    Secrets are masked first (``redactor``, default the built-in patterns), like everything
    else written to a ledger. On a workspace on a ``memdir serve`` server the server writes
    and indexes the bullets (masking again with its own patterns).

    ``origin`` says who adds (``"person"``: ``memdir add``; ``"model"``: the ``memory_add``
    tool; ``"client"``: a program through the API); it is recorded with each bullet
    (``memory/.provenance/``), and an instruction aimed at the agent from anyone but a
    person is written quoted (:func:`memdir.provenance.guard`).

    The write comes first and is never undone: if indexing fails the bullets are still on
    disk (the next search's refresh picks them up) and ``index_error`` says what happened.

    ``before_append`` makes a retried add happen once: it may record where the bullets are
    about to go, and answer the block an earlier try already wrote (``memdir serve`` does this
    for a request with an ``Idempotency-Key``, with :func:`memdir.store.ledger.landed_since`).

    Raises:
        ToolInputError: ``text`` is not text, is blank, is longer than
            :data:`MAX_ENTRY_CHARS`, or holds a NUL byte or a lone surrogate. Nothing is
            written then.
        MemdirError: ``origin`` is not one of :data:`memdir.provenance.ORIGINS`.
    """
    if origin not in ORIGINS:
        raise MemdirError(f"origin must be one of {', '.join(ORIGINS)}, not {origin!r}")
    if isinstance(text, str) and len(text) > MAX_ENTRY_CHARS:
        raise ToolInputError(
            f"text is too long for one memory entry ({len(text):,} characters; the limit is "
            f"{MAX_ENTRY_CHARS:,}): save the facts worth remembering, not whole documents"
        )
    check_text("text", text, max_chars=MAX_ENTRY_CHARS, hint="give the fact to remember")
    masker = redactor if redactor is not None else _REDACTOR
    masked = sum(masker.findings(text).values())
    if masked:
        text = masker.redact(text)
    if ws.remote is not None:  # the server writes it (and masks and guards it too)
        added = ws.remote.add(text)
        return dataclasses.replace(added, masked=added.masked + masked)
    bullets = [guard(line.strip(), origin) for line in text.splitlines() if line.strip()]
    day = ws.today()
    block = None
    if before_append is not None:
        target = ws.ledger_rel(day)
        st = ws.stat(target, area=MEMORY_AREA)
        block = before_append(target, st.size if st is not None else 0, bullets)
    appended = block is None
    if block is None:
        block = append_block(ws, bullets, header=ADD_HEADER, day=day)
        pause_point("add:after-append")
    rel = block.rel
    index_error: str | None = None
    try:
        # Indexes only what was appended (when nothing else changed), and knows its lines.
        line = shared_index(ws).index_appended(rel, block.start)
    except (MemdirError, sqlite3.Error, OSError) as exc:
        logger.warning("could not re-index %s after an add: %s", rel, type(exc).__name__)
        index_error = str(exc) or type(exc).__name__
        line = line_at(ws, rel, block.start)  # the next search's refresh indexes it
    first, last = block.bullet_lines(line)
    if appended:
        at = ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")
        append_ledger_records(
            ws,
            rel,
            [
                LedgerRecord(id=bullet_id(b), line=first + n, origin=origin, via="add", at=at)
                for n, b in enumerate(bullets)
            ],
        )
    return AddResult(
        path=rel,
        first_line=first,
        last_line=last,
        bullets=len(bullets),
        masked=masked,
        index_error=index_error,
    )


# -- one open index per workspace ---------------------------------------------------------

_INDEXES: OpenCache[MemoryIndex] = index_cache()


def shared_index(ws: Workspace) -> SearchIndex:
    """The workspace's :class:`MemoryIndex`, kept open between tool calls; on a workspace on a
    ``memdir serve`` server, the server's (searched through it).

    Opening runs schema checks, so one instance per workspace is reused (``MemoryIndex`` is
    safe to share between threads); the least recently used beyond a handful are closed
    (:func:`~memdir.tools.set_open_index_limit` sets how many).
    """
    from memdir.index import MemoryIndex

    if ws.remote is not None:
        from memdir.client._remote_index import RemoteIndex

        return RemoteIndex(ws)

    return _INDEXES.get(_key(ws), lambda: MemoryIndex(ws))


def _key(ws: Workspace) -> str:
    return str(ws.root.resolve()) if ws.is_local else ws.describe()


def close_shared_index(ws: Workspace) -> None:
    """Close the index the tools keep open for ``ws`` (its files were erased or deleted)."""
    _INDEXES.close(_key(ws))


def close_shared_indexes() -> None:
    """Close every index opened by the tools (also runs at interpreter exit)."""
    _INDEXES.close_all()
