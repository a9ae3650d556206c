"""``memdir.client`` when things go wrong: a server's errors as memdir exceptions, retries with
one ``Idempotency-Key`` per write, and the key kept out of every message, ``repr`` and log.

Retries are driven by ``httpx.MockTransport`` wrapping a real transport to a real
``memdir serve``: the wrapper refuses, loses or answers "busy" to the attempts a test says,
and passes the others through.
"""

from __future__ import annotations

import json
import logging
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _client import KINDS, client_of, open_client
from _server import Served, fresh_namespace, serve_store
from memdir import errors
from memdir.client import (
    AuthError,
    ConnectionFailed,
    MemdirClient,
    NamespaceNotFound,
    NotFound,
    QuotaExceeded,
    RateLimited,
    RemoteError,
    VersionConflict,
)
from memdir.errors import ConfigError
from memdir.workspace import Workspace

FAST = {"backoff": 0.01}  # retries without long waits (the jitter is kept)
FAKE_KEY = "mdk_aaaaaaaaaaaaaaaa_" + "S" * 43


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    yield from serve_store(request, tmp_path_factory)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMDIR_API_KEY", "MEMDIR_API_KEY_FILE", "MEMDIR_ALLOW_INSECURE_HTTP"):
        monkeypatch.delenv(name, raising=False)


def _problem(status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> Any:
    body = {"type": f"urn:memdir:problem:{code}", "title": "x", "status": status,
            "detail": detail, "instance": "/v1/x", "code": code,
            "request_id": "rid-1234"}  # fmt: skip
    return httpx.Response(
        status,
        headers={"Content-Type": "application/problem+json", **(headers or {})},
        content=json.dumps(body).encode(),
    )


class Flaky:
    """A transport that plays ``script`` to the first attempts, then passes every request to
    the real server. Steps: ``"refuse"`` (no connection: the request never left), ``"lose"``
    (the request reaches the server, its answer is lost), an ``httpx.Response`` (answered
    instead of the server), ``"pass"``.

    Attributes:
        requests: every attempt, in order.
        answers: the server's answers that reached the client.
    """

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []
        self.answers: list[httpx.Response] = []

    def _step(self, request: httpx.Request) -> Any:
        self.requests.append(request)
        step = self.script.pop(0) if self.script else "pass"
        if step == "refuse":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return step

    def transport(self, kind: str) -> httpx.MockTransport:
        """The transport for the sync or the async client."""
        if kind == "sync":
            real = httpx.HTTPTransport()

            def handle(request: httpx.Request) -> httpx.Response:
                step = self._step(request)
                if isinstance(step, httpx.Response):
                    return step
                response = real.handle_request(request)
                response.read()
                if step == "lose":
                    raise httpx.ReadError("connection reset by peer", request=request)
                self.answers.append(response)
                return response

            return httpx.MockTransport(handle)
        areal = httpx.AsyncHTTPTransport()

        async def ahandle(request: httpx.Request) -> httpx.Response:
            step = self._step(request)
            if isinstance(step, httpx.Response):
                return step
            response = await areal.handle_async_request(request)
            await response.aread()
            if step == "lose":
                raise httpx.ReadError("connection reset by peer", request=request)
            self.answers.append(response)
            return response

        return httpx.MockTransport(ahandle)

    def keys(self) -> list[str | None]:
        """The ``Idempotency-Key`` of each attempt."""
        return [r.headers.get("idempotency-key") for r in self.requests]


def _flaky_client(served: Served, kind: str, flaky: Flaky, **options: Any) -> Any:
    return client_of(
        served, kind, "acme_write", transport=flaky.transport(kind), **{**FAST, **options}
    )


def _bullets(served: Served, ns: str, text: str) -> int:
    ws = Workspace(served.workspace, namespace=ns, create=False)
    return sum(ws.read_text(rel).count(f"- {text}\n") for _, rel in ws.ledgers())


# -- retries ------------------------------------------------------------------------------


def test_a_write_retried_after_a_refused_connection_keeps_its_key_and_lands_once(
    served: Served, kind: str
) -> None:
    flaky = Flaky(["refuse", "pass", "pass", "refuse", "pass"])
    ns = fresh_namespace()
    with _flaky_client(served, kind, flaky) as client:
        alice = client.namespace(ns)
        first = alice.add("canary one: the vault is in Frankfurt")
        alice.search("vault")
        alice.add("canary two: the backup is in Dublin")
    keys = flaky.keys()
    methods = [r.method for r in flaky.requests]
    assert methods == ["POST", "POST", "GET", "POST", "POST"]
    assert keys[0] == keys[1] and keys[3] == keys[4] and keys[0] != keys[3]  # one per call
    assert keys[2] is None  # a read carries none
    assert all(uuid.UUID(k).version == 4 for k in (keys[0], keys[3]))  # type: ignore[arg-type]
    assert first.bullets == 1
    assert _bullets(served, ns, "canary one: the vault is in Frankfurt") == 1


def test_a_write_whose_answer_was_lost_is_sent_again_with_the_same_key(
    served: Served, kind: str
) -> None:
    flaky = Flaky(["lose"])
    ns = fresh_namespace()
    with _flaky_client(served, kind, flaky) as client:
        added = client.namespace(ns).add("canary three: the lost answer")
    keys = flaky.keys()
    assert len(keys) == 2 and keys[0] is not None and keys[0] == keys[1]
    assert added.bullets == 1
    assert flaky.answers[-1].headers.get("idempotency-replayed") == "true"  # the stored answer
    assert _bullets(served, ns, "canary three: the lost answer") == 1  # written once


def test_busy_answers_are_retried_after_their_retry_after(served: Served, kind: str) -> None:
    ns = fresh_namespace()
    with client_of(served, kind, "acme_write") as client:
        client.namespace(ns).add("Wang Lei prefers PostgreSQL 16")
    flaky = Flaky([
        _problem(503, "store-unavailable", "the store cannot be reached", {"Retry-After": "0"}),
        _problem(429, "rate-limited", "too many requests", {"Retry-After": "1"}),
        httpx.Response(502, text="<html>bad gateway</html>"),
    ])  # fmt: skip
    with _flaky_client(served, kind, flaky) as client:
        hits = client.namespace(ns).search("PostgreSQL")
    assert len(flaky.requests) == 4 and [h.content for h in hits] == [
        "- Wang Lei prefers PostgreSQL 16"
    ]


def test_a_retry_after_longer_than_max_wait_is_raised_at_once(served: Served, kind: str) -> None:
    flaky = Flaky(
        [_problem(429, "rate-limited", "slow down: 20 per second", {"Retry-After": "120"})]
    )
    with (
        _flaky_client(served, kind, flaky, max_wait=30) as client,
        pytest.raises(RateLimited) as caught,
    ):
        client.whoami()
    assert caught.value.retry_after == 120 and len(flaky.requests) == 1
    assert str(caught.value) == (
        "slow down: 20 per second (HTTP 429, rate-limited, request id rid-1234)"
    )


def test_no_connection_on_any_attempt_is_one_clear_error(served: Served, kind: str) -> None:
    flaky = Flaky(["refuse"] * 10)
    with (
        _flaky_client(served, kind, flaky, retries=2) as client,
        pytest.raises(ConnectionFailed) as caught,
    ):
        client.namespace(fresh_namespace()).add("never sent")
    assert len(flaky.requests) == 3 and len(set(flaky.keys())) == 1
    message = str(caught.value)
    assert message.startswith(
        f"cannot reach the memdir server at {served.server.url}: ConnectError"
    )
    assert "(3 attempts)" in message and "\n" not in message
    assert served.keys.secrets["acme_write"] not in message + repr(caught.value)

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        open_client(kind, f"http://127.0.0.1:{port}", FAKE_KEY, retries=1, **FAST) as nobody,
        pytest.raises(ConnectionFailed, match=r"\(2 attempts\)"),
    ):
        nobody.whoami()


# -- errors from the server ---------------------------------------------------------------


def test_the_servers_errors_are_memdir_exceptions(served: Served, kind: str) -> None:
    ns = fresh_namespace()
    with client_of(served, kind, "beta_write") as beta:
        theirs = fresh_namespace("beta")
        beta.namespace(theirs).add("beta's secret plan")
    with client_of(served, kind, "acme_write") as acme:
        acme.namespace(ns).add("a fact")
        for name in (theirs, fresh_namespace("beta")):  # another tenant's, existing or not
            with pytest.raises(NamespaceNotFound) as other:
                acme.namespace(name).search("plan")
            assert other.value.detail == (
                f"no namespace {name!r}: GET /v1/namespaces lists the ones this key reaches"
            )
        with pytest.raises(RemoteError) as invalid:
            acme.namespace(ns).search("fact", limit=51)
        assert invalid.value.status == 422 and type(invalid.value) is RemoteError
        with pytest.raises(NotFound) as missing:
            acme.namespace(ns).ledger("2020-01-01")
        assert missing.value.code == "not-found" and not isinstance(
            missing.value, NamespaceNotFound
        )
        with pytest.raises(NotFound):
            acme.namespace(ns).session_messages("nobody")
        with pytest.raises(ConfigError):
            acme.namespace("../etc")  # never sent
    with client_of(served, kind, "acme_read") as reader:
        assert reader.namespace(ns).search("fact")
        with pytest.raises(AuthError) as scope:
            reader.namespace(ns).add("a read key writing")
        assert (scope.value.status, scope.value.code) == (403, "insufficient-scope")
        assert scope.value.detail == "this needs a key of scope write; this key's scope is read"
    with client_of(served, kind, "alice_only") as alice_only, pytest.raises(NamespaceNotFound):
        alice_only.namespace(ns).search("fact")
    assert _bullets(served, ns, "a read key writing") == 0


def test_a_wrong_key_is_one_line_without_the_key(served: Served, kind: str) -> None:
    real = served.keys.secrets["acme_write"]
    wrong = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")  # a real id, bad secret
    for key in (wrong, FAKE_KEY):
        with open_client(kind, served.server.url, key, **FAST) as client:
            with pytest.raises(AuthError) as caught:
                client.whoami()
            text = f"{caught.value} {caught.value!r} {client!r} {client.namespace('acme.x')!r}"
        assert (caught.value.status, caught.value.code) == (401, "invalid-key")
        assert str(caught.value).startswith("the API key is not valid") and "\n" not in text
        assert key not in text and key[-43:] not in text


def _quota() -> httpx.Response:
    body = {"code": "quota-exceeded", "detail": "the tenant acme stores 1,048,576 bytes of "
            "1,048,576", "limit": 1048576, "used": 1048576, "request_id": "r2"}  # fmt: skip
    headers = {"Content-Type": "application/problem+json"}
    return httpx.Response(507, headers=headers, content=json.dumps(body).encode())


ANSWERS: list[tuple[Any, type[RemoteError], dict[str, Any]]] = [
    (
        lambda: _problem(412, "precondition-failed", "MEMORY.md changed", {"ETag": '"v9"'}),
        VersionConflict,
        {"current": "v9", "status": 412},
    ),
    (
        lambda: _problem(429, "rate-limited", "slow down", {"Retry-After": "3"}),
        RateLimited,
        {"retry_after": 3.0},
    ),
    (_quota, QuotaExceeded, {"limit": 1048576, "used": 1048576, "code": "quota-exceeded"}),
    (
        lambda: httpx.Response(502, text="<html><body>Bad Gateway</body></html>"),
        RemoteError,
        {"detail": "the server answered 502 Bad Gateway", "code": ""},
    ),
    (
        lambda: _problem(500, "internal", "the server failed (request id rid-1234)"),
        RemoteError,
        {"request_id": "rid-1234"},
    ),
    (
        lambda: httpx.Response(308, headers={"Location": "https://memory.example.com/v1/x"}),
        RemoteError,
        {
            "status": 308,
            "detail": "the server redirects to 'https://memory.example.com/v1/x': give the "
            "client the URL it redirects to",
        },
    ),
]


@pytest.mark.parametrize(("answer", "kind_of", "attributes"), ANSWERS)
def test_each_problem_becomes_its_exception(
    kind: str, answer: Any, kind_of: type[RemoteError], attributes: dict[str, Any]
) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return answer()  # type: ignore[no-any-return]

    transport = httpx.MockTransport(handle)
    with (
        open_client(kind, "http://127.0.0.1:9", FAKE_KEY, retries=0, transport=transport) as c,
        pytest.raises(RemoteError) as caught,
    ):
        c.namespace("acme.alice").replace_memory_md("# Memory\n", "v1")
    error = caught.value
    assert type(error) is kind_of and "\n" not in str(error)
    assert {name: getattr(error, name) for name in attributes} == attributes
    assert isinstance(error, errors.MemdirError)
    if kind_of is VersionConflict:
        assert isinstance(error, errors.VersionConflict)


# -- settings and the key -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "http://10.0.0.5:8000",
        "http://memory.internal/base",
        "http://[fe80::1]",
    ],
)
def test_a_key_is_not_sent_in_clear_across_a_network(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError) as refused:
        MemdirClient(url, FAKE_KEY)
    assert "https://" in str(refused.value) and "MEMDIR_ALLOW_INSECURE_HTTP=1" in str(refused.value)
    assert FAKE_KEY not in str(refused.value)
    monkeypatch.setenv("MEMDIR_ALLOW_INSECURE_HTTP", "1")
    with MemdirClient(url, FAKE_KEY) as allowed:
        assert allowed.url == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "https://memory.example.com",
        "http://127.0.0.1:8000",
        "http://localhost:9/",
        "http://[::1]:8080",
        "http://127.0.0.2",
    ],
)
def test_https_and_loopback_are_accepted(url: str) -> None:
    with MemdirClient(url, FAKE_KEY) as client:
        assert client.url == url.rstrip("/") and FAKE_KEY not in repr(client)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com", "must start with https://"),
        ("https://user:hunter2@example.com", "must not hold a user or password"),
        ("https://example.com/?key=abc", "must not have a query"),
        ("", "must be text"),
        ("not a url at all", "must start with https://"),
    ],
)
def test_a_bad_url_is_one_clear_line(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        MemdirClient(url, FAKE_KEY)
    assert "hunter2" not in str(refused.value)


def test_the_key_comes_from_the_argument_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    url = "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match=r"no API key: pass api_key=, or set \$MEMDIR_API_KEY"):
        MemdirClient(url)
    key_file = tmp_path / "key"
    key_file.write_text("mdk_fromfile\n", encoding="utf-8")
    monkeypatch.setenv("MEMDIR_API_KEY_FILE", str(key_file))
    assert MemdirClient(url)._config.api_key == "mdk_fromfile"
    monkeypatch.setenv("MEMDIR_API_KEY", "mdk_fromenv")
    assert MemdirClient(url)._config.api_key == "mdk_fromenv"
    assert MemdirClient(url, "mdk_given")._config.api_key == "mdk_given"
    monkeypatch.delenv("MEMDIR_API_KEY")
    monkeypatch.setenv("MEMDIR_API_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=r"cannot read the key file .*missing.*No such file"):
        MemdirClient(url)
    for bad in ("mdk_two words", "mdk_line\nbreak", "   "):
        with pytest.raises(ConfigError, match="API key in api_key") as refused:
            MemdirClient(url, bad)
        assert bad.strip() not in str(refused.value) or not bad.strip()
    for name, value in (("retries", -1), ("timeout", 0), ("backoff", float("nan"))):
        with pytest.raises(ConfigError, match=name):
            MemdirClient(url, FAKE_KEY, **{name: value})


def test_the_key_never_reaches_a_log(
    served: Served, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = served.keys.secrets["acme_write"]
    flaky = Flaky(
        ["refuse", "lose", _problem(503, "store-unavailable", "busy", {"Retry-After": "0"})]
    )
    with _flaky_client(served, kind, flaky) as client:
        client.namespace(fresh_namespace()).add("a fact written after three failures")
    with (
        open_client(kind, served.server.url, key[:-1] + "x", retries=0) as wrong,
        pytest.raises(AuthError),
    ):
        wrong.whoami()
    assert len(flaky.requests) == 4
    assert any(
        r.name == "memdir.client" and "attempt 2 of 5" in r.getMessage() for r in caplog.records
    )
    logged = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert key not in logged and key[-43:] not in logged
    assert "a fact written" not in logged
