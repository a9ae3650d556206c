"""The tools every adapter offers, built once from :mod:`memdir.tools` and ``read_file``.

An adapter wraps these :class:`~memdir.agent.Tool` objects in its framework's tool type, so the
names, schemas and descriptions the model sees are those of the agent and the MCP server.
"""

from __future__ import annotations

from memdir.agent import Tool, read_file, tool_from_function
from memdir.tools import TOOL_DESCRIPTIONS, TOOL_FUNCTIONS, TOOL_SCHEMAS

__all__ = ["memdir_tools"]


def memdir_tools(*, memory_add: bool = True, file_reader: bool = True) -> list[Tool]:
    """``memory_search``, ``memory_get``, ``memory_add`` and ``read_file`` as memdir tools.

    Args:
        memory_add: include ``memory_add`` (leave it out for a read-only memory).
        file_reader: include ``read_file``, which reads evicted tool outputs back in pieces
            (``large_tool_results/``) and any other workspace file.
    """
    tools = [
        tool_from_function(
            fn,
            name=name,
            description=TOOL_DESCRIPTIONS[name],
            parameters=TOOL_SCHEMAS[name],
            error_prefix="Error:",
        )
        for name, fn in TOOL_FUNCTIONS.items()
        if memory_add or name != "memory_add"
    ]
    if file_reader:
        tools.append(tool_from_function(read_file))
    return tools
