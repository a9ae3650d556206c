"""memdir for AgentScope 2.x: a middleware, an offloader and a message converter.

::

    from agentscope.agent import Agent
    from agentscope.tool import Toolkit
    from memdir.adapters.agentscope import MemdirMiddleware, MemdirOffloader

    memory = MemdirMiddleware("~/agent-ws")
    agent = Agent(
        name="Friday", system_prompt="You are a helpful assistant.", model=model,
        toolkit=Toolkit(tools=await memory.list_tools()),
        middlewares=[memory], offloader=MemdirOffloader("~/agent-ws"),
    )

:class:`MemdirMiddleware` injects ``MEMORY.md``, recalls memory for each user message, compacts
the memdir way (flush and offload first, four-section summary, tool pairs never split) and
flushes facts after each reply; :class:`MemdirOffloader` puts what AgentScope offloads into the
workspace's session log and ``large_tool_results/``. :func:`to_memdir` / :func:`from_memdir`
convert messages losslessly. Needs AgentScope: ``pip install 'memdir[agentscope]'``. See
``docs/adapters/agentscope.md``.
"""

from __future__ import annotations

try:
    import agentscope as _agentscope  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "memdir.adapters.agentscope needs AgentScope 2.x: pip install 'memdir[agentscope]'"
    ) from exc

from memdir.adapters.agentscope._convert import META_KEY, from_memdir, msg_to_memdir, to_memdir
from memdir.adapters.agentscope._middleware import RECALL_SOURCE, MemdirMiddleware
from memdir.adapters.agentscope._offloader import MemdirOffloader, memdir_session_id
from memdir.adapters.agentscope._tools import agentscope_tools

__all__ = [
    "META_KEY",
    "RECALL_SOURCE",
    "MemdirMiddleware",
    "MemdirOffloader",
    "agentscope_tools",
    "from_memdir",
    "memdir_session_id",
    "msg_to_memdir",
    "to_memdir",
]
