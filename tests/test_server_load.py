"""A load of 8 tenants x 32 clients on a real ``memdir serve`` (two workers), on each store.

Each client adds memories (with an ``Idempotency-Key``, retried with the same key when the
connection fails) and searches, mixed at random, on namespaces its tenant's clients share.
Correctness, not speed, is asserted: every answer is the success its request calls for (no
5xx, no refusal), every acknowledged add is in its namespace's ledger exactly once afterwards
(read through the library, and through the API at the citation the add answered), and no
search hit holds a line of another namespace. ``MEMDIR_TEST_LOAD_OPS`` sets the requests per
client (8 by default: 2,048 a store; more for a longer run).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import pytest

from _server import ServerProcess, store_workspace
from memdir.server.auth import Scope, mint_key, open_key_store
from memdir.workspace import Workspace

TENANTS = 8
CLIENTS = 32
"""Clients per tenant, all at once."""
NAMESPACES = 4
"""Namespaces per tenant: 8 clients write each one concurrently."""
OPS = int(os.environ.get("MEMDIR_TEST_LOAD_OPS", "8"))
"""Requests per client."""
WORD = "quorum"
RETRIES = 5


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant of the load: its key and its namespaces, each with a marker of its own."""

    name: str
    key: str
    markers: dict[str, str]


@dataclass
class Outcome:
    """What the clients saw: statuses, adds acknowledged, and what was wrong."""

    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    added: dict[str, tuple[str, str]] = field(default_factory=dict)
    """token -> (namespace, citation) of each acknowledged add."""
    wrong: list[str] = field(default_factory=list)
    retries: int = 0


@pytest.fixture(scope="module", params=["files", "postgres"])
def loaded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, ServerProcess, list[Tenant]]]:
    workspace = store_workspace(request, tmp_path_factory.mktemp("load"))
    store = open_key_store(Workspace(workspace, create=True))
    tenants = []
    for t in range(TENANTS):
        name = f"tenant{t}"
        key, record = mint_key(tenant=name, scope=Scope.WRITE, now=datetime.now(UTC))
        store.add(record)
        markers = {f"{name}.ns{n}": f"mk{uuid.uuid4().hex[:16]}" for n in range(NAMESPACES)}
        tenants.append(Tenant(name, key, markers))
    # 256 clients of 8 tenants at once: no cap on a tenant's requests in flight.
    server = ServerProcess(workspace, "--workers", "2", "--inflight-per-tenant", "0").start()
    try:
        yield workspace, server, tenants
    finally:
        server.stop()


async def _add(http: httpx.AsyncClient, tenant: Tenant, ns: str, outcome: Outcome) -> None:
    token = f"tk{uuid.uuid4().hex}"
    text = f"{WORD} {tenant.markers[ns]} {token}"
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    for attempt in range(RETRIES):
        try:
            answer = await http.post(
                f"/v1/namespaces/{ns}/memories", json={"text": text}, headers=headers
            )
            break
        except httpx.TransportError:  # the same key again: the add is made once
            outcome.retries += 1
            if attempt == RETRIES - 1:
                raise
    outcome.statuses[("add", answer.status_code)] += 1
    if answer.status_code != 201:
        outcome.wrong.append(f"add {ns}: {answer.status_code} {answer.text[:300]}")
        return
    outcome.added[token] = (ns, answer.json()["citation"])


async def _search(http: httpx.AsyncClient, tenant: Tenant, ns: str, outcome: Outcome) -> None:
    answer = await http.get(f"/v1/namespaces/{ns}/search", params={"q": WORD, "limit": 50})
    outcome.statuses[("search", answer.status_code)] += 1
    if answer.status_code != 200:
        outcome.wrong.append(f"search {ns}: {answer.status_code} {answer.text[:300]}")
        return
    for hit in answer.json()["hits"]:
        if tenant.markers[ns] not in hit["content"]:
            outcome.wrong.append(f"search {ns} by {tenant.name} found {hit['content'][:200]!r}")


async def _client(url: str, tenant: Tenant, seed: int, outcome: Outcome) -> None:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {tenant.key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as http:
        for _ in range(OPS):
            ns = rng.choice(list(tenant.markers))
            if rng.random() < 0.6:
                await _add(http, tenant, ns, outcome)
            else:
                await _search(http, tenant, ns, outcome)


async def _load(url: str, tenants: list[Tenant]) -> Outcome:
    outcome = Outcome()
    for tenant in tenants:  # each namespace made by a first add: a search finds it
        headers = {"Authorization": f"Bearer {tenant.key}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as http:
            for ns in tenant.markers:
                await _add(http, tenant, ns, outcome)
    clients = [
        _client(url, tenant, seed=t * CLIENTS + c, outcome=outcome)
        for t, tenant in enumerate(tenants)
        for c in range(CLIENTS)
    ]
    await asyncio.gather(*clients)
    return outcome


def _ledger_counts(workspace: str, tenants: list[Tenant]) -> dict[str, Counter[str]]:
    """For each namespace, how many times each token stands in its ledgers."""
    counts: dict[str, Counter[str]] = {}
    for tenant in tenants:
        for ns in tenant.markers:
            ws = Workspace(workspace, namespace=ns, create=False)
            seen: Counter[str] = Counter()
            for rel, _ in ws.walk("memory"):
                for word in ws.read_bytes(rel).decode().split():
                    if word.startswith("tk"):
                        seen[word] += 1
            counts[ns] = seen
    return counts


async def _read_back(url: str, tenants: list[Tenant], outcome: Outcome) -> list[str]:
    """Each acknowledged add read through the API at the citation it answered."""
    keys = {ns: t.key for t in tenants for ns in t.markers}
    missing = []
    limits = httpx.Limits(max_connections=32)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as http:

        async def read(token: str, ns: str, citation: str) -> None:
            answer = await http.get(
                f"/v1/namespaces/{ns}/excerpt",
                params={"path": citation},
                headers={"Authorization": f"Bearer {keys[ns]}"},
            )
            if answer.status_code != 200 or token not in "".join(answer.json()["lines"]):
                missing.append(f"{ns} {citation}: {answer.status_code} {answer.text[:200]}")

        await asyncio.gather(*(read(tok, ns, cit) for tok, (ns, cit) in outcome.added.items()))
    return missing


def test_eight_tenants_of_thirty_two_clients_lose_and_mix_nothing(
    loaded: tuple[str, ServerProcess, list[Tenant]], capsys: pytest.CaptureFixture[str]
) -> None:
    workspace, server, tenants = loaded
    outcome = asyncio.run(_load(server.url, tenants))
    assert not outcome.wrong, outcome.wrong[:20]
    assert sum(outcome.statuses.values()) == TENANTS * (CLIENTS * OPS + NAMESPACES)
    assert outcome.added, "no add was made"
    counts = _ledger_counts(workspace, tenants)
    for token, (ns, _) in outcome.added.items():
        assert counts[ns][token] == 1, (ns, token, counts[ns][token])
    strays = {ns: set(c) - {t for t, (n, _) in outcome.added.items() if n == ns}
              for ns, c in counts.items()}  # fmt: skip
    assert not any(strays.values()), strays  # nothing written that no add acknowledged
    assert asyncio.run(_read_back(server.url, tenants, outcome)) == []
    statuses = {f"{r} {s}": n for (r, s), n in sorted(outcome.statuses.items())}
    summary = {
        "clients": TENANTS * CLIENTS,
        "requests": sum(outcome.statuses.values()),
        "adds": len(outcome.added),
        "retries": outcome.retries,
        "statuses": statuses,
    }
    with capsys.disabled():
        print(f"\nload: {json.dumps(summary)}")
