"""The six commands of the memory tool (``memory_20250818``) over a memdir workspace.

Answers and errors are worded as the ``anthropic`` SDK's reference implementation words them
(``BetaLocalFilesystemMemoryTool``), so a model trained on that tool reads them as it expects.
What memdir adds is said in the same style: a ledger refuses edits with the reason, a write
that masked a secret says so, a write the index could not follow says search will catch up.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Literal, TypeAlias

from memdir.adapters.anthropic._paths import ROOT, MemoryToolError, Target, escaped, parse_path
from memdir.errors import MemdirError, WorkspaceError
from memdir.memory._history import save_version
from memdir.redact import Redactor
from memdir.store._safeopen import PathRefused
from memdir.store.workspace import HISTORY_DIR, MEMORY_AREA, MEMORY_MD, Workspace
from memdir.tools._core import add_memory, masked_note, shared_index

__all__ = ["WorkspaceMemories"]

logger = logging.getLogger("memdir.adapters.anthropic")

_MAX_LINES = 999_999
_WIDTH = len(str(_MAX_LINES))
_HISTORY_VERSIONS = 20
_LOCK = "memory-tool"

Kind: TypeAlias = Literal["file", "dir", "special"]
"""What is at a ``/memories`` path: a file, a directory, or something that is neither (a FIFO,
a socket, a device)."""


def _size(n: int) -> str:
    """A file size as the reference tool prints it: ``0B``, ``512B``, ``4K``, ``1.5K``."""
    if n == 0:
        return "0B"
    unit = min((n.bit_length() - 1) // 10, 3)
    value = n / (1024**unit)
    shown = f"{int(value)}" if value == int(value) else f"{value:.1f}"
    return shown + "BKMG"[unit]


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{n:>{_WIDTH}}\t{line}" for n, line in enumerate(lines, start=first))


def _missing(target: Target) -> MemoryToolError:
    return MemoryToolError(
        f"The path {escaped(target.path)} does not exist. Please provide a valid path."
    )


class WorkspaceMemories:
    """``/memories`` of one workspace: view, create, str_replace, insert, delete, rename.

    Every method returns the text for the model or raises :class:`MemoryToolError`.

    Every file is reached through the workspace's operations, so ``/memories`` is the same
    on a directory and in PostgreSQL. On disk, a symlink is followed only to ``MEMORY.md`` or
    into ``memory/`` (the store's memory area); any other is refused, and not listed.

    Args:
        workspace: the workspace (or its path).
        redactor: masks secrets in what a write adds (default :class:`memdir.redact.Redactor`).
        namespace: the caller's namespace in the workspace.
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None,
        *,
        redactor: Redactor | None,
        namespace: str | None = None,
    ) -> None:
        self.workspace = Workspace.coerce(workspace, namespace)
        self.redactor = redactor if redactor is not None else Redactor()

    # -- reading -------------------------------------------------------------------------------

    @staticmethod
    def _refused(target: Target, exc: WorkspaceError) -> MemoryToolError:
        if isinstance(exc, FileNotFoundError):
            return _missing(target)
        if "symlink" in str(exc) or getattr(exc, "reason", None) in {"outside", "area", "loop"}:
            return MemoryToolError(f"Path would escape {ROOT} directory via symlink")
        return MemoryToolError(str(exc))

    def _read(self, target: Target) -> str:
        try:
            data = self.workspace.read_bytes(target.rel)
        except WorkspaceError as exc:
            raise self._refused(target, exc) from None
        return data.decode("utf-8", errors="replace")

    def _kind(self, target: Target) -> Kind | None:
        """What is at the target (``None``: nothing); a symlink must stay in the memory."""
        try:
            found = self.workspace.stat(target.rel, area=MEMORY_AREA)
        except PathRefused as exc:
            if exc.reason == "directory":
                return "dir"
            if exc.reason == "special":
                return "special"
            raise self._refused(target, exc) from None
        except WorkspaceError as exc:
            raise self._refused(target, exc) from None
        if found is not None:
            return "file"
        # A store without directories (PostgreSQL) has one wherever a file lies below it.
        return "dir" if self._entries(target.rel) else None

    def _entries(self, rel_dir: str) -> list[tuple[str, bool, int]]:
        """``(name, is_dir, size)`` of what ``rel_dir`` holds, by name, hidden items left out.

        A link or a special file is listed only if it reads as a file within the memory.
        """
        try:
            listing = self.workspace.listdir(rel_dir)
        except WorkspaceError:
            return []
        return [
            (e.name, e.kind == "dir", e.stat.size if e.stat is not None else 0)
            for e in listing
            if not e.name.startswith(".")
        ]

    def _size_below(self, rel_dir: str) -> int:
        """The bytes of the files in ``rel_dir`` and below it (hidden items left out)."""
        return sum(
            size if not is_dir else self._size_below(f"{rel_dir}/{name}")
            for name, is_dir, size in self._entries(rel_dir)
        )

    def view(self, path: object, view_range: object = None) -> str:
        """A directory listing two levels deep, or a file with numbered lines."""
        target = parse_path(path)
        if target.kind == "root":
            return self._view_dir(target, root=True)
        kind = self._kind(target)
        if kind is None:
            raise _missing(target)
        if kind == "dir":
            return self._view_dir(target, root=False)
        lines = self._read(target).split("\n")
        if len(lines) > _MAX_LINES:
            raise MemoryToolError(
                f"File {escaped(target.path)} exceeds maximum line limit of 999,999 lines."
            )
        first = 1
        if view_range is not None:
            if (
                not isinstance(view_range, list | tuple)
                or len(view_range) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
            ):
                raise MemoryToolError("`view_range` must be two line numbers: [start, end]")
            start = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            lines, first = lines[start:end], start + 1
        head = f"Here's the content of {escaped(target.path)} with line numbers:\n"
        return head + _numbered(lines, first)

    def _view_dir(self, target: Target, *, root: bool) -> str:
        """The listing two levels deep; a directory's size is that of the files below it."""
        shown = target.path.rstrip("/") or ROOT
        entries: list[tuple[str, int]] = []
        if root:
            try:
                memory_md = self.workspace.stat(MEMORY_MD, area=MEMORY_AREA)
            except WorkspaceError:  # a link out of the memory, a directory...: not listed
                memory_md = None
            if memory_md is not None:
                entries.append((MEMORY_MD, memory_md.size))
        self._collect(target.rel, "", 1, entries)
        if root:
            entries.sort(key=lambda e: e[0].split("/")[0].rstrip("/"))
        own = sum(size for rel, size in entries if "/" not in rel.rstrip("/"))
        lines = [
            f"{_size(own)}\t{shown}",
            *(f"{_size(size)}\t{shown}/{rel}" for rel, size in entries),
        ]
        header = (
            f"Here're the files and directories up to 2 levels deep in {escaped(shown)}, "
            "excluding hidden items:"
        )
        return header + "\n" + "\n".join(lines)

    def _collect(self, rel_dir: str, prefix: str, depth: int, out: list[tuple[str, int]]) -> None:
        for name, is_dir, size in self._entries(rel_dir):
            rel = f"{prefix}{name}"
            if is_dir:
                out.append((rel + "/", self._size_below(f"{rel_dir}/{name}")))
                if depth < 2:
                    self._collect(f"{rel_dir}/{name}", rel + "/", depth + 1, out)
            else:
                out.append((rel, size))

    # -- the write rules -----------------------------------------------------------------------

    def _check_writable(self, target: Target, action: str) -> None:
        today = self.workspace.today()
        todays = f"{ROOT}/{today.isoformat()}.md"
        if target.kind == "root":
            raise MemoryToolError(
                f"{ROOT} is a directory; give a file path such as {ROOT}/notes.md"
            )
        if target.kind == "archive":
            raise MemoryToolError(
                f"{escaped(target.path)} is in the ledger archive, which is read-only history"
            )
        if target.kind == "nested":
            raise MemoryToolError(
                f"memdir keeps memories as files directly in {ROOT} (subdirectories are not "
                f"searchable): use a path such as {ROOT}/notes.md"
            )
        if target.kind == "note" and not target.rel.endswith(".md"):
            stem = target.path.rsplit(".", 1)[0] if "." in target.path else target.path
            raise MemoryToolError(
                "memdir keeps memories as Markdown files, so they can be searched: name it "
                f"{escaped(stem)}.md"
            )
        if target.kind == "ledger":
            if target.day != today:
                raise MemoryToolError(
                    f"{escaped(target.path)} is the daily ledger of {target.day}: ledgers are "
                    f"append-only history and only today's takes new facts. Add them to "
                    f"{todays} (insert at its last line) or edit {ROOT}/MEMORY.md"
                )
            if action in ("str_replace", "delete", "rename"):
                raise MemoryToolError(
                    f"{escaped(target.path)} is today's daily ledger, which is append-only: "
                    f"add facts with insert at its last line; keep notes you want to edit in "
                    f"another file such as {ROOT}/notes.md"
                )
        if target.kind == "memory_md" and action in ("delete", "rename"):
            raise MemoryToolError(
                f"{ROOT}/MEMORY.md is the curated memory memdir consolidates into; it cannot be "
                "deleted or renamed: remove or change lines with str_replace"
            )

    def _mask(self, text: str) -> tuple[str, int]:
        masked = sum(self.redactor.findings(text).values())
        return (self.redactor.redact(text) if masked else text), masked

    def _reindexed(self, target: Target, message: str, masked: int = 0) -> str:
        sep = "\n" if "\n" in message else " "  # a snippet's last line stays the file's line
        if masked:
            message += f"{sep}{masked_note(masked)}"
        try:
            shared_index(self.workspace).index_file(target.rel)
        except (MemdirError, sqlite3.Error, OSError) as exc:
            logger.warning("could not re-index %s: %s", target.rel, type(exc).__name__)
            message += f"{sep}(Search will find it after the index catches up: {exc})"
        return message

    def _rewrite(self, target: Target, old: str, new: str) -> None:
        if target.kind == "memory_md":
            save_version(self.workspace, old, keep=_HISTORY_VERSIONS)
        try:
            self.workspace.write_text(target.rel, new)
        except WorkspaceError as exc:
            raise self._refused(target, exc) from None

    def _existing_file(self, target: Target) -> str:
        kind = self._kind(target)
        if kind is None:
            raise _missing(target)
        if kind != "file":
            raise MemoryToolError(f"The path {escaped(target.path)} is not a file.")
        return self._read(target)

    # -- writing -------------------------------------------------------------------------------

    def create(self, path: object, file_text: object) -> str:
        """Create a file; an existing one is never replaced."""
        target = parse_path(path)
        self._check_writable(target, "create")
        text = _text(file_text, "file_text")
        shown = escaped(target.path)
        if target.kind == "ledger":
            if self._kind(target) is not None:
                raise MemoryToolError(f"File {shown} already exists")
            return self._append_ledger(target, text, f"File created successfully at: {shown}")
        text, masked = self._mask(text)
        with self.workspace.lock(_LOCK):
            try:
                created = self.workspace.create_text(target.rel, text)
            except WorkspaceError as exc:
                raise self._refused(target, exc) from None
        if not created:
            raise MemoryToolError(f"File {shown} already exists")
        return self._reindexed(target, f"File created successfully at: {shown}", masked)

    def str_replace(self, path: object, old_str: object, new_str: object) -> str:
        """Replace the one occurrence of ``old_str``; none or several change nothing."""
        target = parse_path(path)
        self._check_writable(target, "str_replace")
        old = _text(old_str, "old_str")
        new = _text(new_str, "new_str")
        if not old:
            raise MemoryToolError("`old_str` is empty; give the exact text to replace")
        shown = escaped(target.path)
        with self.workspace.lock(_LOCK):
            content = self._existing_file(target)
            count = content.count(old)
            if count == 0:
                raise MemoryToolError(
                    f"No replacement was performed, old_str `{old}` did not appear verbatim in "
                    f"{shown}."
                )
            if count > 1:
                lines: list[int] = []
                at = content.find(old)
                while at != -1:
                    lines.append(content.count("\n", 0, at) + 1)
                    at = content.find(old, at + 1)
                raise MemoryToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                    f"lines: {', '.join(map(str, lines))}. Please ensure it is unique"
                )
            changed = content.count("\n", 0, content.find(old))
            masked = sum(self.redactor.findings(new).values())
            updated = self.redactor.redact(content.replace(old, new))
            self._rewrite(target, content, updated)
        after = updated.split("\n")
        start = max(0, changed - 2)
        snippet = _numbered(after[start : min(len(after), changed + 3)], start + 1)
        message = (
            "The memory file has been edited. Here is the snippet showing the change (with line "
            "numbers):\n" + snippet
        )
        return self._reindexed(target, message, masked)

    def insert(self, path: object, insert_line: object, insert_text: object) -> str:
        """Insert text after line ``insert_line`` (0: at the top)."""
        target = parse_path(path)
        self._check_writable(target, "insert")
        text = _text(insert_text, "insert_text")
        if not isinstance(insert_line, int) or isinstance(insert_line, bool):
            raise MemoryToolError("`insert_line` must be a line number (0 inserts at the top)")
        shown = escaped(target.path)
        if target.kind == "ledger":
            lines = _lines(self._existing_file(target))
            if insert_line != len(lines):
                raise MemoryToolError(
                    f"{shown} is today's daily ledger, which is append-only: insert at line "
                    f"{len(lines)} (its end) to add facts, or keep notes you want to edit in "
                    f"another file such as {ROOT}/notes.md"
                )
            return self._append_ledger(target, text, f"The file {shown} has been edited.")
        with self.workspace.lock(_LOCK):
            content = self._existing_file(target)
            lines = _lines(content)
            if insert_line < 0 or insert_line > len(lines):
                raise MemoryToolError(
                    f"Invalid `insert_line` parameter: {insert_line}. It should be within the "
                    f"range [0, {len(lines)}]."
                )
            masked = sum(self.redactor.findings(text).values())
            lines.insert(insert_line, text.rstrip("\n"))
            updated = self.redactor.redact("\n".join(lines))
            self._rewrite(target, content, updated if updated.endswith("\n") else updated + "\n")
        return self._reindexed(target, f"The file {shown} has been edited.", masked)

    def _append_ledger(self, target: Target, text: str, message: str) -> str:
        if not text.strip():
            raise MemoryToolError("The text is blank: give the fact(s) to remember, one per line")
        try:
            result = add_memory(self.workspace, text, redactor=self.redactor, origin="model")
        except MemdirError as exc:
            raise MemoryToolError(str(exc)) from None
        if result.masked:
            message += f" {masked_note(result.masked)}"
        if result.index_error:
            message += f" (Search will find it after the index catches up: {result.index_error})"
        return message

    def delete(self, path: object) -> str:
        """Delete a notes file; it is kept in ``memory/.history/deleted/``, never lost."""
        target = parse_path(path)
        if target.kind == "root":
            raise MemoryToolError(f"Cannot delete the {ROOT} directory itself")
        self._check_writable(target, "delete")
        shown = escaped(target.path)
        with self.workspace.lock(_LOCK):
            kind = self._kind(target)
            if kind is None:
                raise MemoryToolError(f"The path {shown} does not exist")
            if kind != "file":
                raise MemoryToolError(f"The path {shown} is not a file.")
            stamp = self.workspace.utc_now().strftime("%Y%m%dT%H%M%S.%fZ")
            stem = PurePosixPath(target.rel).stem
            kept = f"{HISTORY_DIR}/deleted/{stem}.{stamp}.md"
            # Kept first, removed after: a failure in between leaves both, never neither.
            if not self._move(target, kept):
                raise MemoryToolError(f"The path {shown} does not exist")
        return self._reindexed(target, f"Successfully deleted {shown}")

    def rename(self, old_path: object, new_path: object) -> str:
        """Rename a notes file; the destination must not exist."""
        source = parse_path(old_path, what="old_path")
        dest = parse_path(new_path, what="new_path")
        if source.kind == "root":
            raise MemoryToolError(f"Cannot rename the {ROOT} directory itself")
        self._check_writable(source, "rename")
        if dest.kind in ("ledger", "memory_md"):
            raise MemoryToolError(
                f"{escaped(dest.path)} is written by memdir's memory pipeline; a file cannot be "
                "renamed into it"
            )
        self._check_writable(dest, "rename")
        old_shown, new_shown = escaped(source.path), escaped(dest.path)
        with self.workspace.lock(_LOCK):
            if self._kind(dest) is not None:
                raise MemoryToolError(f"The destination {new_shown} already exists")
            kind = self._kind(source)
            if kind is None:
                raise MemoryToolError(f"The path {old_shown} does not exist")
            if kind != "file":
                raise MemoryToolError(f"The path {old_shown} is not a file.")
            if not self._move(source, dest.rel, taken=new_shown):
                raise MemoryToolError(f"The path {old_shown} does not exist")
        self._reindexed(source, "")
        return self._reindexed(dest, f"Successfully renamed {old_shown} to {new_shown}")

    def _move(self, source: Target, dest_rel: str, *, taken: str | None = None) -> bool:
        """Move the file to ``dest_rel`` without ever replacing a file there; whether the
        source was there. The copy is made whole before the source is removed, so a failure
        in between leaves both (nothing is lost)."""
        try:
            data = self.workspace.read_bytes(source.rel)
        except FileNotFoundError:
            return False
        except WorkspaceError as exc:
            raise self._refused(source, exc) from None
        try:
            created = self.workspace.create_text(dest_rel, data)
        except WorkspaceError as exc:
            raise MemoryToolError(str(exc)) from None
        if not created:
            shown = taken if taken is not None else escaped(dest_rel)
            raise MemoryToolError(f"The destination {shown} already exists")
        try:
            self.workspace.delete(source.rel)
        except WorkspaceError as exc:
            raise self._refused(source, exc) from None
        return True


def _lines(content: str) -> list[str]:
    """Lines split on ``\\n`` without the empty tail of a final newline (CR kept)."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise MemoryToolError(f"`{name}` must be a string")
    if "\x00" in value:
        raise MemoryToolError(f"`{name}` contains a NUL byte; remove it and try again")
    return value
