"""memdir for Pydantic AI: compaction and memory as a capability, a store for the harness.

::

    from pydantic_ai import Agent
    from memdir.adapters.pydantic_ai import MemdirCompaction

    memdir = MemdirCompaction("~/agent-ws", session_id="chat-1")
    agent = Agent("openai:gpt-4o-mini", capabilities=[memdir])
    result = await agent.run("What did we decide?", message_history=history)

Needs Pydantic AI: ``pip install 'memdir[pydantic-ai]'`` (which brings pydantic-ai-harness
for :class:`MemdirMemoryStore`, the store of its ``Memory`` capability).
See ``docs/adapters/pydantic-ai.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import pydantic_ai as _pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "memdir.adapters.pydantic_ai needs Pydantic AI: pip install 'memdir[pydantic-ai]'"
    ) from exc

from memdir.adapters.pydantic_ai._capability import MemdirCompaction, memdir_toolset
from memdir.adapters.pydantic_ai._convert import MESSAGE_KEY, messages_to_msgs, msgs_to_messages

if TYPE_CHECKING:
    from memdir.adapters.pydantic_ai._memory_store import MemdirMemoryStore, MemoryPathError

__all__ = [
    "MESSAGE_KEY",
    "MemdirCompaction",
    "MemdirMemoryStore",
    "MemoryPathError",
    "memdir_toolset",
    "messages_to_msgs",
    "msgs_to_messages",
]


def __getattr__(name: str) -> Any:
    # The harness's store needs pydantic-ai-harness, which the capability does not.
    if name in ("MemdirMemoryStore", "MemoryPathError"):
        from memdir.adapters.pydantic_ai import _memory_store

        return getattr(_memory_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
