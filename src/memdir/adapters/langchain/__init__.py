"""memdir in LangChain v1 agents: middleware, memory tools and lossless message conversion.

::

    from langchain.agents import create_agent
    from memdir.adapters.langchain import MemdirMiddleware

    agent = create_agent(model, tools=[...], middleware=[MemdirMiddleware("~/agent-ws")])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t1"}})

* :class:`MemdirMiddleware`: compaction before the model call (flush and offload first, state
  unchanged when the summary fails), ``MEMORY.md`` in the system prompt, eviction of huge tool
  results, the memory flush after each run, and memdir's memory tools;
* :func:`memdir_tools`: ``memory_search`` / ``memory_get`` / ``memory_add`` (and ``read_file``)
  as LangChain tools;
* :func:`from_langchain` / :func:`to_langchain`: LangChain messages and
  :class:`~memdir.messages.Msg`, both ways, without loss;
* :class:`LangChainChatModel`: a LangChain chat model serving memdir's own requests.

Needs the ``langchain`` extra: ``pip install 'memdir[langchain]'``. See
``docs/adapters/langchain.md``.
"""

from __future__ import annotations

try:
    import langchain.agents.middleware  # noqa: F401
    import langchain_core.messages  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "memdir.adapters.langchain needs LangChain 1.x: pip install 'memdir[langchain]'"
    ) from exc

from memdir.adapters.langchain._convert import (
    MEMDIR_KWARG,
    MESSAGE_KEY,
    from_langchain,
    message_to_msg,
    msg_to_messages,
    to_langchain,
)
from memdir.adapters.langchain._middleware import MemdirMiddleware
from memdir.adapters.langchain._model import LangChainChatModel
from memdir.adapters.langchain._tools import memdir_tools

__all__ = [
    "MEMDIR_KWARG",
    "MESSAGE_KEY",
    "LangChainChatModel",
    "MemdirMiddleware",
    "from_langchain",
    "memdir_tools",
    "message_to_msg",
    "msg_to_messages",
    "to_langchain",
]
