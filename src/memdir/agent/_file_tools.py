"""File tools confined to the workspace: read_file, write_file, edit_file, list_files.

``read_file`` reads by lines *or* by character window, so an evicted tool result that is one
very long line (a JSON document, a minified log) can still be read in bounded pieces. It reads
the workspace except ``.index/``, opening each file once from the workspace root: a symlink is
followed only to a file it could read by name, never out of the workspace, and FIFOs, sockets
and devices are refused unopened. Writes are atomic, refuse the files owned by the memory
pipeline (``MEMORY.md``, ``memory/``) and by memdir itself (``sessions/``,
``large_tool_results/``, ``.index/``), and never go through a symlink into one of those or out
of the workspace. Called directly, the tools raise :class:`~memdir.errors.ToolInputError` or
:class:`~memdir.errors.WorkspaceError` with a one-line message, never a bare ``OSError``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Final

from memdir.errors import MemdirError, ToolInputError, WorkspaceError
from memdir.store._safeopen import (
    PathMissing,
    PathRefused,
    locate,
    open_dir,
    shown_path,
)
from memdir.store.namespaces import NAMESPACES_DIR
from memdir.store.workspace import (
    FILE_TOOL_AREA,
    INDEX_DIR,
    LARGE_RESULTS_DIR,
    MEMORY_DIR,
    MEMORY_MD,
    SERVER_DIR,
    SESSIONS_DIR,
    Workspace,
)

__all__ = ["FILE_TOOLS", "edit_file", "list_files", "read_file", "write_file"]

DEFAULT_READ_LINES: Final = 200
DEFAULT_READ_CHARS: Final = 20_000
MAX_READ_CHARS: Final = 50_000
MAX_LIST_ENTRIES: Final = 500
MAX_WRITE_CHARS: Final = 2_000_000

_PROTECTED: Final = {
    MEMORY_MD: "MEMORY.md is maintained by the memory pipeline; save facts with memory_add",
    MEMORY_DIR: "memory/ is maintained by the memory pipeline; save facts with memory_add",
    SESSIONS_DIR: "sessions/ holds the conversation logs and may not be modified",
    LARGE_RESULTS_DIR: "large_tool_results/ holds saved tool outputs and may not be modified",
    INDEX_DIR: ".index/ holds the search index and may not be modified",
    NAMESPACES_DIR: "ns/ holds other callers' memories and may not be modified",
    SERVER_DIR: ".memdir-server/ holds the server's keys and may not be modified",
}


def _at_least(name: str, value: object, *, minimum: int) -> int:
    # The agent's toolkit already turned "5" and 5.0 into 5; this guards direct callers.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(f"{name} must be an integer")
    if value < minimum:
        raise ToolInputError(f"{name} must be at least {minimum} (got {value})")
    return value


def _confined(workspace: Workspace, path: object) -> str:
    if not isinstance(path, str):
        raise ToolInputError(f"path must be a string (got {type(path).__name__})")
    return workspace.relpath(path)


def _writable(workspace: Workspace, path: object) -> str:
    rel = _confined(workspace, path)
    top = rel.split("/", 1)[0]
    for protected, reason in _PROTECTED.items():
        if rel.casefold() == protected.casefold() or top.casefold() == protected.casefold():
            raise ToolInputError(f"cannot write {rel}: {reason}")
    return rel


def _read_text(workspace: Workspace, rel: str) -> str:
    shown = shown_path(rel)
    try:
        data = workspace.read_bytes(rel, area=FILE_TOOL_AREA)
    except PathMissing:
        raise ToolInputError(f"no file {shown}; use list_files to see what exists") from None
    except PathRefused as exc:
        if exc.reason == "directory":
            raise ToolInputError(
                f"{shown} is a directory; use list_files to see what it holds"
            ) from None
        raise
    if b"\x00" in data[:8192]:
        raise ToolInputError(
            f"{rel} is a binary file ({len(data):,} bytes); it has no text to show"
        )
    return data.decode("utf-8", errors="replace")


def read_file(
    path: str,
    start_line: int = 1,
    num_lines: int = DEFAULT_READ_LINES,
    start_char: int | None = None,
    max_chars: int = DEFAULT_READ_CHARS,
    *,
    workspace: Workspace,
) -> str:
    """Read a text file in the workspace, by lines (numbered ``N|text``) or by character window.

    By default it returns up to 200 lines from start_line. For a file that is one huge line
    (a saved tool output, JSON, a minified log), pass start_char to read raw characters from
    that offset instead; the last line of the answer says where to continue.

    Args:
        path: a path relative to the workspace, e.g. "notes/plan.md" or a path from a
            "saved to" notice.
        start_line: first line to read, counting from 1.
        num_lines: how many lines to read (default 200).
        start_char: read characters from this offset (0-based) instead of lines.
        max_chars: at most this many characters come back (default 20000, at most 50000).

    Returns:
        A header, the text, and a hint for reading on; or ``Error: ...``.
    """
    rel = _confined(workspace, path)
    limit = min(_at_least("max_chars", max_chars, minimum=1), MAX_READ_CHARS)
    text = _read_text(workspace, rel)
    if start_char is not None:
        return _char_window(rel, text, _at_least("start_char", start_char, minimum=0), limit)
    first = _at_least("start_line", start_line, minimum=1)
    count = _at_least("num_lines", num_lines, minimum=1)
    return _line_window(rel, text, first, count, limit)


def _char_window(rel: str, text: str, start: int, limit: int) -> str:
    total = len(text)
    if start >= total and total > 0:
        raise ToolInputError(f"start_char {start} is past the end of {rel} ({total:,} characters)")
    end = min(total, start + limit)
    out = [f"{rel}: characters {start:,}-{end:,} of {total:,}", text[start:end]]
    if end < total:
        out.append(f'[{total - end:,} more characters: read_file(path="{rel}", start_char={end})]')
    else:
        out.append("[end of file]")
    return "\n".join(out)


def _line_window(rel: str, text: str, first: int, count: int, limit: int) -> str:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    total = len(lines)
    if first > max(total, 1):
        raise ToolInputError(f"start_line {first} is past the end of {rel} ({total:,} lines)")
    offset = sum(len(line) + 1 for line in lines[: first - 1])  # char offset of the first line
    out: list[str] = []
    used = 0
    last = first - 1
    note = ""
    for number in range(first, min(total, first + count - 1) + 1):
        line = lines[number - 1]
        shown = f"{number}|{line}"
        if used + len(shown) + 1 > limit:
            if not out:  # one line longer than the window: show its start, point at the rest
                room = max(1, limit - len(str(number)) - 1)
                out.append(f"{number}|{line[:room]}")
                note = (
                    f"[line {number} is {len(line):,} characters long; read the rest with "
                    f'read_file(path="{rel}", start_char={offset + room})]'
                )
                last = number
            break
        out.append(shown)
        used += len(shown) + 1
        offset += len(line) + 1
        last = number
    header = f"{rel}: lines {first:,}-{last:,} of {total:,}"
    footer = note or (
        f'[more lines: read_file(path="{rel}", start_line={last + 1})]'
        if last < total
        else "[end of file]"
    )
    return "\n".join([header, *out, footer])


def write_file(path: str, content: str, *, workspace: Workspace) -> str:
    """Create or replace a text file in the workspace (atomically).

    Not for memory: MEMORY.md and memory/ are maintained by the memory pipeline (use
    memory_add to save a fact).

    Args:
        path: a path relative to the workspace, e.g. "notes/plan.md".
        content: the complete new text of the file.

    Returns:
        What was written, or ``Error: ...``.
    """
    rel = _writable(workspace, path)
    if not isinstance(content, str):
        raise ToolInputError("content must be text")
    if len(content) > MAX_WRITE_CHARS:
        raise ToolInputError(f"content is too long ({len(content):,} characters)")
    existed = (
        os.path.lexists(workspace.root / rel)
        if workspace.is_local
        else workspace.stat(rel) is not None
    )
    workspace.write_text(rel, content)
    verb = "Replaced" if existed else "Created"
    return f"{verb} {rel} ({len(content):,} characters, {content.count(chr(10)) + 1:,} lines)."


def edit_file(
    path: str, old_text: str, new_text: str, replace_all: bool = False, *, workspace: Workspace
) -> str:
    """Replace exact text in a file of the workspace.

    old_text must appear exactly once (include surrounding lines to make it unique), unless
    replace_all is true. Not for MEMORY.md or memory/ (use memory_add).

    Args:
        path: a path relative to the workspace.
        old_text: the exact text to find (whitespace matters).
        new_text: the text to put in its place.
        replace_all: replace every occurrence instead of exactly one.

    Returns:
        How many replacements were made, or ``Error: ...``.
    """
    rel = _writable(workspace, path)
    if not isinstance(old_text, str) or not old_text:
        raise ToolInputError("old_text must be non-empty text")
    if not isinstance(new_text, str):
        raise ToolInputError("new_text must be text")
    lock = "edit-" + hashlib.sha256(rel.encode("utf-8")).hexdigest()[:16]
    with workspace.lock(lock):
        text = _read_text(workspace, rel)
        found = text.count(old_text)
        if found == 0:
            raise ToolInputError(
                f"old_text was not found in {rel}; read_file it and copy the text exactly"
            )
        if found > 1 and not replace_all:
            raise ToolInputError(
                f"old_text occurs {found} times in {rel}; add surrounding lines to make it "
                "unique, or set replace_all"
            )
        workspace.write_text(rel, text.replace(old_text, new_text))
    noun = "occurrence" if found == 1 else "occurrences"
    return f"Replaced {found} {noun} in {rel}."


def list_files(path: str = ".", recursive: bool = False, *, workspace: Workspace) -> str:
    """List the files in a workspace directory, with their sizes in bytes.

    Args:
        path: a directory relative to the workspace ("." for the top).
        recursive: include subdirectories' files too.

    Returns:
        One entry per line (directories end in "/"), or ``Error: ...``.
    """
    if not isinstance(path, str):
        raise ToolInputError(f"path must be a string (got {type(path).__name__})")
    rel = "." if path.strip() in {"", ".", "./"} else workspace.relpath(path)
    entries: list[str] = []
    try:
        if workspace.is_local:
            with open_dir(workspace.root, "" if rel == "." else rel, FILE_TOOL_AREA) as dir_fd:
                complete = _list_dir(
                    workspace, dir_fd, "" if rel == "." else rel, recursive, entries
                )
        else:
            complete = _list_store(workspace, "" if rel == "." else rel, recursive, entries)
    except PathMissing:
        raise ToolInputError(f"{shown_path(rel)} is not a directory in the workspace") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot list {shown_path(rel)}: {exc.strerror or exc}") from None
    if not entries:
        return f"{rel}: empty"
    if not complete:
        entries.append(f"[more than {MAX_LIST_ENTRIES} entries; list a subdirectory]")
    return "\n".join(entries)


def _list_dir(
    workspace: Workspace, dir_fd: int, prefix: str, recursive: bool, out: list[str]
) -> bool:
    """Append the entries of ``dir_fd`` (``prefix/name``) to ``out``; False when it filled up.

    Subdirectories are opened from ``dir_fd`` without following links, so a listing never
    leaves the workspace; a symlink is shown by what it leads to, if read_file may read it.
    """
    with os.scandir(dir_fd) as it:
        children = sorted(it, key=lambda entry: entry.name)
    for entry in children:
        if entry.name.startswith("."):
            continue  # the index and temp files are not for the model
        if len(out) >= MAX_LIST_ENTRIES:
            return False
        shown = f"{prefix}/{entry.name}" if prefix else entry.name
        if entry.is_dir(follow_symlinks=False):
            out.append(shown + "/")
            if recursive:
                try:
                    fd = os.open(
                        entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd
                    )
                except OSError:
                    continue  # replaced meanwhile, or unreadable
                try:
                    if not _list_dir(workspace, fd, shown, recursive, out):
                        return False
                finally:
                    os.close(fd)
        elif entry.is_file(follow_symlinks=False):
            try:
                out.append(f"{shown} ({entry.stat(follow_symlinks=False).st_size:,} bytes)")
            except OSError:
                continue
        else:
            out.append(_odd_entry(workspace, shown))
    return True


def _list_store(workspace: Workspace, prefix: str, recursive: bool, out: list[str]) -> bool:
    """:func:`_list_dir` for a workspace that is not a directory (PostgreSQL)."""
    if prefix and FILE_TOOL_AREA.never and prefix.split("/", 1)[0] in FILE_TOOL_AREA.never:
        raise PathRefused(f"{prefix} is outside {FILE_TOOL_AREA.label}", reason="area")
    entries = workspace.listdir(prefix)
    if prefix and not entries:
        raise PathMissing(f"no directory {prefix}")
    for entry in entries:
        if entry.name.startswith(".") or (not prefix and entry.name in FILE_TOOL_AREA.never):
            continue
        if len(out) >= MAX_LIST_ENTRIES:
            return False
        shown = f"{prefix}/{entry.name}" if prefix else entry.name
        if entry.kind == "dir":
            out.append(shown + "/")
            if recursive and not _list_store(workspace, shown, recursive, out):
                return False
        elif entry.stat is not None:
            out.append(f"{shown} ({entry.stat.size:,} bytes)")
    return True


def _odd_entry(workspace: Workspace, rel: str) -> str:
    """A listing line for a symlink, FIFO, socket or device."""
    try:
        _, st = locate(workspace.root, rel, FILE_TOOL_AREA)
    except MemdirError:
        return f"{rel} (a symlink read_file cannot follow)"
    if st is None:
        return f"{rel} (a broken symlink)"
    if stat.S_ISDIR(st.st_mode):
        return rel + "/"
    if stat.S_ISREG(st.st_mode):
        return f"{rel} ({st.st_size:,} bytes)"
    return f"{rel} (not a regular file; cannot be read)"


FILE_TOOLS: Final = (read_file, write_file, edit_file, list_files)
"""The file tools, in the order they are offered to the model."""
