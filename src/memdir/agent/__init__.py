"""The memory harness in a tool-calling loop: :class:`HarnessAgent`, its events and hooks.

::

    from memdir.agent import HarnessAgent

    agent = HarnessAgent(name="MyAgent", model=model, workspace="~/agent-ws", tools=[my_tool])
    reply = await agent.call("What did we decide about the database?")
    async for event in agent.stream("and why?"):
        ...
    await agent.close()  # drains background memory work

See ``docs/agent.md``.
"""

from __future__ import annotations

from memdir.agent._agent import HarnessAgent
from memdir.agent._context import WorkspaceContextHook
from memdir.agent._file_tools import edit_file, list_files, read_file, write_file
from memdir.agent._runtime import AgentInput, SessionBusyError
from memdir.agent._state import INTERRUPTED_RESULT
from memdir.agent._toolkit import Tool, tool_from_function
from memdir.agent.events import (
    AgentEvent,
    ContextOverflowEvent,
    HookErrorEvent,
    ModelDeltaEvent,
    PostActingEvent,
    PostCallEvent,
    PostReasoningEvent,
    PreActingEvent,
    PreCallEvent,
    PreReasoningEvent,
)
from memdir.agent.hooks import (
    DEFAULT_PRIORITY,
    CompactionHook,
    Hook,
    HookFn,
    MemoryFlushHook,
    ToolResultEvictionHook,
)

__all__ = [
    "DEFAULT_PRIORITY",
    "INTERRUPTED_RESULT",
    "AgentEvent",
    "AgentInput",
    "CompactionHook",
    "ContextOverflowEvent",
    "HarnessAgent",
    "Hook",
    "HookErrorEvent",
    "HookFn",
    "MemoryFlushHook",
    "ModelDeltaEvent",
    "PostActingEvent",
    "PostCallEvent",
    "PostReasoningEvent",
    "PreActingEvent",
    "PreCallEvent",
    "PreReasoningEvent",
    "SessionBusyError",
    "Tool",
    "ToolResultEvictionHook",
    "WorkspaceContextHook",
    "edit_file",
    "list_files",
    "read_file",
    "tool_from_function",
    "write_file",
]
