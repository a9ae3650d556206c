"""memdir's memory tools as Agents SDK function tools."""

from __future__ import annotations

import json
import os
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from memdir.adapters._toolset import memdir_tools
from memdir.agent import Tool
from memdir.messages import ToolUseBlock
from memdir.store.workspace import Workspace

__all__ = ["memdir_function_tools"]


def memdir_function_tools(
    workspace: Workspace | str | os.PathLike[str],
    *,
    memory_add: bool = True,
    read_file: bool = True,
    namespace: str | None = None,
) -> list[FunctionTool]:
    """``memory_search``, ``memory_get``, ``memory_add`` and ``read_file`` for ``Agent(tools=...)``.

    They are the functions of :mod:`memdir.tools` with the same names, schemas and descriptions
    as memdir's agent and MCP server. A tool never raises into the run: bad arguments or a
    broken index come back to the model as ``Error: ...`` text.

    Args:
        workspace: the workspace, or its path.
        memory_add: offer ``memory_add`` (``False`` for a read-only memory).
        read_file: offer ``read_file``, which reads evicted tool outputs back in pieces.
        namespace: the caller's namespace in the workspace.
    """
    ws = Workspace.coerce(workspace, namespace)
    return [
        _function_tool(tool, ws)
        for tool in memdir_tools(memory_add=memory_add, file_reader=read_file)
    ]


def _function_tool(tool: Tool, workspace: Workspace) -> FunctionTool:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"Error: the arguments of {tool.name} are not valid JSON; send a JSON object"
        if not isinstance(args, dict):
            return f"Error: the arguments of {tool.name} must be a JSON object"
        call_id = getattr(ctx, "tool_call_id", None) or tool.name
        result = await tool.run(
            ToolUseBlock(id=call_id, name=tool.name, input=args), workspace=workspace
        )
        return result.text

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        # memdir's schemas have optional arguments with defaults, which strict mode forbids.
        strict_json_schema=False,
    )
