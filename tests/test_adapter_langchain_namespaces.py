"""One LangChain agent serving many users: MemdirMiddleware takes each run's namespace from the
run (its context or its configurable), on both stores, with the real langchain package."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memdir import namespace_for
from memdir.adapters.langchain import MemdirMiddleware
from memdir.errors import ConfigError
from memdir.memory import MaintenanceConfig
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

THREAD = "support"  # both users talk in a thread of the same name
USERS = {
    "alice": ("ALICE-7781", "Alice drinks tea"),
    "bob": ("BOB-3319", "Bob drinks coffee"),
}


class RoutingChat(BaseChatModel):
    """Answers from the request, so two users' runs can share it: a statement is noted, a
    question is searched in memory, a search result is read back. The first call of each run
    waits at ``barrier`` until the other user's run is there too."""

    barrier: Any = None
    requests: list[list[BaseMessage]] = []  # noqa: RUF012 (pydantic field default, copied)

    @property
    def _llm_type(self) -> str:
        return "routing"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RoutingChat:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        last = messages[-1]
        if isinstance(last, HumanMessage) and self.barrier is not None:
            self.barrier.wait()  # both runs are inside the agent now
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"Found: {last.text}")
        elif "What is my locker code" in last.text:
            call = {"name": "memory_search", "args": {"query": "locker code"}, "id": "search-1"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("Noted.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@dataclass
class Caller:
    user: str


def ledger_text(ws: Workspace) -> str:
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


def log_text(ws: Workspace, session: str) -> str:
    return "\n".join(m.text for m in SessionLog(ws, session).messages())


# Each way a run can name its user: (namespace_from, how a run is invoked, user -> namespace).
WAYS: dict[str, tuple[Any, Callable[[str], dict[str, Any]], Callable[[str], str]]] = {
    "configurable key": (
        "user_id",
        lambda user: {"config": {"configurable": {"thread_id": THREAD, "user_id": user}}},
        lambda user: user,
    ),
    "context key (a dataclass), ids hashed": (
        "user",
        lambda user: {
            "config": {"configurable": {"thread_id": THREAD}},
            "context": Caller(user=f"{user.title()}@Example.com"),
        },
        lambda user: namespace_for(user_id=f"{user.title()}@Example.com") or "",
    ),
    "function of the runtime": (
        lambda runtime: f"team-{runtime.context.user}",
        lambda user: {"config": {"configurable": {"thread_id": THREAD}}, "context": Caller(user)},
        lambda user: f"team-{user}",
    ),
}


@pytest.mark.parametrize("mode", ["invoke in threads", "ainvoke gathered"])
@pytest.mark.parametrize("way", list(WAYS))
def test_two_users_of_one_agent_keep_their_memory_apart(
    any_ws: Workspace, way: str, mode: str
) -> None:
    namespace_from, how, namespace_of = WAYS[way]
    spaces = {user: any_ws.namespaced(namespace_of(user)) for user in USERS}
    for user, (_, habit) in USERS.items():
        spaces[user].write_text("MEMORY.md", f"# Memory\n- {habit}.\n")
    model = RoutingChat(requests=[])
    middleware = MemdirMiddleware(any_ws, namespace_from=namespace_from)
    agent = create_agent(model, middleware=[middleware], context_schema=Caller)

    def both(text: Callable[[str], str]) -> dict[str, str]:
        """Both users' runs at once; the last message of each."""
        model.barrier = threading.Barrier(2, timeout=120)
        if mode == "invoke in threads":

            def one(user: str) -> str:
                kwargs = how(user)
                state = agent.invoke({"messages": [HumanMessage(text(user))]}, **kwargs)
                return str(state["messages"][-1].text)

            with ThreadPoolExecutor(2) as pool:
                return dict(zip(USERS, pool.map(one, USERS), strict=True))

        async def gathered() -> list[str]:
            states = await asyncio.gather(
                *(
                    agent.ainvoke({"messages": [HumanMessage(text(user))]}, **how(user))
                    for user in USERS
                )
            )
            return [str(state["messages"][-1].text) for state in states]

        return dict(zip(USERS, asyncio.run(gathered()), strict=True))

    both(lambda user: f"I am {user.title()}. Remember that my locker code is {USERS[user][0]}.")
    assert middleware.drain()  # the flushes after the answers
    answers = both(lambda user: "What is my locker code?")
    assert middleware.close()

    for user, (code, habit) in USERS.items():
        other = next(u for u in USERS if u != user)
        other_code, other_habit = USERS[other]
        ws = spaces[user]
        # memory_search found this user's ledger line, and only theirs
        assert code in answers[user] and other_code not in answers[user]
        # the ledger and the session log of the namespace hold this user's text only
        ledger, log = ledger_text(ws), log_text(ws, THREAD)
        assert code in ledger and other_code not in ledger
        assert f"I am {user.title()}" in log and code in log
        assert other.title() not in log and other_code not in log
        # each model call saw this user's MEMORY.md, never the other's
        prompts = [
            r[0].text
            for r in model.requests
            if isinstance(r[0], SystemMessage) and any(user.title() in m.text for m in r)
        ]
        assert len(prompts) == 3  # the statement, the question, the search result
        assert all(habit in p and other_habit not in p for p in prompts)
    # nothing reached the workspace root, nor a third namespace
    assert ledger_text(any_ws) == "" and SessionLog(any_ws, THREAD).messages() == []
    assert sorted(any_ws.namespaces()) == sorted(ws.namespace or "" for ws in spaces.values())


def test_a_run_without_a_user_uses_the_middleware_namespace(ws: Workspace) -> None:
    model = RoutingChat(requests=[])
    middleware = MemdirMiddleware(ws, namespace="shared", namespace_from="user_id")
    agent = create_agent(model, middleware=[middleware])
    agent.invoke(
        {"messages": [HumanMessage("Remember that the office moved to Lyon.")]},
        {"configurable": {"thread_id": THREAD}},
    )
    assert middleware.close()
    assert "office moved to Lyon" in ledger_text(ws.namespaced("shared"))
    assert ws.namespaces() == ["shared"]


@pytest.mark.parametrize("claimed", ["../alice", "alice/../alice", "ALICE", "ns/alice", "id-x"])
def test_an_id_that_looks_like_a_path_or_another_name_gets_a_namespace_of_its_own(
    ws: Workspace, claimed: str
) -> None:
    alice = ws.namespaced("alice")
    alice.write_text("MEMORY.md", "# Memory\n- Alice's locker code is ALICE-7781.\n")
    model = RoutingChat(requests=[])
    middleware = MemdirMiddleware(ws, namespace_from="user_id")
    agent = create_agent(model, middleware=[middleware])
    agent.invoke(
        {"messages": [HumanMessage("Remember that my locker code is EVE-0001.")]},
        {"configurable": {"thread_id": THREAD, "user_id": claimed}},
    )
    assert middleware.close()
    own = namespace_for(user_id=claimed)
    assert own is not None and own.startswith("id-")
    assert sorted(ws.namespaces()) == sorted(["alice", own])
    assert "EVE-0001" in ledger_text(ws.namespaced(own))
    assert "EVE-0001" not in ledger_text(alice) and "EVE" not in log_text(alice, THREAD)
    system = model.requests[0][0]
    assert isinstance(system, SystemMessage) and "ALICE-7781" not in system.text


@pytest.mark.parametrize(
    ("namespace_from", "config", "message"),
    [
        ("user_id", {"user_id": ""}, "'user_id' .* must be a non-empty string, not an empty"),
        ("user_id", {"user_id": 42}, "must be a non-empty string, not int"),
        (lambda runtime: "", {}, "namespace_from returned an empty namespace"),
        (lambda runtime: "Alice", {}, "invalid namespace 'Alice'"),
        (lambda runtime: "../bob", {}, "invalid namespace"),
    ],
    ids=["empty id", "int id", "empty name", "uppercase name", "path"],
)
def test_a_run_naming_an_invalid_namespace_fails_and_writes_nothing(
    ws: Workspace, namespace_from: Any, config: dict[str, Any], message: str
) -> None:
    middleware = MemdirMiddleware(ws, namespace_from=namespace_from)
    agent = create_agent(RoutingChat(requests=[]), middleware=[middleware])
    with pytest.raises(ConfigError, match=message):
        agent.invoke(
            {"messages": [HumanMessage("Remember that my locker code is 1234.")]},
            {"configurable": {"thread_id": THREAD, **config}},
        )
    assert middleware.close()
    assert ws.namespaces() == [] and ledger_text(ws) == ""
    assert SessionLog(ws, THREAD).messages() == []


def test_bad_namespace_settings_are_config_errors(ws: Workspace) -> None:
    for bad in ("", 3, ("user_id",)):
        with pytest.raises(ConfigError, match="namespace_from must be a key"):
            MemdirMiddleware(ws, namespace_from=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="memdir maintain --all-namespaces"):
        MemdirMiddleware(ws, namespace_from="user_id", maintenance=MaintenanceConfig())
    with pytest.raises(ConfigError, match="must not be empty"):
        MemdirMiddleware(ws, namespace="")


def test_outside_a_run_the_tools_use_the_middleware_namespace(ws: Workspace) -> None:
    middleware = MemdirMiddleware(ws, namespace="shared", namespace_from="user_id")
    add = next(t for t in middleware.tools if t.name == "memory_add")
    assert "Error" not in add.invoke({"text": "The printer is on floor 3."})
    assert "printer is on floor 3" in ledger_text(ws.namespaced("shared"))
