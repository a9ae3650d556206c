"""``MemdirMemoryTool``: the Claude API memory tool, run by your code on a memdir workspace.

Works with plain dicts (no SDK needed) and with the ``anthropic`` SDK's tool runner. The runner
runs only instances of its builtin-tool classes, so when the SDK is installed the two tools
derive from ``BetaBuiltinFunctionTool`` / ``BetaAsyncBuiltinFunctionTool``; it calls ``to_dict()``,
``name`` and ``call(input)``, and turns an ``anthropic`` ``ToolError`` (which every refusal is,
then) into a ``tool_result`` with ``is_error: true``.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from memdir.adapters.anthropic._memories import WorkspaceMemories
from memdir.adapters.anthropic._paths import MemoryToolError
from memdir.redact import Redactor
from memdir.store.workspace import Workspace

__all__ = ["TOOL_NAME", "TOOL_TYPE", "AsyncMemdirMemoryTool", "MemdirMemoryTool"]

TOOL_TYPE: Final = "memory_20250818"
TOOL_NAME: Final = "memory"
_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "view": ("path",),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
_OPTIONAL: Final[dict[str, tuple[str, ...]]] = {"view": ("view_range",)}


def _sdk_bases() -> tuple[type, type]:
    try:
        from anthropic.lib.tools import BetaAsyncBuiltinFunctionTool, BetaBuiltinFunctionTool
    except ImportError:
        return object, object
    return BetaBuiltinFunctionTool, BetaAsyncBuiltinFunctionTool


if TYPE_CHECKING:
    _SyncBase = object
    _AsyncBase = object
else:
    _SyncBase, _AsyncBase = _sdk_bases()


@functools.cache
def _error_type() -> type[MemoryToolError]:
    """:class:`MemoryToolError`, also an ``anthropic`` ``ToolError`` when the SDK is installed."""
    try:
        from anthropic.tools import ToolError
    except ImportError:
        return MemoryToolError

    class _SdkMemoryToolError(MemoryToolError, ToolError):
        def __init__(self, message: str) -> None:
            ToolError.__init__(self, message)

    _SdkMemoryToolError.__name__ = _SdkMemoryToolError.__qualname__ = "MemoryToolError"
    return _SdkMemoryToolError


def _fields(command: object) -> dict[str, Any]:
    """The command as a dict: a mapping, or an SDK command model (``model_dump``)."""
    if isinstance(command, Mapping):
        return dict(command)
    dump = getattr(command, "model_dump", None)
    if callable(dump):
        data = dump()
        if isinstance(data, dict):
            return data
    raise MemoryToolError("a memory command must be a JSON object with a `command` field")


class MemdirMemoryTool(_SyncBase):
    """The ``memory_20250818`` tool over a memdir workspace (synchronous).

    ``/memories/MEMORY.md`` is the workspace's curated memory, ``/memories/<name>.md`` are
    notes (``memory/<name>.md``), ``/memories/YYYY-MM-DD.md`` the daily ledgers (append-only:
    only today's takes new lines, at its end) and ``/memories/archive/`` the archived ledgers
    (read-only). Every write masks secrets and re-indexes the file, so ``memory_search`` finds
    it at once; a rewrite of ``MEMORY.md`` keeps the previous version in ``memory/.history/``,
    and a deleted note is moved to ``memory/.history/deleted/``.

    Args:
        workspace: the workspace (or its path; default: the configured one).
        redactor: secret masking for writes (default :class:`memdir.redact.Redactor`).
        cache_control: added to the tool parameter (``{"type": "ephemeral"}``).
        namespace: the caller's namespace in the workspace.

    Example::

        tool = MemdirMemoryTool("~/agent-ws")
        runner = client.beta.messages.tool_runner(model=..., tools=[tool], messages=[...])
        # without the SDK's runner:
        result_block = tool.tool_result(tool_use_block)  # {"type": "tool_result", ...}
    """

    name: str = TOOL_NAME

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        redactor: Redactor | None = None,
        cache_control: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> None:
        self.memories = WorkspaceMemories(workspace, redactor=redactor, namespace=namespace)
        self.workspace = self.memories.workspace
        self._cache_control = dict(cache_control) if cache_control is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The ``tools`` entry for the Messages API."""
        param: dict[str, Any] = {"type": TOOL_TYPE, "name": TOOL_NAME}
        if self._cache_control is not None:
            param["cache_control"] = dict(self._cache_control)
        return param

    def call(self, input: object) -> str:
        """Run one tool call's ``input`` (what the SDK's tool runner calls)."""
        return self.execute(input)

    def execute(self, command: object) -> str:
        """Run a command (a dict, or an SDK ``BetaMemoryTool20250818*Command``).

        Raises:
            MemoryToolError: the command was refused; its message is the text for the model.
        """
        try:
            return self._dispatch(_fields(command))
        except MemoryToolError as exc:
            raise _error_type()(str(exc)) from None

    def tool_result(self, tool_use: Mapping[str, Any] | object) -> dict[str, Any]:
        """The ``tool_result`` block answering a ``tool_use`` block (a dict or an SDK block)."""
        block = _fields(tool_use)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.get("id")}
        try:
            result["content"] = self.execute(block.get("input"))
        except MemoryToolError as exc:
            result["content"] = str(exc)
            result["is_error"] = True
        return result

    def _dispatch(self, fields: dict[str, Any]) -> str:
        name = fields.get("command")
        if not isinstance(name, str) or name not in _FIELDS:
            known = ", ".join(_FIELDS)
            raise MemoryToolError(f"Unknown command: {name!r}; the commands are {known}")
        wanted = _FIELDS[name]
        missing = [key for key in wanted if fields.get(key) is None]
        if missing:
            raise MemoryToolError(f"`{name}` needs {', '.join(f'`{k}`' for k in missing)}")
        args = [fields[key] for key in wanted]
        args += [fields.get(key) for key in _OPTIONAL.get(name, ())]
        method = getattr(self.memories, name)
        result: str = method(*args)
        return result

    # The reference tool's methods, for callers that use them directly.

    def view(self, path: str, view_range: list[int] | None = None) -> str:
        """List ``path`` (a directory) or show it with line numbers."""
        return self.execute({"command": "view", "path": path, "view_range": view_range})

    def create(self, path: str, file_text: str) -> str:
        """Create a file (never replaces one)."""
        return self.execute({"command": "create", "path": path, "file_text": file_text})

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """Replace the only occurrence of ``old_str``."""
        return self.execute(
            {"command": "str_replace", "path": path, "old_str": old_str, "new_str": new_str}
        )

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0: at the top)."""
        return self.execute(
            {
                "command": "insert",
                "path": path,
                "insert_line": insert_line,
                "insert_text": insert_text,
            }
        )

    def delete(self, path: str) -> str:
        """Delete a notes file (kept in ``memory/.history/deleted/``)."""
        return self.execute({"command": "delete", "path": path})

    def rename(self, old_path: str, new_path: str) -> str:
        """Rename a notes file."""
        return self.execute({"command": "rename", "old_path": old_path, "new_path": new_path})


class AsyncMemdirMemoryTool(_AsyncBase):
    """:class:`MemdirMemoryTool` for async code and the SDK's async tool runner.

    The file work runs in a worker thread, so the event loop never waits on the disk.
    """

    name: str = TOOL_NAME

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        redactor: Redactor | None = None,
        cache_control: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> None:
        self.sync = MemdirMemoryTool(
            workspace, redactor=redactor, cache_control=cache_control, namespace=namespace
        )
        self.workspace = self.sync.workspace

    def to_dict(self) -> dict[str, Any]:
        """The ``tools`` entry for the Messages API."""
        return self.sync.to_dict()

    async def call(self, input: object) -> str:
        """Run one tool call's ``input`` (what the SDK's async tool runner calls)."""
        return await self.execute(input)

    async def execute(self, command: object) -> str:
        """Run a command; see :meth:`MemdirMemoryTool.execute`."""
        return await asyncio.to_thread(self.sync.execute, command)

    async def tool_result(self, tool_use: Mapping[str, Any] | object) -> dict[str, Any]:
        """The ``tool_result`` block answering a ``tool_use`` block."""
        return await asyncio.to_thread(self.sync.tool_result, tool_use)
