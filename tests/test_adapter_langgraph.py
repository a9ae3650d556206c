"""MemdirStore: LangGraph's BaseStore contract on a workspace, LangGraph graphs and LangMem.

Every test runs on both stores: a directory, and a PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from memdir.adapters.langgraph import MemdirStore, StoreInputError
from memdir.workspace import Workspace


@pytest.fixture
def ws(any_ws: Workspace) -> Workspace:
    return any_ws


@pytest.fixture
def store(ws: Workspace) -> Iterator[MemdirStore]:
    opened = MemdirStore(ws)
    yield opened
    opened.close()


def keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


def test_put_get_update_delete(store: MemdirStore, ws: Workspace, clock: Any) -> None:
    store.put(("users", "alice"), "prefs", {"theme": "dark", "size": 12})
    item = store.get(("users", "alice"), "prefs")
    assert item is not None and item.value == {"theme": "dark", "size": 12}
    assert item.namespace == ("users", "alice") and item.created_at == item.updated_at
    assert json.loads(ws.read_text("store/users/alice/prefs.json"))["value"]["theme"] == "dark"
    clock.instant += timedelta(hours=1)
    store.put(("users", "alice"), "prefs", {"theme": "light"})
    updated = store.get(("users", "alice"), "prefs")
    assert updated is not None and updated.value == {"theme": "light"}
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    assert store.get(("users", "bob"), "prefs") is None
    store.delete(("users", "alice"), "prefs")
    store.delete(("users", "alice"), "never-there")
    assert store.get(("users", "alice"), "prefs") is None
    assert store.search(("users",), query="light") == []


def test_items_survive_a_new_store_on_the_same_workspace(ws: Workspace) -> None:
    MemdirStore(ws).put(("docs",), "d1", {"text": "the deploy runbook"})
    again = MemdirStore(ws.namespaced(None, create=False))
    assert again.get(("docs",), "d1") is not None
    assert keys(again.search(("docs",), query="runbook")) == ["d1"]


def test_search_is_ranked_and_finds_chinese(store: MemdirStore) -> None:
    store.put(("m", "u1"), "a", {"content": "prefers dark mode in every editor"})
    store.put(("m", "u1"), "b", {"content": "dark chocolate, not milk"})
    store.put(("m", "u1"), "c", {"content": "我们讨论了数据库迁移方案"})
    store.put(("m", "u2"), "d", {"content": "dark mode everywhere please"})
    hits = store.search(("m", "u1"), query="dark mode")
    assert keys(hits)[0] == "a" and "d" not in keys(hits)
    assert all(h.score is not None for h in hits) and hits[0].score >= hits[-1].score
    assert keys(store.search(("m",), query="数据库迁移")) == ["c"]
    assert keys(store.search(("m",), query="迁移")) == ["c"]
    assert set(keys(store.search(("m",), query="dark mode"))) == {"a", "b", "d"}
    assert keys(store.search(("m",), query="dark mode", limit=1, offset=1)) != keys(
        store.search(("m",), query="dark mode", limit=1)
    )
    assert store.search(("m",), query="quarterly revenue") == []


def test_search_without_query_lists_newest_first(store: MemdirStore, clock: Any) -> None:
    for i in range(5):
        clock.instant += timedelta(minutes=1)
        store.put(("notes",), f"n{i}", {"i": i})
    store.put(("other",), "x", {"i": 9})
    assert keys(store.search(("notes",))) == ["n4", "n3", "n2", "n1", "n0"]
    assert keys(store.search(("notes",), limit=2, offset=1)) == ["n3", "n2"]
    assert set(keys(store.search(()))) == {"n0", "n1", "n2", "n3", "n4", "x"}


FILTER_ITEMS = {
    "a": {"n": 1, "kind": "fact", "ok": True, "tags": ["x", "y"], "meta": {"src": "chat", "v": 1}},
    "b": {"n": 10, "kind": "fact", "ok": False, "tags": ["x"], "meta": {"src": "api"}},
    "c": {"n": 9.5, "kind": "rule", "ok": True, "tags": [], "meta": None},
    "d": {"kind": "rule", "label": "beta"},
    "e": {"n": 2, "kind": "fact", "label": "alpha"},
}


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"kind": "fact"}, {"a", "b", "e"}),
        ({"kind": {"$eq": "rule"}}, {"c", "d"}),
        ({"kind": {"$ne": "fact"}}, {"c", "d"}),
        ({"n": {"$gt": 2}}, {"b", "c"}),  # numbers as numbers: 10 > 2 (PostgresStore: text)
        ({"n": {"$gte": 2}}, {"b", "c", "e"}),
        ({"n": {"$lt": 9.5}}, {"a", "e"}),
        ({"n": {"$lte": 9.5}}, {"a", "c", "e"}),
        ({"n": {"$gt": 1, "$lt": 10}}, {"c", "e"}),
        ({"n": {"$ne": 1}}, {"b", "c", "e"}),  # a missing key matches nothing, $ne included
        ({"n": 1.0}, {"a"}),
        ({"ok": True}, {"a", "c"}),
        ({"ok": 1}, set()),  # JSON: true is not 1
        ({"n": {"$gt": "1"}}, set()),  # a number against a string matches nothing
        ({"label": {"$gte": "alpha", "$lt": "beta"}}, {"e"}),
        ({"tags": ["x"]}, {"b"}),
        ({"meta": {"src": "chat"}}, {"a"}),
        ({"meta": None}, {"c"}),
        ({"kind": "fact", "n": {"$lte": 2}}, {"a", "e"}),
    ],
)
def test_filter_operators(store: MemdirStore, filter: dict[str, Any], expected: set[str]) -> None:
    for key, value in FILTER_ITEMS.items():
        store.put(("f",), key, value)
    assert set(keys(store.search(("f",), filter=filter))) == expected
    if all(isinstance(k, str) for k in expected):  # with a query the filter applies the same
        store.put(("f",), "q", {"kind": "other", "text": "needle"})
        assert set(keys(store.search(("f",), query="needle", filter=filter))) <= expected | {"q"}


def test_filters_agree_with_langgraphs_in_memory_store(store: MemdirStore) -> None:
    reference = InMemoryStore()  # it fails on a missing key for $gt: every item has "n" here
    for key, value in FILTER_ITEMS.items():
        if "n" in value:
            store.put(("f",), key, value)
            reference.put(("f",), key, value)
    for filter in (
        {"kind": "fact"},
        {"kind": {"$eq": "rule"}},
        {"n": {"$gt": 2}},
        {"n": {"$gte": 2, "$lte": 9.5}},
        {"meta": {"src": "chat"}},
        {"tags": ["x"]},
    ):
        assert set(keys(store.search(("f",), filter=filter))) == set(
            keys(reference.search(("f",), filter=filter))
        ), filter


def test_bad_filters_and_arguments_are_refused(store: MemdirStore) -> None:
    store.put(("f",), "a", {"n": 1})
    with pytest.raises(StoreInputError, match=r"unsupported filter operator '\$in'"):
        store.search(("f",), filter={"n": {"$in": [1]}})
    with pytest.raises(ValueError, match="mixes operators"):
        store.search(("f",), filter={"n": {"$gt": 0, "x": 1}})
    with pytest.raises(StoreInputError, match="limit"):
        store.search(("f",), limit=-1)
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("",), "k", {})])
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {})
    with pytest.raises(NotImplementedError):
        store.put(("a",), "k", {}, ttl=5)
    with pytest.raises(StoreInputError, match="not JSON"):
        store.put(("a",), "k", {"x": object()})
    assert store.get(("a",), "k") is None


def test_list_namespaces(store: MemdirStore) -> None:
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z",), ("z", "b", "c")]:
        store.put(namespace, "k", {"v": 1})
    assert store.list_namespaces() == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "x"),
        ("z",),
        ("z", "b", "c"),
    ]
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "x")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("z", "b", "c"),
    ]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z",), ("z", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]
    store.delete(("a", "x"), "k")
    assert ("a", "x") not in store.list_namespaces()
    reference = InMemoryStore()
    for namespace in store.list_namespaces():
        reference.put(namespace, "k", {"v": 1})
    for kwargs in ({"prefix": ("a",)}, {"suffix": ("c",)}, {"max_depth": 1}, {"prefix": ("*",)}):
        assert store.list_namespaces(**kwargs) == reference.list_namespaces(**kwargs)


def test_batch_reads_see_the_store_before_its_writes(store: MemdirStore) -> None:
    store.put(("b",), "k", {"v": 0})
    results = store.batch(
        [
            PutOp(("b",), "k", {"v": 1}),
            GetOp(("b",), "k"),
            PutOp(("b",), "k", {"v": 2}),
            SearchOp(("b",)),
            ListNamespacesOp(),
            PutOp(("b",), "gone", None),
        ]
    )
    assert results[0] is None and results[1].value == {"v": 0}
    assert [i.value for i in results[3]] == [{"v": 0}] and results[4] == [("b",)]
    assert store.get(("b",), "k").value == {"v": 2}


def test_index_false_and_index_fields(store: MemdirStore) -> None:
    store.put(("d",), "hidden", {"text": "secret launch codename"}, index=False)
    store.put(
        ("d",), "titled", {"title": "launch plan", "body": "codename unicorn"}, index=["title"]
    )
    assert store.search(("d",), query="codename") == []
    assert keys(store.search(("d",), query="launch")) == ["titled"]
    assert set(keys(store.search(("d",)))) == {"hidden", "titled"}
    restricted = MemdirStore(store.workspace, fields=["body"])
    restricted.put(("e",), "x", {"title": "alpha", "body": "omega"})
    assert keys(restricted.search(("e",), query="omega")) == ["x"]
    assert restricted.search(("e",), query="alpha") == []


@pytest.mark.parametrize(
    "key", ["a/b", "..", ".hidden", "", "with space ", "#x%y", "键值", "k" * 300, "a\nb", "\udc80"]
)
def test_any_key_round_trips_and_stays_inside_the_store(
    store: MemdirStore, ws: Workspace, key: str
) -> None:
    namespace = ("用户", "u 1", "x/y")
    store.put(namespace, key, {"text": "findable value"})
    item = store.get(namespace, key)
    assert item is not None and item.key == key and item.namespace == namespace
    assert keys(store.search(namespace, query="findable")) == [key]
    assert store.list_namespaces() == [namespace]
    files = [rel for rel, _ in ws.walk("")]
    items = [f for f in files if f.endswith(".json") and not f.startswith(".index/")]
    assert len(items) == 1 and items[0].startswith("store/")
    store.delete(namespace, key)
    assert store.get(namespace, key) is None


def test_async_methods(store: MemdirStore) -> None:
    async def run() -> None:
        await asyncio.gather(*(store.aput(("as",), f"k{i}", {"t": f"note {i}"}) for i in range(8)))
        assert (await store.aget(("as",), "k3")).value == {"t": "note 3"}
        assert len(await store.asearch(("as",), query="note", limit=20)) == 8
        assert await store.alist_namespaces() == [("as",)]
        await store.adelete(("as",), "k3")
        assert await store.aget(("as",), "k3") is None

    asyncio.run(run())


def test_namespace_label_puts_each_user_in_a_memdir_namespace(ws: Workspace) -> None:
    store = MemdirStore(ws, namespace_label=1)
    store.put(("memories", "alice"), "m1", {"content": "alice likes tea"})
    store.put(("memories", "bob"), "m1", {"content": "bob likes tea too"})
    store.put(("global",), "g", {"content": "office closes at six"})
    assert ws.namespaced("alice").stat("store/memories/alice/m1.json") is not None
    assert ws.namespaced("bob").stat("store/memories/bob/m1.json") is not None
    assert ws.stat("store/global/g.json") is not None
    assert ws.stat("store/memories/alice/m1.json") is None
    assert {"alice", "bob"} <= set(ws.namespaces())
    assert keys(store.search(("memories", "alice"), query="tea")) == ["m1"]
    assert len(store.search(("memories",), query="tea")) == 2
    assert store.list_namespaces() == [("global",), ("memories", "alice"), ("memories", "bob")]
    assert store.get(("memories", "alice"), "m1").value == {"content": "alice likes tea"}
    # A user id that is no namespace name is hashed, as memdir.namespace_for does.
    store.put(("memories", "Carol@Example"), "m", {"content": "x"})
    assert store.list_namespaces(prefix=("memories", "Carol@Example")) == [
        ("memories", "Carol@Example")
    ]


def test_reindex_rebuilds_search_from_the_item_files(store: MemdirStore, ws: Workspace) -> None:
    store.put(("r",), "a", {"text": "kubernetes upgrade"})
    record = json.loads(ws.read_text("store/r/a.json"))
    record["value"] = {"text": "postgres failover"}
    ws.write_text("store/r/a.json", json.dumps(record))  # edited by hand
    assert store.reindex() == 1
    assert keys(store.search(("r",), query="failover")) == ["a"]
    assert store.search(("r",), query="kubernetes") == []


class _State(TypedDict):
    topic: str
    found: list[str]


def test_a_langgraph_graph_uses_it_as_its_store(ws: Workspace) -> None:
    from langgraph.runtime import Runtime

    def remember(state: _State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put(("graph",), state["topic"], {"text": f"note on {state['topic']}"})
        hits = runtime.store.search(("graph",), query=state["topic"])
        return {"found": [h.key for h in hits]}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    graph = builder.compile(store=MemdirStore(ws))
    assert graph.invoke({"topic": "billing", "found": []})["found"] == ["billing"]
    assert ws.stat("store/graph/billing.json") is not None


class _ToolChat(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> _ToolChat:  # type: ignore[override]
        return self


def test_langmem_memory_tools_run_on_it_unchanged(ws: Workspace) -> None:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    store = MemdirStore(ws, namespace_label=1)
    namespace = ("memories", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace=namespace), create_search_memory_tool(namespace)]
    model = _ToolChat(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "manage_memory",
                            "id": "t1",
                            "args": {"content": "User's cat is called 小白", "action": "create"},
                        }
                    ],
                ),
                AIMessage(
                    "", tool_calls=[{"name": "search_memory", "id": "t2", "args": {"query": "cat"}}]
                ),
                AIMessage("Your cat is 小白."),
            ]
        )
    )
    agent = create_agent(model, tools=tools, store=store)
    state = agent.invoke(
        {"messages": [HumanMessage("My cat is called 小白.")]},
        {"configurable": {"langgraph_user_id": "alice"}},
    )
    (item,) = store.search(("memories", "alice"))
    assert item.value == {"content": "User's cat is called 小白"}
    assert ws.namespaced("alice").stat(f"store/memories/alice/{item.key}.json") is not None
    found = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert json.loads(found.content)[0]["value"]["content"] == "User's cat is called 小白"
    assert keys(store.search(("memories", "alice"), query="小白")) == [item.key]


def test_stores_on_two_namespaces_never_share_items_or_search(ws: Workspace) -> None:
    alice, bob = MemdirStore(ws.namespaced("alice")), MemdirStore(ws.namespaced("bob"))
    alice.put(("notes",), "n", {"text": "alice's locker code is 4521"})
    bob.put(("notes",), "n", {"text": "bob parks on level three"})
    assert keys(alice.search(("notes",), query="locker")) == ["n"]
    assert bob.search(("notes",), query="locker") == []
    assert keys(bob.search(("notes",), query="parks")) == ["n"]
    assert bob.reindex() == 1
    assert keys(alice.search(("notes",), query="locker")) == ["n"]
    assert MemdirStore(ws).get(("notes",), "n") is None
