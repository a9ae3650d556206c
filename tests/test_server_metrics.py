"""Prometheus metrics over real HTTP against a real server process, on both stores: what they
count, that no label ever holds a namespace, a query or memory text, and who may read them
(the token's bearer or a loopback client, nobody else); the sums of every worker with
``--workers``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from _server import KEYS, Keys, Served, ServerProcess, make_keys, store_workspace
from memdir.server.app import create_app
from memdir.server.settings import ServerSettings

TOKEN = "metrics-" + uuid.uuid4().hex
NOT_FOUND = {"code": "not-found", "detail": "no such route: GET /openapi.json lists the routes"}


def scrape(
    url: str, token: str | None = TOKEN
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("metrics")
    workspace = store_workspace(request, tmp)
    keys: Keys = make_keys(workspace, KEYS)
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    # 40 requests per tenant (no token comes back during the test), 8 KiB per tenant
    args = ("--metrics-token-file", str(token_file), "--rate", "0.001", "--burst", "40")
    server = ServerProcess(workspace, *args, "--quota-bytes", "8KiB").start()
    try:
        yield Served(store=request.param, workspace=workspace, server=server, keys=keys)
    finally:
        server.stop()


def test_metrics_count_requests_refusals_and_replays_and_name_no_memory(served: Served) -> None:
    canary = uuid.uuid4().hex[:10]
    ns = f"acme.ns{canary}"
    secrets = {f"ns{canary}", f"text{canary}", f"query{canary}", f"sid{canary}", f"path{canary}"}
    replay = {"Idempotency-Key": f"key{canary}"}
    with served.client("acme_write") as acme:
        add = {"text": f"text{canary} Wang Lei prefers PostgreSQL"}
        assert (
            acme.post(f"/v1/namespaces/{ns}/memories", json=add, headers=replay).status_code == 201
        )
        assert (
            acme.post(f"/v1/namespaces/{ns}/memories", json=add, headers=replay).status_code == 201
        )
        assert acme.get(f"/v1/namespaces/{ns}/search", params={"q": f"query{canary}"}).is_success
        chat = {"messages": [{"role": "user", "content": f"text{canary}", "id": "m1"}]}
        assert acme.post(f"/v1/namespaces/{ns}/sessions/sid{canary}/messages", json=chat).is_success
        assert acme.get(f"/v1/path{canary}").status_code == 404
        over = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": "x" * 9_000})
        assert over.status_code == 507
    with served.client("acme_read") as reader:
        assert reader.post(f"/v1/namespaces/{ns}/memories", json=add).status_code == 403
    with served.client("beta_write") as beta:
        statuses = [beta.get("/v1/whoami").status_code for _ in range(41)]
    assert statuses[-1] == 429 and statuses.count(429) == 1
    bad_key = {"Authorization": "Bearer mdk_aaaaaaaaaaaaaaaa_" + "b" * 43}
    assert httpx.get(f"{served.server.url}/v1/whoami", headers=bad_key).status_code == 401
    assert httpx.get(f"{served.server.url}/v1/whoami").status_code == 401

    samples = scrape(served.server.url)
    labels = {v for _, pairs in samples for _, v in pairs}
    assert not {label for label in labels for s in secrets if s in label}
    assert not {label for label in labels if label.startswith(("acme.", "beta."))}
    added = value(
        samples,
        "memdir_http_requests_total",
        route="/v1/namespaces/{ns}/memories",
        method="POST",
        status="201",
        tenant="acme",
    )
    assert added == 2  # the first and its replay
    assert value(samples, "memdir_idempotent_replays_total", tenant="acme") == 1
    assert value(samples, "memdir_quota_rejections_total", tenant="acme", quota="bytes") == 1
    assert value(samples, "memdir_rate_limited_total", tenant="beta", limit="rate") == 1
    assert value(samples, "memdir_auth_failures_total", reason="invalid") >= 1
    assert value(samples, "memdir_auth_failures_total", reason="missing") >= 1
    assert value(samples, "memdir_auth_failures_total", reason="scope") == 1
    unmatched = value(
        samples, "memdir_http_requests_total", route="unmatched", method="GET", status="404",
        tenant="none",
    )  # fmt: skip
    assert unmatched >= 1
    searched = value(
        samples,
        "memdir_http_request_seconds_count",
        route="/v1/namespaces/{ns}/search",
        method="GET",
    )
    assert searched >= 1


def test_metrics_answer_only_the_token(served: Served) -> None:
    url = served.server.url
    for headers in (
        {},  # a loopback client, but a token is set
        {"Authorization": "Bearer wrong-token-of-some-length"},
        {"Authorization": f"Bearer {served.keys.secrets['acme_admin']}"},  # a tenant's key
        {"Authorization": f"Basic {TOKEN}"},
    ):
        refused = httpx.get(f"{url}/metrics", headers=headers)
        assert refused.status_code == 404
        assert {k: refused.json()[k] for k in NOT_FOUND} == NOT_FOUND  # as a missing route
    assert scrape(url)
    assert "/metrics" not in httpx.get(f"{url}/openapi.json").json()["paths"]


def test_without_a_token_metrics_answer_loopback_clients_only(tmp_path: Path) -> None:
    settings = ServerSettings(workspace=str(tmp_path / "ws"))
    server = ServerProcess(settings.workspace).start()
    try:
        samples = scrape(server.url, token=None)  # this test is a loopback client
    finally:
        server.stop()
    probes = value(
        samples, "memdir_http_requests_total", route="/readyz", method="GET", status="200",
        tenant="none",
    )  # fmt: skip
    assert probes >= 1
    app = create_app(settings)

    async def status_for(client: tuple[str, int]) -> int:
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://memdir") as direct:
            return (await direct.get("/metrics")).status_code

    assert asyncio.run(status_for(("203.0.113.9", 40000))) == 404  # not loopback
    assert asyncio.run(status_for(("127.0.0.1", 40000))) == 200


def test_metrics_of_every_worker_are_summed(served_workspace: str, tmp_path: Path) -> None:
    keys = make_keys(served_workspace, [("r", "acme", "read", ())])
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server = ServerProcess(
        served_workspace, "--workers", "3", "--metrics-token-file", str(token_file)
    ).start()
    try:
        for _ in range(30):  # a new connection each: any worker may answer
            headers = keys.headers("r")
            assert httpx.get(f"{server.url}/v1/whoami", headers=headers).status_code == 200
        seen = {
            value(
                scrape(server.url),
                "memdir_http_requests_total",
                route="/v1/whoami",
                method="GET",
                status="200",
                tenant="acme",
            )
            for _ in range(12)  # a new connection each: each worker answers some
        }
    finally:
        server.stop()
    assert seen == {30.0}
