"""MemdirMemoryStore: the pydantic-ai-harness ``Memory`` capability's store on a memdir workspace.

The harness names a file ``<scope>/<name>.md``; the default scope is ``main``. This store
keeps that scope in the workspace (or its ``namespace=``), laid out as the Claude memory tool
lays out ``/memories`` (:mod:`memdir.adapters.anthropic._paths`)::

    main/MEMORY.md        MEMORY.md             the main notebook (old versions kept)
    main/<name>.md        memory/<name>.md      notes (deleted ones kept in memory/.history/)
    main/YYYY-MM-DD.md    memory/YYYY-MM-DD.md  daily ledgers: read and searched, never rewritten

A version is the SHA-256 of the file's text. Every write and delete runs under the workspace's
``memory-tool`` lock (held across processes, and across hosts on PostgreSQL), and the file
is replaced with :meth:`Workspace.replace_if`, so a change made meanwhile by anything else is
a :class:`MemoryConflictError`, never lost. Receipts of the last 1,024 operations are kept in
``memory/.pydantic-ai-memory.json`` beside the notes, so a retried tool call is replayed.
Writes mask secrets and re-index the file; :meth:`MemdirMemoryStore.search` is memdir's ranked
search (:class:`memdir.index.MemoryIndex`: BM25, CJK words, hybrid with an embedder).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Literal, TypeVar

try:
    from pydantic_ai_harness.memory import (
        MemoryConflictError,
        MemoryFile,
        MemoryMutation,
        MemoryOperation,
        MemorySearchMatch,
        MemorySearchResult,
    )
    from pydantic_ai_harness.memory._store import MemoryPathEscapeError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "MemdirMemoryStore needs pydantic-ai-harness: pip install 'memdir[pydantic-ai]'"
    ) from exc

from memdir.adapters.anthropic._paths import Target, parse_path
from memdir.adapters.pydantic_ai import _memory_receipts as journal
from memdir.adapters.pydantic_ai._memory_receipts import content_version
from memdir.errors import MemdirError, ToolInputError, WorkspaceError
from memdir.index._core import MAX_LIMIT
from memdir.memory._history import save_version
from memdir.redact import Redactor
from memdir.store.workspace import HISTORY_DIR, MEMORY_DIR, Workspace
from memdir.tools._core import shared_index

__all__ = ["MemdirMemoryStore", "MemoryPathError"]

logger = logging.getLogger("memdir.adapters.pydantic_ai")

SCOPE = "main"
"""The harness scope this store keeps: ``Memory``'s default (no namespace, agent ``main``)."""
_LOCK = "memory-tool"  # the Claude memory tool's lock: both edit the same files
_HISTORY_VERSIONS = 20
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]{1,200}")
_T = TypeVar("_T")


class MemoryPathError(ToolInputError, MemoryPathEscapeError):
    """A harness path this store does not keep: malformed, another scope, a ledger to
    rewrite, or a symlink out of the memory. The harness asks the model for another name."""


class MemdirMemoryStore:
    """A ``MemoryStore`` and ``SearchableMemoryStore`` for ``Memory(MemdirMemoryStore(ws))``.

    Files are the workspace's own memory (see the module docstring), so memdir's tools,
    ``memdir search`` and the other adapters see what the agent wrote. One store keeps one
    memory: for one per user, give each a store of its own namespace with
    ``Memory(store_resolver=lambda ctx: stores[ctx.deps.user])``.

    Args:
        workspace: the workspace (a directory or PostgreSQL), or its path.
        namespace: the memory's namespace in the workspace (``None``: the root).
        redactor: masks secrets in what is written (default :class:`memdir.redact.Redactor`).
        lock_timeout: seconds to wait for the workspace's lock before an operation fails.
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str],
        *,
        namespace: str | None = None,
        redactor: Redactor | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        self.workspace = Workspace.coerce(workspace, namespace)
        self.redactor = redactor if redactor is not None else Redactor()
        self.lock_timeout = lock_timeout

    def __repr__(self) -> str:
        return f"MemdirMemoryStore({self.workspace!r})"

    # -- paths ---------------------------------------------------------------------------------

    def _target(self, path: str) -> Target:
        """The workspace file of harness path ``path`` (``main/<name>.md``)."""
        if not isinstance(path, str):
            raise MemoryPathError(f"a memory path must be a string, not {type(path).__name__}")
        shown = path if path.isprintable() else repr(path)[1:-1]
        segments = path.split("/")
        if (
            len(segments) < 2
            or not all(_SEGMENT.fullmatch(s) and ".." not in s and s != "." for s in segments)
            or segments[-1].startswith(".")
            or not segments[-1].endswith(".md")  # memdir indexes Markdown files only
        ):
            raise MemoryPathError(f"invalid memory path {shown!r}: use {SCOPE}/<name>.md")
        scope = "/".join(segments[:-1])
        if scope != SCOPE:
            raise MemoryPathError(
                f"memory path {shown!r} is in scope {scope!r}; MemdirMemoryStore keeps "
                f"{SCOPE!r} (one store per namespace: Memory(store_resolver=...))"
            )
        try:
            target = parse_path(f"/memories/{segments[-1]}")
        except ToolInputError as exc:
            raise MemoryPathError(str(exc)) from None
        return replace(target, path=path)  # messages name the harness's path

    def _read(self, target: Target) -> tuple[str, str] | None:
        """``(text, store version)`` of the file, or ``None`` if there is none."""
        try:
            found = self.workspace.read_versioned(target.rel)
        except FileNotFoundError:
            return None
        except WorkspaceError as exc:
            if isinstance(exc, IsADirectoryError):
                return None
            raise MemoryPathError(f"memory path {target.path!r} cannot be read: {exc}") from None
        if found is None:
            return None
        return found.data.decode("utf-8", errors="replace"), found.version

    # -- the protocol (sync bodies, run in a worker thread) -----------------------------------

    async def _locked(self, body: Callable[[], _T]) -> _T:
        async with self.workspace.async_lock(_LOCK, timeout=self.lock_timeout):
            return await asyncio.to_thread(body)

    async def read(self, path: str, *, max_chars: int) -> MemoryFile | None:
        """The file at ``path`` (its first ``max_chars`` characters), or ``None``."""
        target = self._target(path)
        if max_chars <= 0:
            raise ToolInputError("max_chars must be positive")

        def go() -> MemoryFile | None:
            found = self._read(target)
            if found is None:
                return None
            text = found[0]
            version = content_version(text)
            operation_id = next(
                (
                    r.id
                    for r in reversed(journal.load(self.workspace))
                    if r.done and r.kind == "write" and r.rel == target.rel and r.version == version
                ),
                None,
            )
            return MemoryFile(
                content=text[:max_chars],
                version=version,
                operation_id=operation_id,
                truncated=len(text) > max_chars,
            )

        return await asyncio.to_thread(go)

    async def get_operation(self, operation: MemoryOperation) -> MemoryMutation | None:
        """The result of ``operation`` if it was carried out (its fingerprint checked)."""

        def go() -> MemoryMutation | None:
            receipts = journal.load(self.workspace)
            receipt = journal.find(receipts, operation)
            if receipt is None:
                return None
            if not receipt.done and journal.settle(self.workspace, receipts):
                journal.save(self.workspace, receipts)
            return receipt.mutation() if receipt.done else None

        return await self._locked(go)

    async def write(
        self,
        path: str,
        content: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        """Create or replace ``path`` if its version is still ``expected_version``.

        Secrets in ``content`` are masked; the version returned is that of the text stored.

        Raises:
            MemoryConflictError: the file changed since ``expected_version``.
            MemoryOperationConflictError: ``operation``'s id was used with other arguments.
            MemoryPathError: ``path`` is not a note or ``MEMORY.md`` of this store.
        """
        target = self._target(path)
        if target.kind == "ledger":
            raise MemoryPathError(
                f"{target.path} is a daily ledger, append-only "
                "history: write to MEMORY.md or another note"
            )
        if not isinstance(content, str) or "\x00" in content:
            raise ToolInputError("memory content must be text without NUL bytes")
        text = self.redactor.redact(content) if self.redactor.findings(content) else content
        return await self._locked(lambda: self._mutate(target, text, expected_version, operation))

    async def delete(
        self,
        path: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        """Delete ``path`` if its version is still ``expected_version``; the file is kept in
        ``memory/.history/deleted/``, never lost.

        Raises:
            MemoryConflictError: the file changed since ``expected_version``.
            MemoryOperationConflictError: ``operation``'s id was used with other arguments.
            MemoryPathError: ``path`` is ``MEMORY.md``, a ledger, or not this store's.
        """
        target = self._target(path)
        if target.kind != "note":
            raise MemoryPathError(
                f"{target.path} cannot be deleted: it is "
                f"{'the main notebook' if target.kind == 'memory_md' else 'a daily ledger'}"
            )
        return await self._locked(lambda: self._mutate(target, None, expected_version, operation))

    def _mutate(
        self,
        target: Target,
        text: str | None,
        expected_version: str | None,
        operation: MemoryOperation | None,
    ) -> MemoryMutation:
        receipts = journal.load(self.workspace)
        settled = journal.settle(self.workspace, receipts)
        if operation is not None and (receipt := journal.find(receipts, operation)) is not None:
            if settled:
                journal.save(self.workspace, receipts)
            return receipt.mutation()
        found = self._read(target)
        old_text, store_version = found if found is not None else (None, None)
        if (None if old_text is None else content_version(old_text)) != expected_version:
            if settled:
                journal.save(self.workspace, receipts)
            action = "written" if text is not None else "deleted"
            raise MemoryConflictError(
                f"memory file {target.path!r} changed before it could be {action}"
            )
        version = None if text is None else content_version(text)
        receipt = None
        if operation is not None:
            kind: Literal["write", "delete"] = "write" if text is not None else "delete"
            receipt = journal.Receipt(
                operation.id,
                operation.fingerprint,
                kind,
                target.rel,
                version,
                found is not None,
                False,
            )
            receipts.append(receipt)
        if receipt is not None or settled:
            # pending first: a crash after the change is then settled from the file
            journal.save(self.workspace, receipts)
        if text is not None:
            if old_text is not None and target.kind == "memory_md":
                save_version(self.workspace, old_text, keep=_HISTORY_VERSIONS)
            self._replace(target, text, store_version)
        elif old_text is not None:
            self._remove(target, old_text)
        if receipt is not None:
            receipt.done = True
            journal.save(self.workspace, receipts)
        self._reindex(target)
        return MemoryMutation(version=version, replayed=False, existed=found is not None)

    def _replace(self, target: Target, text: str, store_version: str | None) -> None:
        try:
            replaced = self.workspace.replace_if(target.rel, text, store_version)
        except WorkspaceError as exc:
            raise MemoryPathError(f"memory path {target.path!r} cannot be written: {exc}") from None
        if not replaced:  # a writer that does not take the lock changed it meanwhile
            raise MemoryConflictError(f"memory file {target.path!r} changed while it was written")

    def _remove(self, target: Target, old_text: str) -> None:
        stamp = self.workspace.utc_now().strftime("%Y%m%dT%H%M%S.%fZ")
        kept = f"{HISTORY_DIR}/deleted/{PurePosixPath(target.rel).stem}.{stamp}.md"
        # Kept first, removed after: a failure in between leaves both, never neither.
        n = 1
        while not self.workspace.create_text(kept, old_text):
            n += 1
            kept = f"{HISTORY_DIR}/deleted/{PurePosixPath(target.rel).stem}.{stamp}-{n}.md"
        self.workspace.delete(target.rel)

    def _reindex(self, target: Target) -> None:
        try:
            shared_index(self.workspace).index_file(target.rel)
        except (MemdirError, sqlite3.Error, OSError) as exc:  # the next search catches up
            logger.warning("could not re-index %s: %s", target.rel, type(exc).__name__)

    async def list_paths(self, prefix: str = "", *, limit: int) -> list[str]:
        """The harness paths starting with ``prefix``, sorted, at most ``limit``."""
        if not isinstance(prefix, str) or "\x00" in prefix or ".." in prefix:
            raise MemoryPathError(f"invalid memory path prefix {prefix!r}")
        if limit <= 0:
            raise ToolInputError("limit must be positive")
        return (await asyncio.to_thread(self._paths, prefix))[:limit]

    def _paths(self, prefix: str) -> list[str]:
        """Every harness path of this store that starts with ``prefix``, sorted."""
        if not (f"{SCOPE}/".startswith(prefix) or prefix.startswith(f"{SCOPE}/")):
            return []
        names = [rel.removeprefix(f"{MEMORY_DIR}/") for rel in self.workspace.memory_files()]
        paths = [f"{SCOPE}/{name}" for name in names if "/" not in name]
        return sorted(p for p in paths if p.startswith(prefix))

    async def search(
        self,
        prefix: str,
        query: str,
        *,
        limit: int,
        max_files: int,
        max_chars: int,
        max_file_chars: int,
    ) -> MemorySearchResult:
        """memdir's ranked search over the files below ``prefix``, one match per file.

        A match is the file's best lines; only the first ``max_file_chars`` characters of a
        file are searched; paths and snippets together take at most ``max_chars``.
        """
        if min(limit, max_files, max_chars, max_file_chars) <= 0 or not query.strip():
            return MemorySearchResult(matches=[], scanned=0, truncated=False)
        return await asyncio.to_thread(
            self._search, prefix, query, limit, max_files, max_chars, max_file_chars
        )

    def _search(
        self,
        prefix: str,
        query: str,
        limit: int,
        max_files: int,
        max_chars: int,
        max_file_chars: int,
    ) -> MemorySearchResult:
        paths = [p for p in self._paths(prefix) if "/" not in p.removeprefix(prefix)]
        truncated = len(paths) > max_files
        allowed = {self._target(p).rel: p for p in paths[:max_files]}
        if not allowed:
            return MemorySearchResult(matches=[], scanned=0, truncated=False)
        index = shared_index(self.workspace)
        index.refresh()
        best: dict[str, tuple[float, list[str]]] = {}
        texts: dict[str, str] = {}
        for hit in index.search(query, limit=MAX_LIMIT):
            path = allowed.get(hit.path)
            if path is None:
                continue
            if hit.path not in texts:
                texts[hit.path] = self.workspace.read_text(hit.path)
            text = texts[hit.path]
            start = _line_offset(text, hit.line_number)
            if start >= max_file_chars:
                truncated = True
                continue
            snippet = hit.content[: max_file_chars - start]
            score, lines = best.get(path, (0.0, []))
            best[path] = (max(score, hit.score), [*lines, snippet])
        ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))
        matches: list[MemorySearchMatch] = []
        remaining = max_chars
        for path, (score, lines) in ranked[:limit]:
            room = remaining - len(path.removeprefix(prefix))
            if room <= 0:
                truncated = True
                break
            snippet = "\n".join(lines)
            if len(snippet) > room:
                snippet, truncated = snippet[:room], True
            matches.append(MemorySearchMatch(path=path, snippet=snippet, score=score))
            remaining = room - len(snippet)
        truncated = truncated or len(ranked) > len(matches)
        return MemorySearchResult(matches=matches, scanned=len(allowed), truncated=truncated)


def _line_offset(text: str, line_number: int) -> int:
    """The character offset at which line ``line_number`` (1-based) of ``text`` starts."""
    at = 0
    for _ in range(line_number - 1):
        at = text.find("\n", at) + 1
        if at == 0:
            return len(text)
    return at
