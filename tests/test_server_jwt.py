"""Bearer JWTs of an identity provider (``memdir serve --jwks-url``), against a real server
process: the test serves the issuer's JWKS itself (an ``http.server`` thread on loopback) and
signs tokens with its own RSA and EC keys. A valid token is a principal like a key, through the
same scope and namespace checks on REST and on ``/mcp``; a token of the wrong issuer or
audience, an expired one, ``alg=none``, HS256 "signed" with the public key as the secret, a
key the issuer does not publish, a token without a tenant or a memdir scope: each a 401. A
token of tenant acme reaches no namespace of beta (404)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from _server import Keys, Served, ServerProcess, fresh_namespace, memdir, wait_for
from memdir.server.auth import AuthError, JwtAuthenticator
from test_server_mcp import TIMEOUT, connect, refused, text_of

ISSUER = "https://idp.example.test/"
AUDIENCE = "memdir-test"


@dataclass
class Issuer:
    """The test's identity provider: its keys, and a JWKS endpoint counting its fetches."""

    rsa_key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    ec_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    fetches: int = 0
    url: str = ""
    down: bool = False

    def jwks(self) -> dict[str, Any]:
        rsa_jwk = RSAAlgorithm.to_jwk(self.rsa_key.public_key(), as_dict=True)
        ec_jwk = ECAlgorithm.to_jwk(self.ec_key.public_key(), as_dict=True)
        return {
            "keys": [
                {**rsa_jwk, "kid": "rsa-1", "use": "sig", "alg": "RS256"},
                {**ec_jwk, "kid": "ec-1", "use": "sig", "alg": "ES256"},
            ]
        }

    def token(
        self, *, alg: str = "RS256", kid: str | None = None, key: Any = None, **claims: Any
    ) -> str:
        """A token signed by this issuer (``claims`` over sensible defaults; ``None`` drops
        a claim)."""
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "user-42",
            "iat": now,
            "exp": now + 600,
            "memdir_tenant": "acme",
            "scope": "openid memdir:write",
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        if key is None:
            key = self.ec_key if alg == "ES256" else self.rsa_key
        if kid is None:
            kid = "ec-1" if alg == "ES256" else "rsa-1"
        return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})

    def public_pem(self) -> bytes:
        return self.rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def forged(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None) -> str:
    """A token made by hand (PyJWT refuses to make these): HS256 over ``secret``, or no
    signature at all."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    if secret is None:
        return signing_input + "."
    mac = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    made = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            made.fetches += 1
            if made.down or self.path != "/jwks.json":
                self.send_error(503 if made.down else 404)
                return
            body = json.dumps(made.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    made.url = f"http://127.0.0.1:{http.server_address[1]}/jwks.json"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        http.shutdown()
        http.server_close()


@pytest.fixture(scope="module")
def served(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workspace = str(tmp_path_factory.mktemp("jwt") / "ws")
    jwt_options = ("--jwks-url", issuer.url, "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    server = ServerProcess(workspace, "--no-maintenance", *jwt_options).start()
    try:
        yield Served(store="files", workspace=workspace, server=server,
                     keys=Keys(secrets={}, ids={}))  # fmt: skip
    finally:
        server.stop()


def _as(served: Served, token: str) -> httpx.Client:
    return served.server.client(token)


def _refused(answer: httpx.Response, detail: str) -> None:
    """A 401 problem whose one-line detail says ``detail``."""
    assert answer.status_code == 401, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["www-authenticate"] == 'Bearer realm="memdir", error="invalid_token"'
    problem = answer.json()
    assert problem["code"] == "invalid-key", problem
    assert detail in problem["detail"] and "\n" not in problem["detail"], problem


def test_a_valid_token_is_a_principal_of_its_tenant(served: Served, issuer: Issuer) -> None:
    ns = fresh_namespace("acme")
    for alg in ("RS256", "ES256"):
        with _as(served, issuer.token(alg=alg)) as client:
            who = client.get("/v1/whoami").json()
            added = client.post(f"/v1/namespaces/{ns}/memories", json={"text": f"{alg} fact"})
            found = client.get(f"/v1/namespaces/{ns}/search", params={"q": f"{alg} fact"})
        assert who["tenant"] == "acme" and who["scope"] == "write", who
        assert who["namespace_prefix"] == "acme." and who["namespace"] is None
        assert who["key_id"].startswith("jwt-") and "user-42" not in who["key_id"]
        assert added.status_code == 201, added.text
        assert [h["content"] for h in found.json()["hits"]][:1] == [f"- {alg} fact"]
    log = served.server.access_log()
    assert {line["key_id"] for line in log if line.get("tenant") == "acme"} == {who["key_id"]}


def test_a_tenant_claim_reaches_no_other_tenants_namespace(served: Served, issuer: Issuer) -> None:
    beta = fresh_namespace("beta")
    with _as(served, issuer.token(memdir_tenant="beta")) as client:
        assert client.post(f"/v1/namespaces/{beta}/memories", json={"text": "beta's"}).is_success
    with _as(served, issuer.token(memdir_tenant="acme", scope="memdir:admin")) as client:
        read = client.get(f"/v1/namespaces/{beta}/search", params={"q": "beta"})
        write = client.post(f"/v1/namespaces/{beta}/memories", json={"text": "acme's"})
        listed = client.get("/v1/namespaces").json()["items"]
    for answer in (read, write):
        assert answer.status_code == 404 and answer.json()["code"] == "namespace-not-found"
    assert all(item["name"].startswith("acme.") for item in listed)


def test_scopes_and_the_namespace_claim_narrow_a_token(served: Served, issuer: Issuer) -> None:
    alice, bob = "acme.alice", "acme.bob"
    # several memdir scopes: the narrowest
    with _as(served, issuer.token(scope="memdir:admin memdir:read")) as client:
        assert client.get("/v1/whoami").json()["scope"] == "read"
        refused_write = client.post(f"/v1/namespaces/{alice}/memories", json={"text": "x"})
    assert refused_write.status_code == 403
    assert refused_write.json()["code"] == "insufficient-scope"
    with _as(served, issuer.token(scope=["memdir:write"], memdir_namespace=alice)) as client:
        mine = client.post(f"/v1/namespaces/{alice}/memories", json={"text": "alice's"})
        other = client.post(f"/v1/namespaces/{bob}/memories", json={"text": "bob's?"})
        who = client.get("/v1/whoami").json()
    assert mine.status_code == 201 and who["namespace"] == alice
    assert other.status_code == 404
    with _as(served, issuer.token(memdir_namespace="beta.x")) as client:
        _refused(client.get("/v1/whoami"), "memdir_namespace is not one of acme.*")


def test_tokens_that_must_not_pass(served: Served, issuer: Issuer) -> None:
    header = {"typ": "JWT", "kid": "rsa-1"}
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cases = {
        "wrong issuer": (issuer.token(iss="https://evil.example/"), "not issued for this"),
        "wrong audience": (issuer.token(aud="another-app"), "not issued for this server"),
        "no audience": (issuer.token(aud=None), "not valid"),
        "expired": (issuer.token(exp=int(time.time()) - 3600), "has expired"),
        "no expiry": (issuer.token(exp=None), "not valid"),
        "alg none": (forged({**header, "alg": "none"}, claims, None), "not 'none'"),
        "HS256 with the public key": (
            forged({**header, "alg": "HS256"}, claims, issuer.public_pem()),
            "not 'HS256'",
        ),
        "RS256 under the EC key's id": (issuer.token(kid="ec-1"), "not its key's"),
        "a key the issuer does not publish": (
            issuer.token(key=stranger, kid="rsa-1"),
            "not valid",
        ),
        "an unknown key id": (issuer.token(key=stranger, kid="rsa-9"), "not signed by a key"),
        "no tenant": (issuer.token(memdir_tenant=None), "names no tenant"),
        "a tenant that is no tenant id": (issuer.token(memdir_tenant="Acme.x"), "invalid tenant"),
        "no memdir scope": (issuer.token(scope="openid profile"), "grants no memdir scope"),
        "a tampered body": (_tampered(issuer.token()), "not valid"),
    }
    ns = fresh_namespace("acme")
    for name, (token, detail) in cases.items():
        with _as(served, token) as client:
            answer = client.post(f"/v1/namespaces/{ns}/memories", json={"text": name})
        _refused(answer, detail)
    assert not Path(served.workspace, "ns", ns).exists()  # nothing was written


def test_a_long_algorithm_name_is_not_echoed(served: Served, issuer: Issuer) -> None:
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    blob = "A" * 2000
    with _as(served, forged({"alg": blob, "kid": "rsa-1"}, claims, b"x")) as client:
        answer = client.get("/v1/whoami")
    _refused(answer, "not another one")
    assert blob not in answer.text


def test_a_token_is_never_logged(served: Served, issuer: Issuer) -> None:
    valid = issuer.token(memdir_namespace="acme.logged")
    tokens = [valid, issuer.token(aud="another-app"), issuer.token(exp=int(time.time()) - 60)]
    request_ids: list[str] = []
    for token in tokens:
        with _as(served, token) as client:
            rest = client.post("/v1/namespaces/acme.logged/memories", json={"text": "logged?"})
            mcp = client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        request_ids += [rest.headers["x-request-id"], mcp.headers["x-request-id"]]
    assert rest.status_code == 401 and mcp.status_code == 401

    def logged() -> list[dict[str, Any]]:
        found = [e for e in served.server.access_log() if e["request_id"] in request_ids]
        return found if len(found) == len(request_ids) else []

    entries = wait_for(logged, "the access-log lines")
    assert {e["status"] for e in entries} == {200, 201, 401}
    log = served.server.log()
    for token in tokens:
        assert all(part not in log for part in token.split(".")), "a JWT part was logged"


def _tampered(token: str) -> str:
    head, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["memdir_tenant"] = "beta"
    return f"{head}.{_b64(json.dumps(claims).encode())}.{signature}"


def test_unknown_key_ids_do_not_hammer_the_issuer(served: Served, issuer: Issuer) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with _as(served, issuer.token()) as client:  # the keys are cached now
        assert client.get("/v1/whoami").status_code == 200
    before = issuer.fetches
    for i in range(20):
        with _as(served, issuer.token(key=stranger, kid=f"made-up-{i}")) as client:
            assert client.get("/v1/whoami").status_code == 401
    assert issuer.fetches - before <= 1  # one refresh per cooldown, not one per token


async def test_mcp_takes_the_same_tokens(served: Served, issuer: Issuer) -> None:
    canary = "the JWT canary lives in acme.mcp"
    writer = issuer.token(memdir_namespace="acme.mcp")
    with anyio.fail_after(TIMEOUT):
        async with connect(served, writer, None) as client:
            assert not (await client.call_tool("memory_add", {"text": canary})).is_error
            found = text_of(await client.call_tool("memory_search", {"query": "JWT canary"}))
        assert canary in found
        async with connect(served, issuer.token(scope="memdir:read"), "acme.mcp") as reader:
            tools = {t.name for t in (await reader.list_tools()).tools}
        assert "memory_add" not in tools and "memory_search" in tools
    for token in (issuer.token(exp=int(time.time()) - 3600), issuer.token(aud="other")):
        answers = await refused(served, token, "acme.mcp")
        assert {a.status_code for a in answers} == {401}
    beta = issuer.token(memdir_tenant="beta")
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {beta}"}) as http:
        answer = await http.post(
            f"{served.server.url}/mcp?namespace=acme.mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert answer.status_code == 404 and answer.json()["code"] == "namespace-not-found"


def test_an_unreachable_issuer_is_a_503_and_keys_still_work(issuer: Issuer, tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    key = json.loads(
        memdir("keys", "create", "-w", workspace, "--tenant", "acme", "--scope", "read",
               "--json").stdout
    )["key"]  # fmt: skip
    jwt_options = ("--jwks-url", issuer.url, "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    server = ServerProcess(workspace, "--no-maintenance", *jwt_options).start()
    issuer.down = True
    try:
        with server.client(issuer.token()) as client:
            answer = client.get("/v1/whoami")
        with server.client(key) as client:
            assert client.get("/v1/whoami").status_code == 200
    finally:
        issuer.down = False
        server.stop()
    assert answer.status_code == 503 and answer.json()["code"] == "keys-unavailable"
    assert answer.headers["retry-after"] == "5"


def test_without_jwks_url_a_token_is_no_key(tmp_path: Path, issuer: Issuer) -> None:
    server = ServerProcess(str(tmp_path / "ws"), "--no-maintenance").start()
    try:
        with server.client(issuer.token()) as client:
            _refused(client.get("/v1/whoami"), "the API key is not valid")
    finally:
        server.stop()


def test_the_jwt_options_are_checked_at_start(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    identity = ("--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    for options, says in (
        (("--jwks-url", "https://idp.example/jwks"), "together"),
        (("--jwks-url", "http://idp.example/jwks", *identity), "must be https://"),
        (("--jwt-issuer", ISSUER), "together"),
    ):
        done = memdir("serve", "-w", where, "--port", "0", *options, check=False)
        assert done.returncode != 0 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_the_authenticator_refuses_what_is_not_a_jwt() -> None:
    auth = JwtAuthenticator(jwks_url="https://idp.example/jwks", issuer=ISSUER, audience=AUDIENCE)
    for token in ("a.b.c", "..", "x" * 10):
        with pytest.raises(AuthError, match="not valid"):
            auth.authenticate(token)
