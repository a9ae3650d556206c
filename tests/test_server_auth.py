"""Authentication and reach, over real HTTP to a real ``memdir serve`` on each store: no key,
bad keys, a key revoked while the server runs, an expired key, a key of another tenant, a read
key writing, and namespace names that try to escape."""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import socket
from pathlib import Path
from typing import Any

import httpx

from _server import (
    Served,
    create_key,
    expired_key,
    fresh_namespace,
    memdir,
    spied_app,
    wait_for,
)
from memdir.workspace import Workspace


def _problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["code"] == code
    assert body["type"] == f"urn:memdir:problem:{code}"
    assert body["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text
    return body


def _fake_key() -> str:
    key_id = base64.b32encode(secrets.token_bytes(10)).decode().lower()
    return f"mdk_{key_id}_{base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()[:43]}"


def test_no_key_is_401_with_a_bearer_challenge(served: Served) -> None:
    with served.client() as client:
        body = _problem(client.get("/v1/whoami"), 401, "invalid-key")
        assert "Authorization: Bearer" in body["detail"]
        response = client.get("/v1/whoami")
        assert response.headers["www-authenticate"] == 'Bearer realm="memdir"'


def test_bad_keys_all_get_the_same_401(served: Served) -> None:
    real = served.keys.secrets["acme_read"]
    key_id = served.keys.ids["acme_read"]
    wrong_secret = f"mdk_{key_id}_{'A' * 43}"
    shown = []
    for header in (
        "Bearer nope",
        "Basic YWxhZGRpbjpvcGVuc2VzYW1l",
        f"Bearer {wrong_secret}",
        f"Bearer {_fake_key()}",
        f"Bearer {real}x",
        f"Bearer {real[:-1]}",
    ):
        response = httpx.get(
            f"{served.server.url}/v1/whoami", headers={"Authorization": header}, timeout=30
        )
        body = _problem(response, 401, "invalid-key")
        assert 'error="invalid_token"' in response.headers["www-authenticate"]
        shown.append(body["detail"])
    assert set(shown) == {"the API key is not valid"}


def test_a_key_is_checked_before_the_body_is_read(served: Served) -> None:
    path = "/v1/namespaces/acme.x/memories"
    json_type = {"Content-Type": "application/json"}
    for body in (b'{"text": ', b"(#\xef\xbf"):  # not JSON: still the key's answer first
        with served.client() as anonymous:
            _problem(anonymous.post(path, content=body, headers=json_type), 401, "invalid-key")
        with served.client("acme_read") as reader:
            _problem(reader.post(path, content=body, headers=json_type), 403,
                     "insufficient-scope")  # fmt: skip
    # A body announced and never sent: the refusal comes without waiting for it.
    url = httpx.URL(served.server.url)
    with socket.create_connection((url.host, url.port), timeout=60) as conn:
        conn.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {url.host}\r\nContent-Type: application/json\r\n"
            'Content-Length: 1000000\r\n\r\n{"text": "'.encode()
        )
        head = conn.recv(4096)
    assert head.startswith(b"HTTP/1.1 401 "), head


def test_a_key_revoked_while_the_server_runs_is_refused(served: Served) -> None:
    made = create_key(served.workspace, "acme", "read", "--label", "soon revoked")
    with served.server.client(made["key"]) as client:
        assert client.get("/v1/whoami").status_code == 200
        memdir("keys", "revoke", "-w", served.workspace, made["key_id"])
        # Within about two seconds (the server polls the key store each second).
        response = wait_for(
            lambda: (r := client.get("/v1/whoami")).status_code == 401 and r,
            "the revoked key to be refused",
            bound=30,
        )
        body = _problem(response, 401, "invalid-key")
        assert body["detail"] == f"the API key {made['key_id']} was revoked"
    with served.client("acme_read") as client:  # the others still work
        assert client.get("/v1/whoami").status_code == 200


def test_an_expired_key_is_refused(served: Served) -> None:
    made = expired_key(served)
    with served.server.client(made["key"]) as client:
        response = wait_for(
            lambda: (r := client.get("/v1/whoami")).status_code == 401 and r,
            "the expired key to be refused",
            bound=30,
        )
    assert _problem(response, 401, "invalid-key")["detail"] == (
        f"the API key {made['key_id']} has expired"
    )


def _same_problem(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> None:
    """Two problems that differ only by the names they quote (and their request)."""
    fields = ("type", "title", "status", "code")
    assert {k: a[k] for k in fields} == {k: b[k] for k in fields}
    assert a["detail"].replace(names[0], "NS") == b["detail"].replace(names[1], "NS")
    assert set(a) == set(b)


def test_another_tenants_namespace_is_the_same_404_as_a_missing_one(served: Served) -> None:
    theirs, missing = fresh_namespace("beta"), fresh_namespace("acme")
    with served.client("beta_write") as beta:
        assert (
            beta.post(
                f"/v1/namespaces/{theirs}/memories", json={"text": "beta canary 7Q"}
            ).status_code
            == 201
        )
    with served.client("acme_admin") as acme:
        for method, suffix, body in (
            ("GET", "search?q=canary", None),
            ("GET", "memory-md", None),
            ("POST", "memories", {"text": "acme writes into beta"}),
            ("POST", "sessions/s1/messages", {"messages": [{"role": "user", "content": "x"}]}),
        ):
            other = acme.request(method, f"/v1/namespaces/{theirs}/{suffix}", json=body)
            absent = acme.request(method, f"/v1/namespaces/{missing}/{suffix}", json=body)
            if method == "POST":  # a write would create a namespace of acme's own
                assert absent.status_code in (200, 201)
                continue
            _same_problem(
                _problem(other, 404, "namespace-not-found"),
                _problem(absent, 404, "namespace-not-found"),
                (theirs, missing),
            )
            assert "canary" not in other.text
        _problem(acme.post(f"/v1/namespaces/{theirs}/memories", json={"text": "x"}), 404,
                 "namespace-not-found")  # fmt: skip
        listed = acme.get("/v1/namespaces").json()["items"]
        assert all(item["name"].startswith("acme.") for item in listed)
    with served.client("beta_write") as beta:
        hits = beta.get(f"/v1/namespaces/{theirs}/search", params={"q": "acme writes"}).json()
        assert hits["hits"] == []  # nothing of acme's landed in beta's namespace


def test_narrower_keys_reach_only_their_prefix_or_namespace(served: Served) -> None:
    with served.client("team1") as team1:
        assert (
            team1.post("/v1/namespaces/acme.team1.x/memories", json={"text": "t"}).status_code
            == 201
        )
        for name in ("acme.team10.x", "acme.team1", "acme.x"):
            _problem(team1.get(f"/v1/namespaces/{name}/search", params={"q": "t"}), 404,
                     "namespace-not-found")  # fmt: skip
    with served.client("alice_only") as alice:
        assert alice.get("/v1/whoami").json()["namespace"] == "acme.alice"
        assert (
            alice.post("/v1/namespaces/acme.alice/memories", json={"text": "a"}).status_code == 201
        )
        _problem(alice.post("/v1/namespaces/acme.bob/memories", json={"text": "b"}), 404,
                 "namespace-not-found")  # fmt: skip
        assert [n["name"] for n in alice.get("/v1/namespaces").json()["items"]] == ["acme.alice"]


def test_a_read_key_cannot_write(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_read") as reader:
        for method, suffix, body in (
            ("POST", "memories", {"text": "should not land"}),
            ("POST", "sessions/s1/messages", {"messages": [{"role": "user", "content": "x"}]}),
        ):
            response = reader.request(method, f"/v1/namespaces/{ns}/{suffix}", json=body)
            problem = _problem(response, 403, "insufficient-scope")
            assert problem["detail"] == "this needs a key of scope write; this key's scope is read"
    with served.client("acme_write") as writer:  # nothing was created
        _problem(writer.get(f"/v1/namespaces/{ns}/memory-md"), 404, "namespace-not-found")


def _raw(served: Served, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """A request sent as written (httpx would resolve a literal ``..`` before sending)."""
    url = httpx.URL(served.server.url)
    conn = http.client.HTTPConnection(url.host, url.port, timeout=60)
    try:
        headers = {"Authorization": f"Bearer {served.keys.secrets['acme_admin']}"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        assert response.getheader("content-type") == "application/problem+json", payload
        assert b"Traceback" not in payload
        return response.status, json.loads(payload)
    finally:
        conn.close()


HOSTILE_422 = ["..", "%2e%2e", ".%2e", "%2E%2E", ".", "%00", "a%00b", "ACME.x", ".acme", "acme.%0a",
               "x" * 10_000, "acme." + "y" * 200]  # fmt: skip
HOSTILE_404 = ["acme", "acme.", "acmex.y", "beta.y", "a%2Fb", "acme.x%2F..%2F..%2Fbeta.y",
               "acme.x/../../beta.y"]  # fmt: skip


def test_namespace_names_that_try_to_escape_touch_nothing(served: Served) -> None:
    before = Workspace(served.workspace, create=False).namespaces()
    for raw in HOSTILE_422 + HOSTILE_404:
        for method, suffix, body in (
            ("GET", "search?q=x", None),
            ("POST", "memories", {"text": "escape attempt"}),
        ):
            status, problem = _raw(served, method, f"/v1/namespaces/{raw}/{suffix}", body)
            if raw in HOSTILE_422:
                assert (status, problem["code"]) == (422, "invalid-input"), (raw, problem)
            else:
                assert status == 404, (raw, problem)
                assert problem["code"] in {"namespace-not-found", "not-found"}
    assert Workspace(served.workspace, create=False).namespaces() == before
    if served.store == "files":
        outside = [p.name for p in Path(served.workspace).parent.iterdir()]
        assert outside == ["ws"], outside  # nothing written beside the workspace


def test_a_refused_namespace_never_reaches_the_store(tmp_path: Path) -> None:
    """bound_namespace refuses before NamespacePool.get (in-process, the same application)."""
    app, key, calls = spied_app(tmp_path)
    transport = httpx.ASGITransport(app=app)

    async def probe() -> list[int]:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"Authorization": f"Bearer {key}"}
            statuses = []
            for name in ("%2e%2e", "%00", "beta.x", "acme", "x" * 10_000, "ACME.x"):
                response = await client.get(f"/v1/namespaces/{name}/search?q=x", headers=headers)
                statuses.append(response.status_code)
            return statuses

    import asyncio

    assert asyncio.run(probe()) == [422, 422, 404, 404, 422, 422]
    assert calls == []
