"""Random cross-tenant probes per store, over real HTTP to a real ``memdir serve``.

Three tenants hold namespaces with a canary each (in a ledger, ``MEMORY.md`` and a session
log). Probers (keys of every scope, narrower keys, and keys that are not valid) send random
requests to every route, REST and (a share of them) MCP through the real ``mcp`` client, on
namespaces of every tenant and on hostile names (``..``, ``%2e%2e``, NUL, 10,000 characters,
other tenants' prefixes, ``acme.team10.x`` for an ``acme.team1.`` key), 32 at a time. No
answer (body or header) may hold the canary of a namespace the prober does not reach; every
answer outside the prober's reach is the refusal its case calls for (401 without a valid key,
403 for a scope too narrow, 422 for a name that can never exist, the 404 of a namespace that
does not exist for one out of reach), as ``application/problem+json`` with that status in its
body (MCP's 401 is the SDK's, with its ``WWW-Authenticate`` challenge); afterwards no
namespace holds a write of a key that does not reach it.

``MEMDIR_TEST_PROBES`` sets the probes per store: 2,000 by default (12-25 s a store on two
shared cores), 10,000 for the full run (45-90 s a store), e.g.
``MEMDIR_TEST_PROBES=10000 pytest tests/test_server_probes.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import json
import os
import random
import tarfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import anyio
import httpx
import pytest

from _server import ServerProcess, store_workspace
from memdir.errors import ConfigError
from memdir.server.auth import Scope, mint_key, open_key_store
from memdir.store.namespaces import validate_namespace
from memdir.workspace import Workspace

pytest.importorskip("mcp")
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

PROBES = int(os.environ.get("MEMDIR_TEST_PROBES", "2000"))
"""Probes per store."""
MCP_SHARE = 0.1
CONCURRENCY = 32
WORDS = "zephyr harbor"
TENANTS = {
    "acme": ["acme.alice", "acme.bob", "acme.team1.x", "acme.team10.x"],
    "beta": ["beta.alice", "beta.ops"],
    "gamma": ["gamma.alice", "gamma.team1.x"],
}
# Names that try to escape, for any prober: percent-escapes stay as written in the URL.
HOSTILE = ["..", ".", "%2e%2e", ".%2e", "%2E%2E", "%00", "acme.alice%00", "a%00b", "x" * 10_000,
           "acme." + "y" * 200, "ACME.alice", ".acme", "acme", "acme.", "acmex.y", "beta",
           "beta.", "betax.alice", "gamma.", "acme.team1", "acme.team10.x", "acme.team1.x.",
           "acme.alice%2F..%2F..%2Fbeta.alice", "acme.alice/../beta.alice", "%2e%2e%2fbeta.ops",
           "beta.alice%2F", "acme.alice;beta.alice", "acme.alice%20", "acme.alice%3Fx=beta.ops",
           "beta.ops%23"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Prober:
    """A key that sends probes: its secret (``None``: none sent), what it may reach and do."""

    name: str
    secret: str | None
    tenant: str | None
    prefix: str = ""
    namespace: str | None = None
    scope: Scope = Scope.READ
    valid: bool = True

    def reaches(self, ns: str) -> bool:
        """Whether ``ns`` (as the server decodes it) is one of this key's namespaces."""
        try:
            validate_namespace(ns)
        except ConfigError:
            return False
        if not self.valid:
            return False
        if self.namespace is not None:
            return ns == self.namespace
        return ns.startswith(self.prefix) and len(ns) > len(self.prefix)


def _probers(workspace: str) -> list[Prober]:
    """Keys of every kind, minted into the server's key store."""
    store = open_key_store(Workspace(workspace, create=False))
    now = datetime.now(UTC)
    made: list[Prober] = []
    wanted: list[tuple[str, str, Scope, dict[str, Any]]] = [
        ("acme_read", "acme", Scope.READ, {}),
        ("acme_write", "acme", Scope.WRITE, {}),
        ("acme_admin", "acme", Scope.ADMIN, {}),
        ("team1", "acme", Scope.WRITE, {"namespace_prefix": "acme.team1."}),
        ("alice_only", "acme", Scope.ADMIN, {"namespace": "acme.alice"}),
        ("beta_read", "beta", Scope.READ, {}),
        ("beta_admin", "beta", Scope.ADMIN, {}),
        ("gamma_write", "gamma", Scope.WRITE, {}),
        ("gamma_team1", "gamma", Scope.ADMIN, {"namespace_prefix": "gamma.team1."}),
    ]
    for name, tenant, scope, extra in wanted:
        key, record = mint_key(tenant=tenant, scope=scope, now=now, **extra)
        store.add(record)
        made.append(Prober(name, key, tenant, record.namespace_prefix, record.namespace, scope))
    revoked, record = mint_key(tenant="acme", scope=Scope.ADMIN, now=now)
    store.add(record)
    store.revoke(record.key_id, now)
    past = now - timedelta(days=2)
    expired, record = mint_key(
        tenant="beta", scope=Scope.ADMIN, now=past, expires_at=past + timedelta(days=1)
    )
    store.add(record)
    wrong = made[2].secret[:-4] + "AAAA" if made[2].secret else None
    made += [
        Prober("revoked", revoked, None, valid=False),
        Prober("expired", expired, None, valid=False),
        Prober("wrong_secret", wrong, None, valid=False),
        Prober("no_key", None, None, valid=False),
    ]
    return made


@dataclass(frozen=True, slots=True)
class World:
    """The server under probe, its probers and the canary of each namespace."""

    store: str
    workspace: str
    server: ServerProcess
    probers: list[Prober]
    canaries: dict[str, str]


def _archive(text: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = text.encode()
        member = tarfile.TarInfo("MEMORY.md")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return out.getvalue()


def _plant(server: ServerProcess, probers: list[Prober]) -> dict[str, str]:
    """A canary in each namespace's ledger, MEMORY.md and session log."""
    keys = {p.name: p.secret for p in probers}
    planters = {"acme": "acme_admin", "beta": "beta_admin", "gamma": "gamma_write"}
    canaries = {}
    for tenant, names in TENANTS.items():
        with server.client(keys[planters[tenant]]) as client:
            for ns in names:
                token = f"cnry{uuid.uuid4().hex}"
                canaries[ns] = token
                text = f"{WORDS} {token}"
                base = f"/v1/namespaces/{ns}"
                assert client.post(f"{base}/memories", json={"text": text}).status_code == 201
                put = client.put(
                    f"{base}/memory-md",
                    content=f"# Memory\n- {text}\n",
                    headers={"If-None-Match": "*", "Content-Type": "text/markdown"},
                )
                assert put.status_code == 201, put.text
                message = {"role": "user", "content": text, "id": "m0"}
                logged = client.post(f"{base}/sessions/s1/messages", json={"messages": [message]})
                assert logged.status_code == 201, logged.text  # fmt: skip
    return canaries


@pytest.fixture(scope="module", params=["files", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    workspace = store_workspace(request, tmp_path_factory.mktemp("probes"))
    Workspace(workspace, create=True)
    probers = _probers(workspace)
    # 32 probes at a time, many of one tenant: no cap on a tenant's requests in flight.
    server = ServerProcess(workspace, "--inflight-per-tenant", "0").start()
    try:
        yield World(request.param, workspace, server, probers, _plant(server, probers))
    finally:
        server.stop()


# -- the probes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    """One request: who sends it, to which namespace name (as written in the URL), how."""

    prober: Prober
    name: str
    route: str
    mcp: bool

    @property
    def decoded(self) -> str:
        """The namespace the server reads from the name (percent-escapes decoded)."""
        return unquote(self.name)

    @property
    def own(self) -> bool:
        """Whether the probe may succeed: the prober's own namespace (or no namespace)."""
        if self.route in ("whoami", "namespaces"):
            return self.prober.valid
        return self.prober.reaches(self.decoded)


READS = ["search", "excerpt", "ledgers", "ledger", "memory_md", "consolidations", "sessions",
         "session_messages", "session_search", "maintenance", "export"]  # fmt: skip
# Writes a prober may send to its own namespaces (they add, never replace: canaries stay).
OWN_WRITES = ["add", "append"]
# Writes only sent where they must be refused (they would replace, or take the job slot).
FOREIGN_WRITES = ["put_memory_md", "flush", "compact", "consolidate", "maintenance_run", "import"]
TOOLS = ["memory_search", "memory_get", "session_search", "session_list", "session_history",
         "memory_add"]  # fmt: skip


def plan(probers: list[Prober], rng: random.Random) -> list[Probe]:
    """:data:`PROBES` probes: random prober, target tenant, namespace or hostile name, route."""
    probes = []
    for _ in range(PROBES):
        prober = rng.choice(probers)
        if rng.random() < 0.25:
            name = rng.choice(HOSTILE)
        else:
            name = rng.choice(TENANTS[rng.choice(list(TENANTS))])
        mcp = rng.random() < MCP_SHARE
        routes = TOOLS if mcp else READS + OWN_WRITES + ["whoami", "namespaces"]
        probe = Probe(prober, name, rng.choice(routes), mcp)
        if not mcp and not probe.own and rng.random() < 0.3:
            probe = Probe(prober, name, rng.choice(FOREIGN_WRITES), mcp)
        probes.append(probe)
    return probes


def _request(probe: Probe, today: str) -> tuple[str, str, dict[str, Any]]:
    """``(method, path, httpx options)`` of a REST probe."""
    marker = f"probe-by-{probe.prober.name}"
    base = f"/v1/namespaces/{probe.name}"
    message = {"role": "user", "content": marker, "id": uuid.uuid4().hex}
    idem = {"Idempotency-Key": uuid.uuid4().hex}
    job = {"session_id": "s1", "messages": [message]}
    routes: dict[str, tuple[str, str, dict[str, Any]]] = {
        "whoami": ("GET", "/v1/whoami", {}),
        "namespaces": ("GET", "/v1/namespaces", {}),
        "search": ("GET", f"{base}/search",
                   {"params": [("q", WORDS), ("sources", "memory"), ("sources", "sessions")]}),
        "excerpt": ("GET", f"{base}/excerpt",
                    {"params": {"path": f"memory/{today}.md#L1-L9"}}),
        "ledgers": ("GET", f"{base}/ledgers", {}),
        "ledger": ("GET", f"{base}/ledgers/{today}", {}),
        "memory_md": ("GET", f"{base}/memory-md", {}),
        "consolidations": ("GET", f"{base}/consolidations", {}),
        "sessions": ("GET", f"{base}/sessions", {}),
        "session_messages": ("GET", f"{base}/sessions/s1/messages", {}),
        "session_search": ("GET", f"{base}/sessions/search", {"params": {"q": WORDS}}),
        "maintenance": ("GET", f"{base}/maintenance", {}),
        "export": ("GET", f"{base}/export", {}),
        "add": ("POST", f"{base}/memories", {"json": {"text": marker}, "headers": idem}),
        "append": ("POST", f"{base}/sessions/s1/messages",
                   {"json": {"messages": [message]}, "headers": idem}),
        "put_memory_md": ("PUT", f"{base}/memory-md",
                          {"content": f"# Memory\n- {marker}\n",
                           "headers": {"If-Match": "*", "Content-Type": "text/markdown"}}),
        "flush": ("POST", f"{base}/flush", {"json": job}),
        "compact": ("POST", f"{base}/compact", {"json": {**job, "force": True}}),
        "consolidate": ("POST", f"{base}/consolidate", {"json": {"dry_run": False}}),
        "maintenance_run": ("POST", f"{base}/maintenance/run", {"json": {"dry_run": False}}),
        "import": ("POST", f"{base}/import",
                   {"content": _archive(f"# Memory\n- {marker}\n"),
                    "headers": {"Content-Type": "application/gzip"}}),
    }  # fmt: skip
    return routes[probe.route]


async def _raw(url: httpx.URL, method: str, target: str, headers: dict[str, str]) -> Any:
    """A request sent exactly as written (httpx resolves a literal ``..`` before sending)."""
    reader, writer = await asyncio.open_connection(url.host, url.port)
    lines = [f"{method} {target} HTTP/1.1", f"Host: {url.host}", "Connection: close",
             "Content-Length: 0", *(f"{k}: {v}" for k, v in headers.items())]  # fmt: skip
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status, *fields = head.decode("latin-1").split("\r\n")
    answer = [(k, v) for k, _, v in (f.partition(": ") for f in fields)]
    return httpx.Response(int(status.split()[1]), headers=answer, content=body)


def refusal(probe: Probe) -> int | None:
    """The status a probe must be refused with, in the order the server checks; ``None``
    when it may succeed (the prober's own namespace, with the scope the route needs)."""
    prober = probe.prober
    if probe.mcp:  # the tools a key may call are checked inside a 200: only its binding here
        if not prober.valid:
            return 401
    else:
        if "/" in probe.decoded and probe.route not in ("whoami", "namespaces"):
            return 404  # the name spans path segments: no route has that shape
        if not prober.valid:
            return 401
        if prober.scope < _scope(probe.route):
            return 403
        if probe.route in ("whoami", "namespaces"):
            return None
    try:
        validate_namespace(probe.decoded)
    except ConfigError:
        return 422
    return None if prober.reaches(probe.decoded) else 404


# The codes of the refusals: a namespace out of reach is one that does not exist; an export
# of one's own while another job of the tenant runs waits its turn (one job slot a tenant).
CODES = {401: {"invalid-key"}, 403: {"insufficient-scope"}, 404: {"namespace-not-found"},
         422: {"invalid-input", "invalid-request"}, 429: {"job-running"}}  # fmt: skip


@dataclass
class Tally:
    """What the probes saw."""

    statuses: Counter[tuple[str, bool, int]]
    leaks: list[str]
    unexpected: list[str]

    def see(self, probe: Probe, status: int, body: bytes, headers: Any, ok: set[int]) -> None:
        """Count an answer, and keep it if it is not what ``probe`` must get: a status of
        ``ok`` when the probe may succeed, else its refusal as a problem (RFC 9457)."""
        via = "mcp" if probe.mcp else "rest"
        self.statuses[(via, probe.own, status)] += 1
        wanted = refusal(probe)
        wrong = _wrong(probe, status, body, headers, ok if wanted is None else {wanted})
        if wrong:
            what = f"{via} {probe.prober.name} {probe.route} {probe.name[:40]!r}"
            self.unexpected.append(f"{what}: {wrong}: {status} {body[:300]!r}")


def _wrong(probe: Probe, status: int, body: bytes, headers: Any, ok: set[int]) -> str | None:
    """What is wrong with an answer (``None``: nothing)."""
    if status not in ok:
        return f"status not in {sorted(ok)}"
    if status < 400:
        return None
    if probe.mcp and status == 401:  # the SDK's bearer challenge (RFC 6750), not a problem
        challenge = headers.get("www-authenticate", "")
        good = challenge.startswith("Bearer") and json.loads(body).get("error") == "invalid_token"
        return None if good else "not the SDK's bearer challenge"
    if headers.get("content-type") != "application/problem+json":
        return f"content type {headers.get('content-type')!r}"
    problem = json.loads(body)
    if (
        problem.get("status") != status
        or problem.get("type") != f"urn:memdir:problem:{problem.get('code')}"
    ):
        return "problem not of this status"
    if status == 404 and refusal(probe) is None:
        codes = {"namespace-not-found", "not-found"}  # a read in one's own: nothing there
    elif status == 404 and "/" in probe.decoded and not probe.mcp:
        codes = {"not-found"}  # no such route
    else:
        codes = CODES[status]
    if problem["code"] not in codes:
        return f"code {problem['code']!r} not in {sorted(codes)}"
    if status == 401 and "www-authenticate" not in headers:
        return "401 without WWW-Authenticate"
    return None


async def _rest(client: httpx.AsyncClient, probe: Probe, tally: Tally) -> bytes:
    method, path, options = _request(probe, datetime.now().astimezone().date().isoformat())
    headers = dict(options.pop("headers", {}))
    if probe.prober.secret is not None:
        headers["Authorization"] = f"Bearer {probe.prober.secret}"
    if "/./" in f"{path}/" or "/../" in f"{path}/":
        response = await _raw(client.base_url, method, path, headers)
    else:
        response = await client.request(method, path, headers=headers, **options)
    body = response.content
    if response.headers.get("content-type") == "application/gzip":
        body = gzip.decompress(body)  # an export: what the archive holds
    # A read of one's own namespace may find nothing (a ledger of a day without one); an
    # export, a job, may find another job of the tenant running.
    ok = {200, 201, 404} | ({429} if probe.route == "export" else set())
    tally.see(probe, response.status_code, body, response.headers, ok)
    if probe.route == "namespaces" and response.status_code == 200:
        names = [item["name"] for item in response.json()["items"]]
        tally.leaks += [
            f"{probe.prober.name} listed {n}" for n in names if not probe.prober.reaches(n)
        ]
    return body + b"".join(f"{k}: {v}".encode() for k, v in response.headers.items())


def _scope(route: str) -> Scope:
    if route in ("export", "import", "maintenance_run"):
        return Scope.ADMIN
    return Scope.WRITE if route in OWN_WRITES + FOREIGN_WRITES else Scope.READ


def _tool_arguments(probe: Probe) -> dict[str, Any]:
    return {
        "memory_search": {"query": WORDS},
        "memory_get": {"path": "MEMORY.md"},
        "session_search": {"query": WORDS},
        "session_list": {},
        "session_history": {"session_id": "s1"},
        "memory_add": {"text": f"probe-by-{probe.prober.name}"},
    }[probe.route]


_ANSWERS: ContextVar[list[httpx2.Response]] = ContextVar("probe_answers")


async def _keep(response: httpx2.Response) -> None:
    """Keep each HTTP answer of an MCP probe (in the probe's own list)."""
    await response.aread()
    _ANSWERS.get().append(response)


async def _mcp(world: World, http: httpx2.AsyncClient, probe: Probe, tally: Tally) -> bytes:
    answers: list[httpx2.Response] = []
    _ANSWERS.set(answers)  # the client's tasks, started below, inherit it
    secret = probe.prober.secret
    headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
    url = f"{world.server.url}/mcp?namespace={probe.name}"
    seen = b""
    with contextlib.suppress(Exception):
        http.headers = headers
        async with Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool(probe.route, _tool_arguments(probe))
            seen = json.dumps([c.model_dump() for c in result.content]).encode()
    assert answers, probe
    for answer in answers:  # 202: the answer to the client's "initialized" notification
        tally.see(probe, answer.status_code, answer.content, answer.headers, {200, 202})
    heads = (f"{k}: {v}".encode() for a in answers for k, v in a.headers.items())
    return seen + b"".join(a.content for a in answers) + b"".join(heads)


def _leaks(world: World, probe: Probe, seen: bytes) -> list[str]:
    return [
        f"{probe.prober.name} {probe.route} {probe.name[:40]!r} saw the canary of {ns}"
        for ns, token in world.canaries.items()
        if token.encode() in seen and not probe.prober.reaches(ns)
    ]


async def _run(world: World, probes: list[Probe]) -> Tally:
    tally = Tally(Counter(), [], [])
    queue: asyncio.Queue[Probe] = asyncio.Queue()
    for probe in probes:
        queue.put_nowait(probe)
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=world.server.url, timeout=120, limits=limits) as client:

        async def worker() -> None:
            # One MCP HTTP client per worker (its headers set per probe): making one per probe
            # costs more than the probe.
            async with httpx2.AsyncClient(timeout=120, event_hooks={"response": [_keep]}) as http:
                while not queue.empty():
                    probe = queue.get_nowait()
                    with anyio.fail_after(180):
                        if probe.mcp:
                            seen = await _mcp(world, http, probe, tally)
                        else:
                            seen = await _rest(client, probe, tally)
                    tally.leaks += _leaks(world, probe, seen)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return tally


def _writes_in_reach(world: World) -> list[str]:
    """Every probe's write found in a namespace its prober does not reach."""
    root = Workspace(world.workspace, create=False)
    found = []
    by_name = {p.name: p for p in world.probers}
    for ns in root.namespaces():
        ws = Workspace(world.workspace, namespace=ns, create=False)
        for rel, _ in ws.walk(""):
            if rel.startswith(".index"):
                continue
            text = ws.read_bytes(rel).decode("utf-8", "replace")
            for name, prober in by_name.items():
                if f"probe-by-{name}" in text and not prober.reaches(ns):
                    found.append(f"{ns}/{rel} holds a write of {name}")
    return found


def test_random_cross_tenant_probes_read_nothing_of_another_tenant(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = {"files": 1, "postgres": 2}[world.store]
    probes = plan(world.probers, random.Random(seed))
    started = time.monotonic()
    tally = asyncio.run(_run(world, probes))
    seconds = time.monotonic() - started  # reported, never asserted
    assert not tally.leaks, tally.leaks[:20]
    assert not tally.unexpected, tally.unexpected[:20]
    assert _writes_in_reach(world) == []
    before = set(TENANTS["acme"] + TENANTS["beta"] + TENANTS["gamma"])
    after = set(Workspace(world.workspace, create=False).namespaces())
    created = after - before
    assert all(any(p.reaches(ns) and p.scope >= Scope.WRITE for p in world.probers)
               for ns in created), created  # fmt: skip
    counts = Counter(p.mcp for p in probes)
    own = sum(p.own for p in probes)
    summary = {
        "store": world.store,
        "probes": len(probes),
        "rest": counts[False],
        "mcp": counts[True],
        "own_namespace": own,
        "seconds": round(seconds, 1),
        "statuses": {f"{via} {'own' if o else 'foreign'} {s}": n
                     for (via, o, s), n in sorted(tally.statuses.items())},
    }  # fmt: skip
    with capsys.disabled():
        print(f"\ncross-tenant probes: {json.dumps(summary)}")
