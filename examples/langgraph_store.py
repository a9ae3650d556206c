"""LangGraph's long-term store on memdir, offline: items as files, ranked CJK search, filters,
per-user memdir namespaces, a graph using it, and LangMem's memory tools.

Run: ``python examples/langgraph_store.py``. The LangMem part needs LangMem
(``pip install 'memdir[langmem]'``); without it, it is skipped and stderr says so.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from memdir import Workspace
from memdir.adapters.langgraph import MemdirStore


class State(TypedDict):
    question: str
    answer: str


def recall(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
    assert runtime.store is not None
    hits = runtime.store.search(("memories", "alice"), query=state["question"], limit=1)
    return {"answer": hits[0].value["content"] if hits else "nothing remembered"}


def main() -> None:
    ws = Workspace(tempfile.mkdtemp(prefix="memdir-langgraph-"))
    # Label 1 of ("memories", "<user>") names the memdir namespace: ns/<user>/ in the workspace.
    store = MemdirStore(ws, namespace_label=1)
    store.put(("memories", "alice"), "m1", {"content": "Alice prefers dark mode", "score": 3})
    store.put(("memories", "alice"), "m2", {"content": "我们讨论了数据库迁移方案", "score": 9})
    store.put(("memories", "bob"), "m1", {"content": "Bob prefers light mode", "score": 5})

    print(f"workspace: {ws.root}")
    for path in sorted((ws.root / "ns").rglob("*.json")):
        print("  item file:", path.relative_to(ws.root))
    print(
        "search 'dark mode':",
        [h.value["content"] for h in store.search(("memories",), query="dark mode")],
    )
    print("search '迁移':", [h.value["content"] for h in store.search(("memories",), query="迁移")])
    print(
        "filter score > 4:",
        [h.key for h in store.search(("memories",), filter={"score": {"$gt": 4}})],
    )
    print("namespaces:", store.list_namespaces())

    builder = StateGraph(State)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    graph = builder.compile(store=store)
    print("graph:", graph.invoke({"question": "which display mode", "answer": ""})["answer"])

    try:
        from langmem import create_manage_memory_tool, create_search_memory_tool
    except ImportError:
        print(
            "LangMem part skipped: langmem is not installed "
            "(pip install 'memdir[langmem]', or pip install langmem)",
            file=sys.stderr,
        )
        return
    manage = create_manage_memory_tool(namespace=("memories", "carol"), store=store)
    search = create_search_memory_tool(namespace=("memories", "carol"), store=store)
    print("langmem:", manage.invoke({"content": "Carol's cat is called 小白"}))
    print("langmem search:", search.invoke({"query": "小白"})[:120], "...")


if __name__ == "__main__":
    main()
