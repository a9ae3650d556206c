"""memdir's memory tools (and ``read_file`` for evicted outputs) as LangChain tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from memdir.agent import read_file
from memdir.errors import MemdirError
from memdir.store.workspace import Workspace
from memdir.tools import TOOL_DESCRIPTIONS, TOOL_FUNCTIONS, TOOL_SCHEMAS, call_tool

__all__ = ["memdir_tools", "workspace_tools"]

_READ_FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": 'A workspace path, e.g. one a "saved to" notice names.',
        },
        "start_line": {"type": "integer", "minimum": 1, "default": 1},
        "num_lines": {"type": "integer", "minimum": 1, "default": 200},
        "start_char": {
            "type": "integer",
            "minimum": 0,
            "description": "Read characters from this offset instead of lines.",
        },
        "max_chars": {"type": "integer", "minimum": 1, "maximum": 50_000, "default": 20_000},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def memdir_tools(
    workspace: Workspace | str | None = None, *, memory: bool = True, files: bool = False
) -> list[BaseTool]:
    """LangChain tools over a workspace, wrapping the same functions as memdir's MCP server.

    Args:
        workspace: the workspace (or its path; default: the configured one).
        memory: ``memory_search``, ``memory_get`` and ``memory_add``.
        files: ``read_file`` (read-only, confined to the workspace), which reads the outputs that
            eviction saved to ``large_tool_results/``.

    A tool never raises into the agent: a failure is an ``Error: ...`` text the model can act on.
    """
    ws = Workspace.coerce(workspace)
    return workspace_tools(lambda: ws, memory=memory, files=files)


def workspace_tools(
    resolve: Callable[[], Workspace], *, memory: bool = True, files: bool = False
) -> list[BaseTool]:
    """:func:`memdir_tools` over the workspace ``resolve()`` gives each time a tool runs (the
    namespace of the run that calls it); a :class:`MemdirError` of ``resolve`` is the tool's
    ``Error: ...`` text."""
    tools: list[BaseTool] = []
    if memory:
        for name in TOOL_FUNCTIONS:
            tools.append(
                StructuredTool.from_function(
                    func=_memory_tool(name, resolve),
                    name=name,
                    description=TOOL_DESCRIPTIONS[name],
                    args_schema=TOOL_SCHEMAS[name],
                )
            )
    if files:
        description = (read_file.__doc__ or "").split("\n\n", 1)[0]
        tools.append(
            StructuredTool.from_function(
                func=_read_file_tool(resolve),
                name="read_file",
                description=description,
                args_schema=_READ_FILE_SCHEMA,
            )
        )
    return tools


def _memory_tool(name: str, resolve: Callable[[], Workspace]) -> Any:
    def run(**arguments: Any) -> str:
        try:
            ws = resolve()
        except MemdirError as exc:
            return f"Error: {exc}"
        return call_tool(name, arguments, workspace=ws)

    return run


def _read_file_tool(resolve: Callable[[], Workspace]) -> Any:
    def run(**arguments: Any) -> str:
        try:
            return read_file(**arguments, workspace=resolve())
        except (MemdirError, OSError, TypeError, ValueError) as exc:
            return f"Error: {exc}"

    return run
