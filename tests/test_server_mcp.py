"""MCP over streamable HTTP at ``/mcp`` of a real ``memdir serve`` process, through the real
``mcp`` client, on each store: the same keys as the REST API (the SDK's 401 without a valid
one), tools bound to the key's tenant and namespace, read keys without ``memory_add``, the
namespace checked before anything is read, tool answers equal to :mod:`memdir.tools` on the
same store, and the binding of each request kept apart under 32 concurrent clients."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from _server import (
    Served,
    create_key,
    expired_key,
    fresh_namespace,
    memdir,
    spied_app,
    wait_for,
)
from memdir.server.app import create_app
from memdir.server.auth import Scope, mint_key, open_key_store
from memdir.server.settings import ServerSettings
from memdir.tools import (
    memory_get,
    memory_search,
    session_history,
    session_list,
    session_search,
)
from memdir.tools._core import close_shared_indexes
from memdir.workspace import Workspace

pytest.importorskip("mcp")
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

TIMEOUT = 120
READ_TOOLS = {
    "memory_search",
    "memory_get",
    "memory_why",
    "session_search",
    "session_list",
    "session_history",
}
ALL_TOOLS = READ_TOOLS | {"memory_add"}
FACTS = [
    "Wang Lei prefers PostgreSQL 16 for the billing service",
    "The staging cluster moved to Frankfurt on 2026-03-02",
    "数据库迁移在周五晚上进行，负责人是王磊",
]


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


def _url(served: Served, namespace: str | None) -> str:
    query = "" if namespace is None else f"?namespace={namespace}"
    return f"{served.server.url}/mcp{query}"


@contextlib.asynccontextmanager
async def connect(
    served: Served,
    key: str | None,
    namespace: str | None = None,
    *,
    answers: list[httpx2.Response] | None = None,
) -> AsyncIterator[Client]:
    """The real MCP client on ``/mcp`` with ``key`` as bearer (each HTTP answer kept in
    ``answers``)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}

    async def keep(response: httpx2.Response) -> None:
        if answers is not None:
            await response.aread()
            answers.append(response)

    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"response": [keep]}) as http,
        Client(streamable_http_client(_url(served, namespace), http_client=http)) as client,
    ):
        yield client


async def refused(served: Served, key: str | None, namespace: str | None) -> list[httpx2.Response]:
    """Connect with the real client, which must fail; the HTTP answers it got."""
    answers: list[httpx2.Response] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(Exception):  # noqa: B017
        async with connect(served, key, namespace, answers=answers) as client:
            await client.list_tools()
    assert answers
    return answers


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


def _sdk_401(answers: list[httpx2.Response]) -> None:
    for answer in answers:
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert answer.json()["error"] == "invalid_token"


# -- authentication ----------------------------------------------------------------------


async def test_no_key_and_bad_keys_get_the_sdks_401(served: Served) -> None:
    real = served.keys.secrets["acme_write"]
    key_id = served.keys.ids["acme_write"]
    bad = [None, "nope", f"mdk_{key_id}_{'A' * 43}", f"mdk_{'b' * 16}_{'C' * 43}", real + "x"]
    for key in bad:
        _sdk_401(await refused(served, key, "acme.alice"))
    with anyio.fail_after(TIMEOUT):  # the same request with the real key is served
        async with connect(served, real, "acme.alice") as client:
            assert {t.name for t in (await client.list_tools()).tools} == ALL_TOOLS


async def test_a_key_revoked_while_the_server_runs_is_refused(served: Served) -> None:
    made = create_key(served.workspace, "acme", "write", "--label", "soon revoked")
    answers: list[httpx2.Response] = []
    with anyio.fail_after(TIMEOUT):
        async with connect(served, made["key"], fresh_namespace(), answers=answers) as client:
            assert not (await client.call_tool("memory_add", {"text": "before"})).is_error
            memdir("keys", "revoke", "-w", served.workspace, made["key_id"])
            # The same open client: each request is authenticated again (within ~2 s).
            deadline = time.monotonic() + 60
            while True:
                try:
                    await client.call_tool("memory_search", {"query": "before"})
                except Exception:
                    break
                assert time.monotonic() < deadline, "the revoked key was still served"
                await anyio.sleep(0.1)
    _sdk_401([answers[-1]])
    _sdk_401(await refused(served, made["key"], "acme.alice"))


async def test_an_expired_key_is_refused(served: Served) -> None:
    made = expired_key(served)
    with anyio.fail_after(TIMEOUT):
        while True:  # the server reads the key store again within about a second
            answers: list[httpx2.Response] = []
            with contextlib.suppress(Exception):
                async with connect(served, made["key"], "acme.alice", answers=answers) as c:
                    await c.list_tools()
            if answers[-1].status_code == 401:
                break
            await anyio.sleep(0.1)
    _sdk_401(answers[-1:])


async def test_only_post_is_served_no_stream_no_session(served: Served) -> None:
    url = _url(served, "acme.alice")
    sse = {"Accept": "text/event-stream"}
    async with httpx.AsyncClient(timeout=60) as http:
        for method in ("GET", "DELETE", "PUT"):
            # Without the refusal the SDK holds a GET open with nothing ever sent on it: the
            # bound fails the test then.
            with anyio.fail_after(30):
                response = await http.request(
                    method, url, headers={**served.keys.headers("alice_only"), **sse}
                )
                anonymous = await http.request(method, url, headers=sse)
            assert response.status_code == 405, (method, response.text)
            assert response.headers["allow"] == "POST"
            assert response.json()["code"] == "method-not-allowed"
            assert anonymous.status_code == 401  # the key is checked first


# -- scopes and reach --------------------------------------------------------------------


async def test_a_read_key_gets_the_read_tools_and_cannot_write(served: Served) -> None:
    ns = fresh_namespace()
    with anyio.fail_after(TIMEOUT):
        async with connect(served, served.keys.secrets["acme_write"], ns) as writer:
            assert not (await writer.call_tool("memory_add", {"text": "reader canary"})).is_error
        async with connect(served, served.keys.secrets["acme_read"], ns) as reader:
            assert {t.name for t in (await reader.list_tools()).tools} == READ_TOOLS
            found = await reader.call_tool("memory_search", {"query": "reader canary"})
            added = await reader.call_tool("memory_add", {"text": "written by a reader"})
        for key in ("acme_write", "acme_admin"):
            async with connect(served, served.keys.secrets[key], ns) as client:
                assert {t.name for t in (await client.list_tools()).tools} == ALL_TOOLS
    assert "reader canary" in text_of(found)
    assert added.is_error
    assert "written by a reader" not in "".join(
        served.local(ns).read_text(rel) for _, rel in served.local(ns).ledgers()
    )


async def test_a_bound_key_reaches_only_its_namespace(served: Served) -> None:
    alice = served.keys.secrets["alice_only"]
    canary = f"alice canary {uuid.uuid4().hex[:8]}"
    with anyio.fail_after(TIMEOUT):
        async with connect(served, alice) as client:  # no ?namespace=: the key's own
            assert not (await client.call_tool("memory_add", {"text": canary})).is_error
        async with connect(served, alice, "acme.alice") as client:  # named: the same
            found = await client.call_tool("memory_search", {"query": canary})
        for other in ("acme.bob", "beta.alice"):
            answers = await refused(served, alice, other)
            assert answers[-1].status_code == 404
            assert answers[-1].json()["code"] == "namespace-not-found"
        team1 = served.keys.secrets["team1"]
        async with connect(served, team1, "acme.team1.x") as client:
            assert not (await client.call_tool("memory_add", {"text": "team1"})).is_error
        for outside in ("acme.team10.x", "acme.team1", "acme.x"):
            assert (await refused(served, team1, outside))[-1].status_code == 404
        # A key of many namespaces must name one.
        missing = (await refused(served, served.keys.secrets["acme_write"], None))[-1]
    assert canary in text_of(found)
    assert canary in memory_search(canary, workspace=served.local("acme.alice"))
    assert (missing.status_code, missing.json()["code"]) == (422, "invalid-input")
    assert "/mcp?namespace=acme.NAME" in missing.json()["detail"]


def _mcp_post(served: Served, key: str, query: str) -> httpx.Response:
    """A raw MCP request with the query string exactly as given."""
    return httpx.post(
        f"{served.server.url}/mcp?{query}",
        headers={
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        timeout=60,
    )


# In a query string, a slash arrives decoded: a name with one can never exist (422).
HOSTILE_422 = ["..", "%2e%2e", ".", "%00", "a%00b", "ACME.x", ".acme", "acme.%0a", "x" * 10_000,
               "", "a%2Fb", "acme.x%2F..%2F..%2Fbeta.y"]  # fmt: skip
HOSTILE_404 = ["acme", "acme.", "acmex.y", "beta.y", "beta.x.y"]


async def test_another_tenants_namespace_is_refused_without_reading_it(served: Served) -> None:
    theirs, absent = fresh_namespace("beta"), fresh_namespace("beta")
    canary = f"beta canary {uuid.uuid4().hex[:8]}"
    with anyio.fail_after(TIMEOUT):
        async with connect(served, served.keys.secrets["beta_write"], theirs) as beta:
            assert not (await beta.call_tool("memory_add", {"text": canary})).is_error
        existing = (await refused(served, served.keys.secrets["acme_admin"], theirs))[-1]
        missing = (await refused(served, served.keys.secrets["acme_admin"], absent))[-1]
    # The same answer whether the other tenant's namespace exists or not: nothing leaks.
    first, second = existing.json(), missing.json()
    assert existing.status_code == missing.status_code == 404
    assert existing.headers["content-type"] == "application/problem+json"
    assert first["detail"].replace(theirs, "NS") == second["detail"].replace(absent, "NS")
    assert {k: v for k, v in first.items() if k not in ("detail", "request_id")} == {
        k: v for k, v in second.items() if k not in ("detail", "request_id")
    }
    assert first["code"] == "namespace-not-found" and canary not in existing.text
    # The REST API answers an out-of-reach namespace with the same problem.
    with served.client("acme_admin") as rest:
        problem = rest.get(f"/v1/namespaces/{theirs}/search", params={"q": "x"}).json()
    assert problem["detail"] == first["detail"] and problem["code"] == first["code"]
    before = Workspace(served.workspace, create=False).namespaces()
    key = served.keys.secrets["acme_admin"]
    for raw in HOSTILE_422 + HOSTILE_404:
        response = _mcp_post(served, key, f"namespace={raw}")
        expected = (422, "invalid-input") if raw in HOSTILE_422 else (404, "namespace-not-found")
        assert (response.status_code, response.json()["code"]) == expected, (raw, response.text)
    twice = _mcp_post(served, key, "namespace=acme.a&namespace=beta.b")
    assert (twice.status_code, twice.json()["code"]) == (422, "invalid-input")
    assert Workspace(served.workspace, create=False).namespaces() == before


async def test_no_tool_argument_widens_the_namespace(served: Served) -> None:
    ns, theirs = fresh_namespace(), fresh_namespace("beta")
    with anyio.fail_after(TIMEOUT):
        async with connect(served, served.keys.secrets["beta_write"], theirs) as beta:
            assert not (
                await beta.call_tool("memory_add", {"text": "beta widening canary"})
            ).is_error
        async with connect(served, served.keys.secrets["acme_admin"], ns) as acme:
            await acme.call_tool("memory_add", {"text": "acme widening note"})
            widen = {"namespace": theirs, "workspace": served.workspace, "ns": theirs}
            results = [
                await acme.call_tool("memory_search", {"query": "widening", **widen}),
                await acme.call_tool("session_list", widen),
                await acme.call_tool("memory_get", {"path": "MEMORY.md", **widen}),
            ]
    assert "acme widening note" in text_of(results[0])
    for result in results:
        assert "beta" not in text_of(result)


async def test_a_refused_namespace_never_reaches_the_store(tmp_path: Path) -> None:
    """The endpoint refuses before NamespacePool.get (in-process, the same application)."""
    app, key, calls = spied_app(tmp_path)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_search", "arguments": {"query": "x"}},
    }
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    statuses = []
    async with (
        app.state.mcp.running(),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client,
    ):
        for name in ("%2e%2e", "%00", "beta.x", "acme", "x" * 10_000, "ACME.x", "acme.ok"):
            response = await client.post(f"/mcp?namespace={name}", json=body, headers=headers)
            statuses.append(response.status_code)
    assert statuses == [422, 422, 404, 404, 422, 422, 200]
    assert calls == ["acme.ok"]  # only the allowed one was looked up (the spy sees lookups)


# -- the tools ---------------------------------------------------------------------------


async def test_add_then_search_and_every_answer_is_the_librarys(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as rest:
        messages = [
            {"role": "user", "content": "Which region hosts staging?", "id": "m1"},
            {"role": "assistant", "content": "Staging runs in Frankfurt now.", "id": "m2"},
        ]
        response = rest.post(
            f"/v1/namespaces/{ns}/sessions/s1/messages", json={"messages": messages}
        )
        assert response.status_code == 201, response.text
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_search", {"query": "PostgreSQL billing", "max_results": 5}),
        ("memory_search", {"query": "数据库迁移"}),
        ("memory_get", {"path": "MEMORY.md"}),
        ("session_search", {"query": "Frankfurt"}),
        ("session_list", {}),
        ("session_history", {"session_id": "s1"}),
    ]
    with anyio.fail_after(TIMEOUT):
        async with connect(served, served.keys.secrets["acme_write"], ns) as client:
            added = [await client.call_tool("memory_add", {"text": fact}) for fact in FACTS]
            citation = text_of(added[0]).removeprefix("Saved 1 bullet to ").removesuffix(".")
            calls.append(("memory_get", {"path": citation}))
            served_answers = [await client.call_tool(name, args) for name, args in calls]
    assert all(not result.is_error for result in added + served_answers)
    ws = served.local(ns)
    functions = {
        "memory_search": memory_search,
        "memory_get": memory_get,
        "session_search": session_search,
        "session_list": session_list,
        "session_history": session_history,
    }
    for (name, args), result in zip(calls, served_answers, strict=True):
        assert text_of(result) == functions[name](**args, workspace=ws), name
    assert FACTS[0] in text_of(served_answers[0])
    assert FACTS[2] in text_of(served_answers[1])
    assert FACTS[0] in text_of(served_answers[-1])


async def test_a_lone_surrogate_is_repaired_not_refused(served: Served) -> None:
    ns = fresh_namespace()
    body = (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "memory_add",'
        ' "arguments": {"text": "half an emoji \\ud83d here"}}}'
    )
    response = httpx.post(
        _url(served, ns),
        content=body.encode("ascii"),
        headers={
            **served.keys.headers("acme_write"),
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=60,
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] == 7 and answer["result"]["isError"] is False
    assert "half an emoji \ufffd here" in memory_search("emoji", workspace=served.local(ns))


async def test_the_access_log_holds_no_key_text_or_namespace(served: Served) -> None:
    ns = fresh_namespace()
    canary = f"logcanary{uuid.uuid4().hex[:8]}"
    with anyio.fail_after(TIMEOUT):
        async with connect(served, served.keys.secrets["acme_write"], ns) as client:
            await client.call_tool("memory_add", {"text": canary})
            await client.call_tool("memory_search", {"query": canary})
    lines = [line for line in served.server.access_log() if line["route"] == "/mcp"]
    assert any(line["tenant"] == "acme" and "ns_hash" in line for line in lines)
    text = json.dumps(lines)
    for secret in (canary, ns, served.keys.secrets["acme_write"]):
        assert secret not in text


# -- concurrency -------------------------------------------------------------------------

CLIENTS = 32


def _many_keys(served: Served) -> list[tuple[str, str | None, str]]:
    """32 write keys of 8 tenants made in the store: (key, ?namespace= or None, namespace);
    half reach one namespace (bound), half a tenant's every namespace (named in the URL)."""
    store = open_key_store(Workspace(served.workspace, create=False))
    made = []
    for i in range(CLIENTS):
        tenant = f"conc{i % 8}"
        ns = f"{tenant}.u{i}"
        bound = i < CLIENTS // 2
        key, record = mint_key(
            tenant=tenant, scope=Scope.WRITE, now=datetime.now(UTC), namespace=ns if bound else None
        )
        store.add(record)
        made.append((key, None if bound else ns, ns))
    last = made[-1][0]
    wait_for(
        lambda: (
            httpx.get(
                f"{served.server.url}/v1/whoami", headers={"Authorization": f"Bearer {last}"}
            ).status_code
            == 200
        ),
        "the server to read the new keys",
    )
    return made


async def test_32_concurrent_clients_each_find_only_their_own_canary(served: Served) -> None:
    made = _many_keys(served)
    canaries = [f"zebracanary tok{uuid.uuid4().hex[:10]}" for _ in made]
    ready = asyncio.Event()
    arrived = 0

    async def one(i: int) -> list[str]:
        nonlocal arrived
        key, query_ns, _ = made[i]
        seen = []
        async with connect(served, key, query_ns) as client:
            assert not (await client.call_tool("memory_add", {"text": canaries[i]})).is_error
            arrived += 1
            if arrived == len(made):
                ready.set()
            await ready.wait()  # every client searches at once
            for _ in range(4):
                result = await client.call_tool("memory_search", {"query": "zebracanary"})
                seen.append(text_of(result))
        return seen

    with anyio.fail_after(TIMEOUT * 2):
        answers = await asyncio.gather(*(one(i) for i in range(len(made))))
    tokens = [canary.split()[1] for canary in canaries]
    for i, seen in enumerate(answers):
        for text in seen:
            assert tokens[i] in text, (i, text)
            others = [t for j, t in enumerate(tokens) if j != i and t in text]
            assert not others, (i, others)
    for (_, _, ns), canary in zip(made, canaries, strict=True):  # landed where it belongs
        assert canary in memory_search("zebracanary", workspace=served.local(ns))


def test_a_tool_call_is_refused_unless_its_binding_and_token_agree(tmp_path: Path) -> None:
    """What every tool asks for its workspace fails closed (in-process, on the real SDK)."""
    from mcp.server.auth.middleware.auth_context import auth_context_var
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.mcpserver.exceptions import ToolError

    from memdir.server.auth import Grant, Principal
    from memdir.server.mcp_http import access_token, bind

    app = create_app(ServerSettings(workspace=str(tmp_path / "ws")))
    workspace = app.state.mcp.workspace

    def principal(key_id: str, scope: Scope) -> Principal:
        grant = Grant(tenant="acme", prefix="acme.")
        return Principal(tenant="acme", key_id=key_id, scope=scope, grant=grant)

    reader, writer = principal("r" * 16, Scope.READ), principal("w" * 16, Scope.WRITE)

    def call(binding: tuple[Principal, str] | None, token_of: Principal | None, write: bool) -> Any:
        user = AuthenticatedUser(access_token("t", token_of)) if token_of else None
        reset = auth_context_var.set(user)
        try:
            with contextlib.ExitStack() as stack:
                if binding is not None:
                    stack.enter_context(bind(*binding))
                return workspace(write)
        finally:
            auth_context_var.reset(reset)

    refusals = [
        ((None, None, False), "not bound to an API key"),
        ((None, writer, False), "not bound to an API key"),
        (((writer, "acme.a"), None, False), "not bound to an API key"),
        (((writer, "acme.a"), reader, False), "not bound to an API key"),  # another key's token
        (((reader, "acme.a"), reader, True), "may only read"),
        (((writer, "beta.a"), writer, True), "no namespace 'beta.a'"),
        (((reader, "acme.a"), reader, False), "no namespace 'acme.a' yet"),
    ]
    for args, message in refusals:
        with pytest.raises(ToolError, match=message):
            call(*args)
    assert not Workspace(str(tmp_path / "ws"), create=False).namespaces()
    opened = call((writer, "acme.a"), writer, True)
    assert opened.namespace == "acme.a" and opened.exists()
    assert call((reader, "acme.a"), reader, False).namespace == "acme.a"
