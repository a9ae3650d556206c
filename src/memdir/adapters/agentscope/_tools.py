"""memdir's memory tools as AgentScope ``FunctionTool`` objects (allowed without asking)."""

from __future__ import annotations

from typing import Any

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolChunk

from memdir.adapters._toolset import memdir_tools
from memdir.agent import Tool
from memdir.messages import ToolUseBlock
from memdir.store.workspace import Workspace

__all__ = ["agentscope_tools"]

_READ_ONLY = frozenset({"memory_search", "memory_get", "read_file"})


def agentscope_tools(
    workspace: Workspace, *, memory_add: bool = True, read_file: bool = True
) -> list[FunctionTool]:
    """``memory_search``, ``memory_get``, ``memory_add`` and ``read_file`` for a ``Toolkit``.

    Same names, schemas and descriptions as memdir's agent and MCP server. A failure comes back
    to the model as an error result, never as an exception in the agent.
    """
    return [
        _function_tool(tool, workspace)
        for tool in memdir_tools(memory_add=memory_add, file_reader=read_file)
    ]


def _function_tool(tool: Tool, workspace: Workspace) -> FunctionTool:
    async def invoke(**kwargs: Any) -> ToolChunk:
        result = await tool.run(
            ToolUseBlock(id=f"agentscope-{tool.name}", name=tool.name, input=kwargs),
            workspace=workspace,
        )
        state = ToolResultState.ERROR if result.is_error else ToolResultState.SUCCESS
        return ToolChunk(content=[TextBlock(text=result.text)], state=state)

    return FunctionTool(
        invoke,
        name=tool.name,
        description=tool.description,
        input_schema=tool.parameters,
        is_concurrency_safe=tool.name in _READ_ONLY,
        is_read_only=tool.name in _READ_ONLY,
        permission=PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{tool.name} reads or adds to memdir's memory; always allowed",
        ),
    )
