"""``Idempotency-Key`` over real HTTP against a real server process, on both stores: a write
sent twice is made once and its answer replayed; a key reused for another request is refused;
a write whose server was killed after it appended is found, not written again, by the retry
on a restarted server."""

from __future__ import annotations

import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx

from _server import (
    Served,
    ServerProcess,
    fresh_namespace,
    make_keys,
    pausing,
    wait_for,
)
from memdir.workspace import Workspace

FACT = "Wang Lei moved the billing database to PostgreSQL 16"


def _key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def _ledger_text(workspace: str, ns: str) -> str:
    ws = Workspace(workspace, namespace=ns, create=False)
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


def test_the_same_write_sent_twice_is_made_once_and_its_answer_replayed(served: Served) -> None:
    ns, key = fresh_namespace(), _key()
    with served.client("acme_write") as acme:
        first = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": FACT}, headers=key)
        again = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": FACT}, headers=key)
        other = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": FACT}, headers=_key())
    assert first.status_code == again.status_code == 201, again.text
    assert "idempotency-replayed" not in first.headers
    assert again.headers["idempotency-replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["content-type"] == "application/json"
    assert other.status_code == 201 and "idempotency-replayed" not in other.headers
    assert _ledger_text(served.workspace, ns).count(FACT) == 2  # the first (once) and other


def test_openai_messages_sent_twice_with_one_key_are_logged_once(served: Served) -> None:
    # OpenAI messages carry no ids, so only the key keeps a retried append from doubling.
    ns, key = fresh_namespace(), _key()
    body = {"format": "openai", "messages": [{"role": "user", "content": FACT}]}
    path = f"/v1/namespaces/{ns}/sessions/s1/messages"
    with served.client("acme_write") as acme:
        first = acme.post(path, json=body, headers=key)
        again = acme.post(path, json=body, headers=key)
        logged = acme.get(path).json()["items"]
    assert first.status_code == again.status_code == 201
    assert again.headers["idempotency-replayed"] == "true" and again.json() == first.json()
    assert [m["msg"]["content"][0]["text"] for m in logged] == [FACT]


def test_a_key_sent_with_another_request_is_refused(served: Served) -> None:
    ns, key = fresh_namespace(), _key()
    with served.client("acme_write") as acme, served.client("beta_write") as beta:
        first = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": FACT}, headers=key)
        reused = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": "other"}, headers=key)
        elsewhere = acme.post(
            f"/v1/namespaces/{fresh_namespace()}/memories", json={"text": FACT}, headers=key
        )
        # keys are per tenant: another tenant's same key is its own
        theirs = beta.post(
            f"/v1/namespaces/{fresh_namespace('beta')}/memories", json={"text": FACT}, headers=key
        )
    assert first.status_code == 201
    for refused in (reused, elsewhere):
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "idempotency-key-reused"
    assert theirs.status_code == 201 and "idempotency-replayed" not in theirs.headers
    assert "other" not in _ledger_text(served.workspace, ns)


def test_an_error_is_not_kept_and_a_bad_key_is_refused(served: Served) -> None:
    ns, key = fresh_namespace(), _key()
    with served.client("acme_write") as acme:
        blank = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": "  "}, headers=key)
        fixed = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": FACT}, headers=key)
        for bad in ("x" * 256, "key with\ttab", "ключ".encode()):
            response = acme.post(
                f"/v1/namespaces/{ns}/memories",
                json={"text": FACT},
                headers={"Idempotency-Key": bad},
            )
            assert response.status_code == 422, bad
            assert response.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert blank.status_code == 422
    assert fixed.status_code == 201 and "idempotency-replayed" not in fixed.headers


def test_an_add_whose_server_was_killed_after_it_appended_is_found_by_the_retry(
    served_workspace: str, tmp_path: Path
) -> None:
    workspace = served_workspace
    keys = make_keys(workspace, [("w", "acme", "write", ())])
    paused = tmp_path / "paused"
    paused_adds = pausing("add:after-append", paused)
    lease = ("--idempotency-lease", "1")
    ns, lost, answered = fresh_namespace(), _key(), _key()
    add = f"/v1/namespaces/{ns}/memories"
    messages = f"/v1/namespaces/{ns}/sessions/s1/messages"
    chat = {"format": "openai", "messages": [{"role": "user", "content": "hello"}]}
    first = ServerProcess(workspace, *lease, env=paused_adds).start()
    try:
        with first.client(keys.secrets["w"]) as client:
            kept = client.post(messages, json=chat, headers=answered)
            assert kept.status_code == 201
            outcome: list[Any] = []

            def send() -> None:
                try:
                    outcome.append(client.post(add, json={"text": FACT}, headers=lost))
                except httpx.TransportError as exc:  # the answer is lost with the server
                    outcome.append(exc)

            sender = threading.Thread(target=send)
            sender.start()
            wait_for(paused.exists, "the add to pause after its append")
            with first.client(keys.secrets["w"]) as other:
                running = other.post(add, json={"text": FACT}, headers=lost)
            assert running.status_code == 409 and running.headers["retry-after"] == "1"
            assert running.json()["code"] == "idempotency-in-progress"
            first.stop(signal.SIGKILL)
            sender.join(timeout=60)
        assert isinstance(outcome[0], httpx.TransportError)
        assert _ledger_text(workspace, ns).count(FACT) == 1  # it landed; the answer did not
    finally:
        first.stop(signal.SIGKILL)
    second = ServerProcess(workspace, *lease).start()
    try:
        with second.client(keys.secrets["w"]) as client:

            def retried() -> httpx.Response | None:
                response = client.post(add, json={"text": FACT}, headers=lost)
                return None if response.status_code == 409 else response  # until the lease lapses

            found = wait_for(retried, "the dead server's claim to lapse")
            replayed = client.post(add, json={"text": FACT}, headers=lost)
            old = client.post(messages, json=chat, headers=answered)
    finally:
        second.stop()
    assert found.status_code == 201, found.text
    assert "idempotency-replayed" not in found.headers  # rebuilt from the block that landed
    text = _ledger_text(workspace, ns)
    assert text.count(FACT) == 1
    ws = Workspace(workspace, namespace=ns, create=False)
    body = found.json()
    lines = ws.read_text(body["path"]).splitlines()
    assert lines[body["first_line"] - 1] == f"- {FACT}"
    assert replayed.headers["idempotency-replayed"] == "true" and replayed.json() == body
    # an answer stored before the crash outlives the server that made it
    assert old.headers["idempotency-replayed"] == "true" and old.json() == kept.json()


def test_an_answer_is_kept_for_the_ttl_then_the_key_runs_anew(tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    keys = make_keys(workspace, [("w", "acme", "write", ())])
    server = ServerProcess(workspace, "--idempotency-ttl", "2s").start()
    ns, key = fresh_namespace(), _key()
    try:
        with server.client(keys.secrets["w"]) as client:
            add = f"/v1/namespaces/{ns}/memories"
            first = client.post(add, json={"text": FACT}, headers=key)
            again = client.post(add, json={"text": FACT}, headers=key)

            def run_anew() -> httpx.Response | None:
                response = client.post(add, json={"text": FACT}, headers=key)
                return None if "idempotency-replayed" in response.headers else response

            anew = wait_for(run_anew, "the answer's record to expire")
    finally:
        server.stop()
    assert first.status_code == 201 and again.headers["idempotency-replayed"] == "true"
    assert anew.status_code == 201 and anew.json()["first_line"] > first.json()["first_line"]
    assert _ledger_text(workspace, ns).count(FACT) == 2
