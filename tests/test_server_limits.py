"""Per-tenant fairness and quotas over real HTTP against real server processes, on both
stores: a tenant over its rate or with too many requests in flight gets 429 with
``Retry-After`` while another tenant is served; a write past a storage quota gets 507 naming
the limit and the usage."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from _server import (
    KEYS,
    Keys,
    Served,
    ServerProcess,
    fresh_namespace,
    make_keys,
    pausing,
    serve_store,
    store_workspace,
)
from memdir.server.limits import TenantLimiter
from memdir.workspace import Workspace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    clock = Clock()
    limiter = TenantLimiter(rate=2.0, burst=3, inflight=0, clock=clock)
    assert [limiter.take("acme") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("acme") == pytest.approx(0.5)  # one token in half a second
    assert limiter.take("beta") == 0.0  # a bucket per tenant
    clock.now += 0.5
    assert limiter.take("acme") == 0.0
    clock.now += 60  # a long pause fills the bucket to its burst, no more
    assert [limiter.take("acme") for _ in range(4)][-1] == pytest.approx(0.5)


def test_requests_in_flight_are_counted_per_tenant() -> None:
    limiter = TenantLimiter(rate=0, burst=1, inflight=2)
    assert limiter.enter("acme") and limiter.enter("acme")
    assert not limiter.enter("acme") and limiter.enter("beta")
    limiter.leave("acme")
    assert limiter.enter("acme")


# -- the rate ----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["files", "postgres"])
def rated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    # One token per 1,000 s and a burst of 2: no token comes back during the test.
    yield from serve_store(request, tmp_path_factory, "--rate", "0.001", "--burst", "2")


def test_a_tenant_over_its_rate_is_told_when_to_come_back(rated: Served) -> None:
    with rated.client("acme_read") as acme, rated.client("beta_write") as beta:
        assert [acme.get("/v1/whoami").status_code for _ in range(2)] == [200, 200]
        refused = acme.get("/v1/whoami")
        # the tenant's bucket, whichever of its keys: the write key is refused too
        with rated.client("acme_write") as other_key:
            also = other_key.get("/v1/namespaces")
        served = [beta.get("/v1/whoami").status_code for _ in range(2)]
        anonymous = httpx.get(f"{rated.server.url}/healthz")
    assert refused.status_code == also.status_code == 429
    assert refused.json()["code"] == "rate-limited"
    assert refused.headers["retry-after"] == "1000"
    assert "0.001 requests a second" in refused.json()["detail"]
    assert served == [200, 200] and anonymous.status_code == 200


# -- requests in flight --------------------------------------------------------------------------

FLOOD = 48  # more than the server's 40 worker threads


def test_a_tenants_flood_of_slow_requests_does_not_starve_another(
    served_workspace: str, tmp_path: Path
) -> None:
    workspace = served_workspace
    keys = make_keys(workspace, KEYS)
    paused = tmp_path / "paused"
    slow_adds = pausing("add:after-append", paused)  # every add waits until the kill
    server = ServerProcess(
        workspace, "--rate", "0", "--inflight-per-tenant", "4", env=slow_adds
    ).start()
    answers: list[int] = []
    done = threading.Condition()

    def flood(ns: str) -> None:
        try:
            with server.client(keys.secrets["acme_write"]) as client:
                status = client.post(
                    f"/v1/namespaces/{ns}/memories", json={"text": "x"}
                ).status_code
        except httpx.TransportError:
            status = 0  # still held when the server was killed
        with done:
            answers.append(status)
            done.notify_all()

    ns = fresh_namespace()
    flooders = [threading.Thread(target=flood, args=(ns,)) for _ in range(FLOOD)]
    try:
        for thread in flooders:
            thread.start()
        with done:  # every request past the 4 held is refused at once
            assert done.wait_for(lambda: len(answers) >= FLOOD - 4, timeout=120), answers
        assert answers.count(429) == FLOOD - 4
        assert paused.exists()
        with httpx.Client(base_url=server.url, headers=keys.headers("beta_write"), timeout=30) as b:
            beta_ns = fresh_namespace("beta")
            chat = {"messages": [{"role": "user", "content": "still served", "id": "m1"}]}
            logged = b.post(f"/v1/namespaces/{beta_ns}/sessions/s1/messages", json=chat)
            found = b.get(f"/v1/namespaces/{beta_ns}/sessions/s1/messages")
        assert logged.status_code == 201 and found.status_code == 200
        with server.client(keys.secrets["acme_write"]) as acme:
            refused = acme.get("/v1/whoami")  # acme's reads wait for its own requests too
        assert refused.status_code == 429 and refused.json()["code"] == "too-many-in-flight"
        assert refused.headers["retry-after"] == "1"
    finally:
        server.stop(signal.SIGKILL)
        for thread in flooders:
            thread.join(timeout=60)
    assert len(answers) == FLOOD and answers.count(0) == 4


# -- storage quotas ------------------------------------------------------------------------------

BIG = "fact " * 2_000  # 10,000 characters: about 10 KB a write


@pytest.fixture(scope="module", params=["files", "postgres"])
def quoted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    workspace = store_workspace(request, tmp_path_factory.mktemp("quoted"))
    keys: Keys = make_keys(workspace, KEYS)
    # Stored before the server started: the meter finds it in the store.
    early = Workspace(workspace, namespace="acme.early")
    early.append_text(early.ledger_rel(), "- " + "y" * 40_000 + "\n")
    args = ("--quota-bytes", "64KiB", "--quota-namespaces", "3")
    server = ServerProcess(workspace, *args).start()
    try:
        yield Served(store=request.param, workspace=workspace, server=server, keys=keys)
    finally:
        server.stop()


def test_a_write_past_the_bytes_quota_is_refused_naming_limit_and_usage(quoted: Served) -> None:
    ns = fresh_namespace()
    with quoted.client("acme_write") as acme, quoted.client("beta_write") as beta:
        statuses = []
        for _ in range(4):
            response = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": BIG})
            statuses.append(response.status_code)
            if response.status_code != 201:
                break
        theirs = beta.post(f"/v1/namespaces/{fresh_namespace('beta')}/memories", json={"text": BIG})
        reads = acme.get(f"/v1/namespaces/{ns}/search", params={"q": "fact"})
    # 40,000 bytes stored before + 2 writes of about 10,000 fit in 65,536; a third does not
    assert statuses == [201, 201, 507], statuses
    problem = response.json()
    assert problem["code"] == "quota-exceeded" and problem["limit"] == 65_536
    assert 60_000 < problem["used"] <= 65_536
    assert f"stores {problem['used']:,} bytes and may store 65,536" in problem["detail"]
    assert theirs.status_code == 201  # the quota is the tenant's
    assert reads.status_code == 200  # reads go on
    ws = Workspace(quoted.workspace, namespace=ns, create=False)
    assert sum(ws.read_text(rel).count("fact") for _, rel in ws.ledgers()) == 2 * 2_000


def test_a_write_to_a_namespace_past_the_namespace_quota_is_refused(quoted: Served) -> None:
    chat = {"messages": [{"role": "user", "content": "hi", "id": "m1"}]}
    with quoted.client("beta_write") as beta:
        room = 3 - len(beta.get("/v1/namespaces").json()["items"])
        made = [fresh_namespace("beta") for _ in range(room + 1)]
        statuses = [
            beta.post(f"/v1/namespaces/{ns}/sessions/s1/messages", json=chat).status_code
            for ns in made
        ]
        again = beta.post(f"/v1/namespaces/{made[0]}/sessions/s2/messages", json=chat)
        listed = [n["name"] for n in beta.get("/v1/namespaces").json()["items"]]
    assert statuses == [201] * room + [507]
    assert again.status_code == 201  # its namespaces take writes still
    with quoted.client("beta_write") as beta:
        refused = beta.post(f"/v1/namespaces/{made[-1]}/sessions/s1/messages", json=chat)
    problem = refused.json()
    assert problem["code"] == "quota-exceeded" and (problem["limit"], problem["used"]) == (3, 3)
    assert "has 3 namespaces and may have 3" in problem["detail"]
    assert len(listed) == 3 and made[-1] not in listed


# -- the same limits on MCP ----------------------------------------------------------------------


def test_mcp_requests_take_the_tenants_rate_too(rated: Served) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    statuses = []
    with rated.client("acme_write") as acme:
        for _ in range(3):  # a burst of 2 and no refill: the third is refused, or sooner
            answer = acme.post(
                f"/mcp?namespace={fresh_namespace()}", json=initialize, headers=headers
            )
            statuses.append(answer.status_code)
            if answer.status_code == 429:
                break
    assert statuses[-1] == 429 and answer.json()["code"] == "rate-limited", statuses
    assert set(statuses[:-1]) <= {200}


def test_an_mcp_add_past_the_namespace_quota_is_refused(quoted: Served) -> None:
    from test_server_mcp import connect

    async def add_until_refused() -> list[str]:
        texts = []
        for _ in range(4):
            async with connect(quoted, quoted.keys.secrets["acme_write"], fresh_namespace()) as c:
                result = await c.call_tool("memory_add", {"text": "a fact of its own"})
            texts.append(result.content[0].text)
            if result.is_error:
                break
        return texts

    texts = anyio.run(add_until_refused)
    assert "namespaces and may have 3" in texts[-1], texts
    assert all(t.startswith("Saved 1 bullet") for t in texts[:-1]), texts
