"""memdir as LangGraph's long-term store: :class:`MemdirStore`, a ``BaseStore`` on plain files.

::

    from memdir.adapters.langgraph import MemdirStore

    store = MemdirStore("~/agent-ws")
    graph = builder.compile(store=store)         # or create_agent(..., store=store)
    store.put(("memories", "alice"), "k1", {"content": "prefers dark mode"})
    store.search(("memories", "alice"), query="dark mode")

LangMem's ``create_manage_memory_tool`` / ``create_search_memory_tool`` run on it unchanged.
Needs the ``langgraph`` extra: ``pip install 'memdir[langgraph]'``. See
``docs/adapters/langgraph.md``.
"""

from __future__ import annotations

try:
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "memdir.adapters.langgraph needs LangGraph 1.x: pip install 'memdir[langgraph]'"
    ) from exc

from memdir.adapters.langgraph._filter import OPERATORS, StoreInputError
from memdir.adapters.langgraph._store import MemdirStore

__all__ = ["OPERATORS", "MemdirStore", "StoreInputError"]
