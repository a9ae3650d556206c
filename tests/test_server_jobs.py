"""The job routes of ``memdir serve`` (flush, compact, consolidate, maintenance), over real HTTP
to a real server process on each store: what they answer is what the library does in-process;
one job per tenant at a time (429), others' jobs alongside, the job timeout (503), scopes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from _server import Served, fresh_namespace, serve_store, wait_for
from _server_models import ANSWER, GATE_ENV
from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.memory import MemoryFlushManager
from memdir.messages import from_openai, stable_ids, to_openai
from memdir.models import ExtractiveModel
from memdir.sessions import SessionLog

TESTS = Path(__file__).parent
TOKEN = "sk-ant-api03-" + "c" * 40
CONVERSATION = [
    {"role": "user", "content": "Remember that Wang Lei prefers PostgreSQL 16 for billing."},
    {"role": "assistant", "content": "Noted: billing runs PostgreSQL 16, chosen by Wang Lei."},
    {"role": "user", "content": "The staging cluster moved to Frankfurt on 2026-03-02."},
    {"role": "assistant", "content": "Understood, staging is in Frankfurt since March."},
    {"role": "user", "content": f"Our deploy token is {TOKEN}, keep it safe."},
    {"role": "assistant", "content": "I will not repeat the token."},
]
LONG = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i}: {text}"}
    for i, text in enumerate(
        [
            "Wang Lei owns the billing service and its PostgreSQL 16 database",
            "the billing database backs up nightly to the Frankfurt bucket",
            "deploys need two approvals since the March incident",
            "the on-call rotation changes every Monday at 09:00",
            "王磊负责计费服务的数据库迁移",
            "the staging cluster runs Kubernetes 1.29",
            "alerts go to the #billing-oncall channel",
            "the March incident was a full disk on the primary",
            "we keep 14 days of write-ahead logs",
            "the failover drill is on the first Tuesday of each month",
            "the API gateway is Envoy",
            "what did we decide about the backups?",
        ]
    )
]


def _post(client: httpx.Client, ns: str, route: str, body: dict[str, Any] | None) -> httpx.Response:
    return client.post(f"/v1/namespaces/{ns}/{route}", json=body)


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    return body


# -- flush ----------------------------------------------------------------------------------


def test_flush_extracts_what_the_library_extracts_once(served: Served) -> None:
    ns, local_ns = fresh_namespace(), fresh_namespace()
    body = {"session_id": "s1", "format": "openai", "messages": CONVERSATION}
    with served.client("acme_write") as acme:
        done = _ok(_post(acme, ns, "flush", body))
        again = _ok(_post(acme, ns, "flush", body))  # a retry after a lost answer
        status = _ok(acme.get(f"/v1/namespaces/{ns}/maintenance"))
    local = served.local(local_ns)
    local.init()
    msgs = stable_ids(from_openai(CONVERSATION), "s1")
    expected = asyncio.run(
        MemoryFlushManager(local, ExtractiveModel()).flush_memories(msgs, session_id="s1")
    )
    assert done["written"] and done["bullets"] == list(expected.bullets)
    assert done["messages_flushed"] == expected.messages_flushed == len(CONVERSATION)
    assert done["redacted"] == expected.redacted
    ledger = served.local(ns).read_text(done["path"])
    assert all(f"- {b}" in ledger for b in done["bullets"]) and TOKEN not in ledger
    assert again["skipped"] == "no_new_messages" and again["bullets"] == []
    assert served.local(ns).read_text(done["path"]) == ledger  # nothing written twice
    assert status["consolidation_requested_at"] is not None  # for any replica to serve


def test_flush_of_memdir_messages_without_ids_is_retry_safe(served: Served) -> None:
    ns = fresh_namespace()
    messages = [{"role": m["role"], "content": m["content"]} for m in CONVERSATION[:4]]
    body = {"session_id": "s2", "messages": messages}
    with served.client("acme_write") as acme:
        first = _ok(_post(acme, ns, "flush", body))
        body["messages"] = [*messages, {"role": "user", "content": "Deploys need two approvals."}]
        second = _ok(_post(acme, ns, "flush", body))
    assert first["messages_flushed"] == 4 and second["messages_flushed"] == 1


def test_flush_refuses_what_it_cannot_flush(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as acme:
        for body in (
            {"session_id": "../x", "messages": CONVERSATION, "format": "openai"},
            {"session_id": "s1", "messages": [{"role": "wizard", "content": "x"}]},
            {"session_id": "s1", "messages": [{"role": "user"}] * 2_001},
            {"messages": CONVERSATION},
        ):
            response = _post(acme, ns, "flush", body)
            assert response.status_code == 422, response.text
            assert response.headers["content-type"] == "application/problem+json"


# -- compaction -----------------------------------------------------------------------------


def test_compact_returns_the_library_s_context_and_logs_the_originals(served: Served) -> None:
    ns, local_ns = fresh_namespace(), fresh_namespace()
    knobs = {"trigger_messages": 10, "keep_messages": 4}
    body = {"session_id": "c1", "format": "openai", "messages": LONG, **knobs}
    with served.client("acme_write") as acme:
        plan = _ok(_post(acme, ns, "compact", {**body, "dry_run": True}))
        done = _ok(_post(acme, ns, "compact", body))
        small = _ok(_post(acme, ns, "compact", {**body, "messages": LONG[:3]}))

    local = served.local(local_ns)
    local.init()
    model = ExtractiveModel()
    config = CompactionConfig(trigger_messages=10, keep_messages=4)
    msgs = stable_ids(from_openai(LONG), "c1")
    hook = MemoryFlushManager(local, model).compaction_hook("c1")
    compactor = ConversationCompactor(model, local, config, on_flush=hook)
    expected_plan = compactor.plan(msgs)
    expected = asyncio.run(compactor.compact_if_needed(msgs, session_id="c1"))
    assert expected is not None and expected.log_span is not None

    assert plan == {
        "dry_run": True,
        "reason": expected_plan.reason,
        "messages": expected_plan.messages,
        "tokens": expected_plan.tokens,
        "cut_index": expected_plan.cut_index,
        "summarized": expected_plan.summarized,
        "kept": expected_plan.kept,
    }
    assert done["compacted"] and done["dry_run"] is False and done["error"] is None
    assert done["messages"] == to_openai(expected.messages)
    assert done["summary"] == expected.summary and done["stages"] == list(expected.stages)
    assert done["before"] == {"messages": len(LONG), "tokens": expected.tokens_before}
    assert done["after"]["messages"] == expected.messages_after
    span = expected.log_span
    assert done["log"] == {
        "path": span.path,
        "start_line": span.start_line,
        "end_line": span.end_line,
    }
    logged = SessionLog(served.local(ns), "c1").read().records
    assert [r.msg.text for r in logged][: expected_plan.summarized] == [
        m["content"] for m in LONG[: expected_plan.summarized]
    ]
    ledgers = served.local(ns).ledgers()
    assert ledgers, "the compacted prefix was flushed to memory first"
    assert small["compacted"] is False and small["messages"] == LONG[:3]


# -- consolidation and maintenance ------------------------------------------------------------


def test_consolidate_merges_the_ledgers_and_a_dry_run_writes_nothing(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as acme:
        for fact in ("Wang Lei owns billing", "Deploys need two approvals"):
            assert acme.post(f"/v1/namespaces/{ns}/memories", json={"text": fact}).is_success
        before = served.local(ns).read_text("MEMORY.md")
        dry = _ok(_post(acme, ns, "consolidate", {"dry_run": True}))
        assert served.local(ns).read_text("MEMORY.md") == before
        done = _ok(acme.post(f"/v1/namespaces/{ns}/consolidate"))  # no body: not a dry run
        again = _ok(_post(acme, ns, "consolidate", {}))
        history = acme.get(f"/v1/namespaces/{ns}/consolidations").json()
    assert dry["dry_run"] and not dry["applied"] and dry["entries"] == 2
    assert done["applied"] and sorted(done["added"]) == sorted(dry["added"])
    assert "- Wang Lei owns billing" in served.local(ns).read_text("MEMORY.md")
    assert done["text"] == served.local(ns).read_text("MEMORY.md")
    assert again["skipped"] == "nothing_new"
    assert [r["status"] for r in history] == ["applied"]


def test_maintenance_runs_for_an_admin_and_says_when_it_ran(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as acme:
        flush = {"session_id": "m1", "format": "openai", "messages": CONVERSATION[:2]}
        _ok(_post(acme, ns, "flush", flush))
        waiting = _ok(acme.get(f"/v1/namespaces/{ns}/maintenance"))
        refused = _post(acme, ns, "maintenance/run", {})
    assert waiting["consolidation_requested_at"] is not None
    assert waiting["last_consolidation_at"] is None
    assert waiting["maintenance_lease"] is None and waiting["consolidation_lease"] is None
    _problem(refused, 403, "insufficient-scope")
    with served.client("acme_admin") as admin:
        dry = _ok(_post(admin, ns, "maintenance/run", {"dry_run": True}))
        report = _ok(admin.post(f"/v1/namespaces/{ns}/maintenance/run"))
        after = _ok(admin.get(f"/v1/namespaces/{ns}/maintenance"))
    assert dry["dry_run"] and dry["index"] is None and dry["consolidation"]["dry_run"]
    assert report["errors"] == [] and report["skipped"] is None
    assert report["consolidation"]["applied"] and report["index"] is not None
    assert after["last_consolidation_at"] is not None
    assert after["consolidation_requested_at"] is None  # served


def test_job_routes_need_the_scope_and_the_tenant(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as acme:
        assert acme.post(f"/v1/namespaces/{ns}/memories", json={"text": "a fact"}).is_success
    flush = {"session_id": "s1", "messages": CONVERSATION, "format": "openai"}
    routes = [
        ("flush", flush),
        ("compact", {**flush, "force": True}),
        ("consolidate", {}),
        ("maintenance/run", {}),
    ]
    with served.client("acme_read") as reader, served.client("beta_admin") as beta:
        for route, body in routes:
            _problem(_post(reader, ns, route, body), 403, "insufficient-scope")
            _problem(_post(beta, ns, route, body), 404, "namespace-not-found")
        _problem(beta.get(f"/v1/namespaces/{ns}/maintenance"), 404, "namespace-not-found")
        assert reader.get(f"/v1/namespaces/{ns}/maintenance").status_code == 200
    ws = served.local(ns)
    (ledger,) = [ws.read_text(rel) for _, rel in ws.ledgers()]
    assert "- a fact" in ledger and "Wang Lei" not in ledger  # nothing flushed
    assert ws.stat(SessionLog(ws, "s1").rel_path) is None  # nothing compacted


# -- the job runner, with a model that waits for the test -------------------------------------


def _gated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, *args: str
) -> Iterator[tuple[Served, Path]]:
    gate = tmp_path_factory.mktemp("gate")
    env = {
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        GATE_ENV: str(gate),
    }
    model = ("--model", "python:_server_models:gated")
    try:
        for served in serve_store(request, tmp_path_factory, *model, *args, env=env):
            yield served, gate
    finally:
        (gate / "open").touch()  # a job still waiting must end for the server to stop


@pytest.fixture(scope="module", params=["files", "postgres"])
def gated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, Path]]:
    yield from _gated(request, tmp_path_factory)


@pytest.fixture(scope="module", params=["files", "postgres"])
def impatient(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, Path]]:
    yield from _gated(request, tmp_path_factory, "--job-timeout", "1")


def _started(gate: Path) -> int:
    return len(list(gate.glob("started-*")))


def _flush(served: Served, key: str, ns: str) -> httpx.Response:
    body = {"session_id": "g1", "format": "openai", "messages": CONVERSATION[:2]}
    with served.client(key) as client:
        return _post(client, ns, "flush", body)


def test_one_job_per_tenant_runs_at_a_time_and_others_run_alongside(
    gated: tuple[Served, Path],
) -> None:
    served, gate = gated
    ns, other = fresh_namespace(), fresh_namespace("beta")
    body = {"session_id": "g1", "format": "openai", "messages": CONVERSATION[:2]}
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_flush, served, "acme_write", ns)
        wait_for(lambda: _started(gate) >= 1, "the first job to call the model")
        with served.client("acme_write") as acme, served.client("acme_admin") as admin:
            for client, route, sent in (
                (acme, "flush", body),
                (acme, "compact", {**body, "force": True}),
                (acme, "consolidate", {}),
                (admin, "maintenance/run", {}),
            ):
                busy = _problem(_post(client, fresh_namespace(), route, sent), 429, "job-running")
                assert busy["detail"].startswith("another job of this tenant runs now")
            refused = _post(acme, ns, "flush", body)
            assert refused.headers["retry-after"] == "5"
            # The tenant's other requests, and a dry run (no model), are answered meanwhile.
            plan = _post(acme, ns, "compact", {**body, "force": True, "dry_run": True})
            assert _ok(plan)["dry_run"] is True
            assert acme.post(f"/v1/namespaces/{ns}/memories", json={"text": "x"}).is_success
            assert acme.get(f"/v1/namespaces/{ns}/search", params={"q": "x"}).is_success
        second = pool.submit(_flush, served, "beta_write", other)
        wait_for(lambda: _started(gate) >= 2, "another tenant's job to run alongside")
        assert not first.done() and not second.done()
        (gate / "open").touch()
        for job in (first, second):
            assert _ok(job.result())["bullets"] == [ANSWER.removeprefix("- ")]
    assert _ok(_flush(served, "acme_write", fresh_namespace()))["written"]  # the slot is free


def test_a_job_past_the_timeout_is_stopped_and_a_retry_finishes_it(
    impatient: tuple[Served, Path],
) -> None:
    served, gate = impatient
    ns = fresh_namespace()
    stopped = _problem(_flush(served, "acme_write", ns), 503, "job-timeout")
    assert "job timeout (1 s)" in stopped["detail"]
    assert served.local(ns).ledgers() == []  # the model never answered: nothing written
    (gate / "open").touch()
    retried = _ok(_flush(served, "acme_write", ns))  # the slot was given back
    assert retried["written"] and retried["messages_flushed"] == 2
