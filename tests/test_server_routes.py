"""Every route of ``memdir serve`` on each store, over real HTTP to a real server process:
what it answers, and that it answers what the library answers in-process on the same store."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import date
from typing import Any

import httpx
import pytest

from _server import Served, fresh_namespace, memdir, wait_for
from memdir.index import MemoryIndex, SearchHit
from memdir.sessions import SessionLog
from memdir.store.ledger import append_block
from memdir.tools import format_hits, memory_search
from memdir.tools._sessions import find_in_sessions

TOKEN = "sk-ant-api03-" + "a" * 40
FACTS = [
    "Wang Lei prefers PostgreSQL 16 for the billing service",
    "The staging cluster moved to Frankfurt on 2026-03-02",
    "数据库迁移在周五晚上进行，负责人是王磊",
    "Deploys need two approvals since the March incident",
]


@pytest.fixture
def ns() -> str:
    return fresh_namespace()


@pytest.fixture
def acme(served: Served) -> Iterator[httpx.Client]:
    with served.client("acme_write") as client:
        yield client


def _add(client: httpx.Client, ns: str, text: str) -> dict[str, Any]:
    response = client.post(f"/v1/namespaces/{ns}/memories", json={"text": text})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


# -- meta ---------------------------------------------------------------------------------


def test_health_and_readiness_need_no_key(served: Served) -> None:
    with served.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ok"}
        document = client.get("/openapi.json").json()
        assert document["openapi"].startswith("3.1")


def test_whoami_says_what_the_key_is(served: Served) -> None:
    with served.client("team1") as client:
        me = client.get("/v1/whoami").json()
    assert me == {
        "tenant": "acme",
        "key_id": served.keys.ids["team1"],
        "scope": "write",
        "namespace_prefix": "acme.team1.",
        "namespace": None,
        "expires_at": None,
    }


def test_namespaces_lists_the_tenants_own_in_pages(served: Served, acme: httpx.Client) -> None:
    made = sorted(fresh_namespace() for _ in range(3))
    for name in made:
        _add(acme, name, "a fact")
    with served.client("beta_write") as beta:
        _add(beta, fresh_namespace("beta"), "beta's fact")
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = acme.get("/v1/namespaces", params=params).json()
        assert len(page["items"]) <= 2
        seen += [item["name"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert set(made) <= set(seen) and seen == sorted(seen)
    assert all(name.startswith("acme.") for name in seen)
    bad = acme.get("/v1/namespaces", params={"cursor": "!!not-a-cursor"})
    assert bad.status_code == 422


# -- memory -------------------------------------------------------------------------------


def test_add_writes_bullets_masks_secrets_and_cites_them(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    added = _add(acme, ns, "Rotate the key AKIAIOSFODNN7EXAMPLE monthly\n\nWang Lei owns billing")
    assert added["bullets"] == 2 and added["masked"] == 1 and added["index_error"] is None
    assert added["citation"] == f"{added['path']}#L{added['first_line']}-L{added['last_line']}"
    text = served.local(ns).read_text(added["path"])
    assert "- Wang Lei owns billing" in text and "AKIAIOSFODNN7EXAMPLE" not in text
    for bad, status in (({"text": "   "}, 422), ({"text": "x" * 32_001}, 422), ({}, 422)):
        response = acme.post(f"/v1/namespaces/{ns}/memories", json=bad)
        assert response.status_code == status
        assert response.headers["content-type"] == "application/problem+json"
    huge = acme.post(f"/v1/namespaces/{ns}/memories", json={"text": "y" * (2 << 20)})
    assert huge.status_code == 413 and huge.json()["code"] == "payload-too-large"
    assert huge.json()["detail"] == (
        f"the body is {len(huge.request.content):,} bytes; this route takes at most 1,048,576"
    )
    chunks = iter([b'{"text": "', b"z" * (2 << 20), b'"}'])  # no Content-Length: counted
    streamed = acme.post(
        f"/v1/namespaces/{ns}/memories",
        content=chunks,
        headers={"Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert streamed.json()["detail"] == "the body is larger; this route takes at most 1,048,576"
    assert "z" * 100 not in served.local(ns).read_text(added["path"])


@pytest.mark.parametrize(
    "query", ["PostgreSQL billing", "staging Frankfurt", "数据库迁移", "approvals", "nothing-here"]
)
def test_search_finds_what_the_library_finds(
    served: Served, acme: httpx.Client, ns: str, query: str
) -> None:
    for fact in FACTS:
        _add(acme, ns, fact)
    response = acme.get(f"/v1/namespaces/{ns}/search", params={"q": query, "limit": 5})
    assert response.status_code == 200, response.text
    served_hits = response.json()["hits"]
    ws = served.local(ns)
    index = MemoryIndex(ws)
    try:
        index.refresh()
        local = index.search(query, limit=5)
    finally:
        index.close()
    fields = [f.name for f in dataclasses.fields(SearchHit)]
    as_hits = [
        SearchHit(**{k: tuple(h[k]) if isinstance(h[k], list) else h[k] for k in fields})
        for h in served_hits
    ]
    assert as_hits == local
    # Each hit says where its bullets came from: an add through the API.
    assert all(hit.sources and all("added" in s for s in hit.sources) for hit in as_hits)
    # The tool's text, rendered from the server's answer, is the tool's text in-process.
    assert format_hits(query, as_hits) == memory_search(query, 5, workspace=ws)
    if query == "nothing-here":
        assert served_hits == []


def test_search_refuses_what_it_cannot_search(acme: httpx.Client, ns: str) -> None:
    _add(acme, ns, "a fact")
    for params in (
        {},
        {"q": ""},
        {"q": "x" * 1001},
        {"q": "x", "limit": 51},
        {"q": "x", "sources": "files"},
    ):
        response = acme.get(f"/v1/namespaces/{ns}/search", params=params)
        assert response.status_code == 422, params
        assert response.json()["errors"][0]["loc"][0] == "query"


def test_an_add_refuses_a_body_that_is_not_json_in_utf8(acme: httpx.Client, ns: str) -> None:
    for body in (b'{"text": ', b"(#\xef\xbf", b"\xff\xfe\xfd"):
        response = acme.post(
            f"/v1/namespaces/{ns}/memories",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["code"] == "invalid-request" and problem["errors"][0]["loc"][0] == "body"


def test_excerpt_reads_a_citation_as_memory_get_does(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    added = _add(acme, ns, "\n".join(FACTS))
    url = f"/v1/namespaces/{ns}/excerpt"
    cited = acme.get(
        url,
        params={"path": f"{added['path']}#L{added['first_line'] + 1}-L{added['first_line'] + 2}"},
    ).json()
    assert cited["lines"] == [f"- {FACTS[1]}", f"- {FACTS[2]}"]
    assert (
        cited["start_line"] == added["first_line"] + 1
        and cited["end_line"] == added["first_line"] + 2
    )
    whole = acme.get(url, params={"path": added["path"], "start_line": 1, "num_lines": 200}).json()
    assert whole["total_lines"] == whole["end_line"] and whole["lines"][-1] == f"- {FACTS[3]}"
    md = acme.get(url, params={"path": "MEMORY.md"}).json()
    assert md["lines"] == ["# Memory"]
    assert acme.get(url, params={"path": "memory/2020-01-01.md"}).status_code == 404
    for bad in ("../../etc/passwd", "AGENTS.md", "sessions/x.log.jsonl", "memory/a\x00b.md"):
        response = acme.get(url, params={"path": bad})
        assert response.status_code == 422, (bad, response.text)
    past_end = acme.get(url, params={"path": added["path"], "start_line": 999})
    assert past_end.status_code == 422 and "past the end" in past_end.json()["detail"]

    # A ledger cited before it was archived is read from the archive.
    ws = served.local(ns)
    old = append_block(ws, ["an old fact"], header="Memory Add", day=date(2025, 1, 2))
    ws.write_text("memory/archive/2025-01-02.md", ws.read_text(old.rel))
    ws.delete(old.rel)
    moved = acme.get(url, params={"path": "memory/2025-01-02.md#L3"}).json()
    assert moved["path"] == "memory/archive/2025-01-02.md"
    assert moved["requested"] == "memory/2025-01-02.md" and moved["lines"] == ["- an old fact"]


def test_ledgers_are_listed_in_pages_and_read_with_an_etag(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    _add(acme, ns, "today's fact")
    ws = served.local(ns)
    days = [date(2026, 1, d) for d in (2, 3, 4, 5, 6)]
    for day in days:
        append_block(ws, [f"fact of {day}"], header="Memory Add", day=day)
    ws.write_text("memory/archive/2025-12-31.md", "- archived fact\n")
    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = acme.get(f"/v1/namespaces/{ns}/ledgers", params=params).json()
        listed += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [item["date"] for item in listed][:5] == [d.isoformat() for d in days]
    assert len(listed) == 6 and all(not item["archived"] for item in listed)
    assert all(item["size"] == ws.stat(item["path"]).size for item in listed)  # type: ignore[union-attr]
    archived = acme.get(f"/v1/namespaces/{ns}/ledgers", params={"archived": True}).json()
    assert [i["path"] for i in archived["items"]] == ["memory/archive/2025-12-31.md"]

    one = acme.get(f"/v1/namespaces/{ns}/ledgers/2026-01-03")
    assert one.status_code == 200 and one.headers["content-type"].startswith("text/markdown")
    assert one.text == ws.read_text("memory/2026-01-03.md") and one.headers["etag"]
    assert acme.get(f"/v1/namespaces/{ns}/ledgers/2025-12-31").text == "- archived fact\n"
    assert acme.get(f"/v1/namespaces/{ns}/ledgers/2024-02-02").status_code == 404
    assert acme.get(f"/v1/namespaces/{ns}/ledgers/2024-02-31").status_code == 422
    assert acme.get(f"/v1/namespaces/{ns}/ledgers/..%2F..%2Fkeys").status_code in (404, 422)


def test_memory_md_is_read_with_its_version_as_etag(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    _add(acme, ns, "a fact")
    url = f"/v1/namespaces/{ns}/memory-md"
    first = acme.get(url)
    assert first.status_code == 200 and first.text == "# Memory\n"
    ws = served.local(ns)
    found = ws.read_versioned("MEMORY.md")
    assert found is not None and first.headers["etag"] == f'"{found.version}"'
    same = acme.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert same.status_code == 304 and same.content == b""
    ws.write_text("MEMORY.md", "# Memory\n\n- Wang Lei owns billing\n")
    changed = acme.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert changed.status_code == 200 and "Wang Lei" in changed.text
    assert changed.headers["etag"] != first.headers["etag"]


def test_the_consolidation_log_is_what_memdir_memory_history_reads(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    url = f"/v1/namespaces/{ns}/consolidations"
    _add(acme, ns, "\n".join(FACTS))
    assert acme.get(url).json() == []
    memdir("-w", served.workspace, "-n", ns, "consolidate")
    records = acme.get(url).json()
    assert len(records) == 1 and records[0]["status"] == "applied"
    assert acme.get(url, params={"limit": 0}).status_code == 422


# -- sessions -----------------------------------------------------------------------------


def _append(client: httpx.Client, ns: str, sid: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(f"/v1/namespaces/{ns}/sessions/{sid}/messages", json=body)


def test_session_messages_are_logged_once_in_every_format(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    ours = {
        "messages": [
            {"id": "m1", "role": "user", "content": f"deploy billing with ansible, token {TOKEN}"},
            {"id": "m2", "role": "assistant", "content": "deployed to Frankfurt"},
        ]
    }
    first = _append(acme, ns, "s1", ours)
    assert first.status_code == 201
    assert first.json() == {"path": "sessions/s1.log.jsonl", "start_line": 1, "end_line": 2}
    again = _append(acme, ns, "s1", ours)
    assert again.status_code == 200 and again.json() is None
    openai = {
        "format": "openai",
        "messages": [{"role": "user", "content": "what about Frankfurt?"}],
    }
    assert _append(acme, ns, "s1", openai).json()["start_line"] == 3
    turn = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    anthropic = {"format": "anthropic", "system": "be brief", "messages": [turn]}
    assert _append(acme, ns, "s2", anthropic).json()["end_line"] == 2
    log = SessionLog(served.local(ns), "s1").read()
    assert [r.msg.text for r in log.records][1:] == [
        "deployed to Frankfurt",
        "what about Frankfurt?",
    ]
    assert TOKEN not in log.records[0].msg.text  # masked before logging

    for sid, body in (
        ("s1", {"messages": [{"content": "no role"}]}),
        ("s1", {"format": "openai", "messages": [{"role": "wizard", "content": "x"}]}),
        ("s1", {"format": "openai", "system": "x", "messages": []}),
        (".hidden", ours),
        ("a" * 129, ours),
    ):
        response = _append(acme, ns, sid, body)
        assert response.status_code == 422, (sid, response.text)


def test_sessions_are_listed_read_and_searched_as_the_library_does(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    for i, sid in enumerate(("alpha", "beta", "gamma")):
        body = {
            "messages": [
                {
                    "id": f"{sid}-1",
                    "role": "user",
                    "content": f"rotate the {sid} database password",
                },
                {"id": f"{sid}-2", "role": "assistant", "content": f"done, {i} replicas restarted"},
            ]
        }
        assert _append(acme, ns, sid, body).status_code == 201
    url = f"/v1/namespaces/{ns}/sessions"
    listed = acme.get(url, params={"limit": 2}).json()
    assert len(listed["items"]) == 2 and listed["next_cursor"]
    rest = acme.get(url, params={"limit": 2, "cursor": listed["next_cursor"]}).json()
    ids = [i["session_id"] for i in listed["items"] + rest["items"]]
    assert sorted(ids) == ["alpha", "beta", "gamma"] and ids[0] == "gamma"
    assert rest["next_cursor"] is None
    assert listed["items"][0]["summary"] == "rotate the gamma database password"

    messages = acme.get(f"{url}/beta/messages", params={"limit": 1}).json()
    assert messages["items"][0]["line"] == 1 and messages["next_cursor"]
    second = acme.get(f"{url}/beta/messages", params={"cursor": messages["next_cursor"]}).json()
    assert [m["msg"]["id"] for m in second["items"]] == ["beta-2"]
    assert acme.get(f"{url}/nobody/messages").status_code == 404

    hits = acme.get(f"{url}/search", params={"q": "database password", "limit": 5}).json()
    local = find_in_sessions(served.local(ns), "database password", 5)
    assert [(h["citation"], h["score"], h["text"]) for h in hits] == [
        (h.citation, h.score, h.text) for h in local
    ]
    only = acme.get(f"{url}/search", params={"q": "password", "session_id": "alpha"}).json()
    assert {h["session_id"] for h in only} == {"alpha"}
    assert acme.get(f"{url}/search", params={"q": "x", "session_id": "../x"}).status_code == 422
    mixed = {"q": "database password", "sources": ["memory", "sessions"]}
    both = acme.get(f"/v1/namespaces/{ns}/search", params=mixed).json()
    assert [h["citation"] for h in both["session_hits"]] == [h["citation"] for h in hits][:5]


# -- the access log -----------------------------------------------------------------------


def test_the_access_log_holds_no_memory_text_query_or_key(
    served: Served, acme: httpx.Client, ns: str
) -> None:
    canary = "canary-Zq7 the vault combination is 4-8-15"
    request_ids = [
        acme.post(f"/v1/namespaces/{ns}/memories", json={"text": canary}).headers["x-request-id"],
        acme.get(
            f"/v1/namespaces/{ns}/search", params={"q": "vault combination canary-Zq7"}
        ).headers["x-request-id"],
        acme.get("/v1/whoami", headers={"X-Request-Id": "trace-1234-abcd"}).headers["x-request-id"],
    ]
    assert request_ids[2] == "trace-1234-abcd"

    def logged() -> list[dict[str, Any]]:
        found = [e for e in served.server.access_log() if e["request_id"] in request_ids]
        return found if len(found) == 3 else []

    entries = wait_for(logged, "the access-log lines")
    routes = {e["route"] for e in entries}
    assert routes == {"/v1/namespaces/{ns}/memories", "/v1/namespaces/{ns}/search", "/v1/whoami"}
    key_id = served.keys.ids["acme_write"]
    assert all(e["tenant"] == "acme" and e["key_id"] == key_id for e in entries)
    log = served.server.log()
    assert "canary" not in log and "vault" not in log and ns not in log
    assert not any(secret in log for secret in served.keys.secrets.values())
