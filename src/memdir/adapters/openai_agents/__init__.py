"""memdir for the OpenAI Agents SDK: a session, memory tools and a model-input filter.

::

    from agents import Agent, RunConfig, Runner
    from memdir.adapters.openai_agents import (
        MemdirSession, memdir_function_tools, memdir_input_filter,
    )

    session = MemdirSession("chat-1", "~/agent-ws")
    agent = Agent(name="assistant", tools=memdir_function_tools("~/agent-ws"))
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    result = await Runner.run(agent, "What did we decide?", session=session, run_config=config)

Needs the SDK: ``pip install 'memdir[openai-agents]'``. See ``docs/adapters/openai-agents.md``.
"""

from __future__ import annotations

try:
    import agents as _agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "memdir.adapters.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'memdir[openai-agents]'"
    ) from exc

from memdir.adapters.openai_agents._convert import (
    ITEM_KEY,
    item_to_msg,
    items_to_msgs,
    msg_to_items,
    msgs_to_items,
)
from memdir.adapters.openai_agents._filter import MemdirInputFilter, memdir_input_filter
from memdir.adapters.openai_agents._session import MARKER_KEY, MARKER_NAME, MemdirSession
from memdir.adapters.openai_agents._tools import memdir_function_tools

__all__ = [
    "ITEM_KEY",
    "MARKER_KEY",
    "MARKER_NAME",
    "MemdirInputFilter",
    "MemdirSession",
    "item_to_msg",
    "items_to_msgs",
    "memdir_function_tools",
    "memdir_input_filter",
    "msg_to_items",
    "msgs_to_items",
]
