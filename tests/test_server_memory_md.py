"""``PUT /v1/namespaces/{ns}/memory-md``: replacing ``MEMORY.md`` by compare-and-swap, over real
HTTP to a real ``memdir serve`` on each store: create, replace, a stale version (412), no
precondition (428), a retry after a lost answer, the size cap, secrets masked, the history."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from _server import Served, fresh_namespace
from memdir.memory import read_consolidation_log
from memdir.memory.curated import MAX_MEMORY_MD_BYTES

TOKEN = "sk-ant-api03-" + "b" * 40
CURATED = "# Memory\n\n- Wang Lei owns the billing service\n- 数据库迁移在周五晚上进行\n"


@pytest.fixture
def acme(served: Served) -> Iterator[httpx.Client]:
    with served.client("acme_write") as client:
        yield client


def _url(ns: str) -> str:
    return f"/v1/namespaces/{ns}/memory-md"


def _put(client: httpx.Client, ns: str, text: str, **headers: str) -> httpx.Response:
    sent = {"Content-Type": "text/markdown; charset=utf-8"}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    return client.put(_url(ns), content=text.encode("utf-8"), headers=sent)


def _problem(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code
    detail: str = response.json()["detail"]
    return detail


def test_create_then_replace_by_version(served: Served, acme: httpx.Client) -> None:
    ns = fresh_namespace()
    assert acme.get(_url(ns)).status_code == 404  # no namespace yet
    created = _put(acme, ns, CURATED, If_None_Match="*")
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["changed"] is True and body["masked"] == 0
    assert created.headers["etag"] == f'"{body["version"]}"'
    read = acme.get(_url(ns))
    assert read.text == CURATED and read.headers["etag"] == created.headers["etag"]

    edited = CURATED + "- Deploys need two approvals\n"
    replaced = _put(acme, ns, edited, If_Match=read.headers["etag"])
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["history_path"] is not None
    assert replaced.headers["etag"] != read.headers["etag"]
    ws = served.local(ns)
    assert ws.read_text("MEMORY.md") == edited
    assert ws.read_text(replaced.json()["history_path"]) == CURATED
    records = read_consolidation_log(ws)
    assert [(r["status"], r["by"]) for r in records] == [("replaced", "api"), ("replaced", "api")]
    assert records[-1]["added"] == ["Deploys need two approvals"]
    # The new version is searchable at once.
    hits = acme.get(f"/v1/namespaces/{ns}/search", params={"q": "approvals"}).json()["hits"]
    assert [h["path"] for h in hits] == ["MEMORY.md"]


def test_a_stale_version_is_412_with_the_current_etag(served: Served, acme: httpx.Client) -> None:
    ns = fresh_namespace()
    first = _put(acme, ns, CURATED, If_None_Match="*")
    stale = first.headers["etag"]
    ws = served.local(ns)
    ws.write_text("MEMORY.md", "# Memory\n\n- another writer's edit\n")  # a consolidation, say
    current = ws.read_versioned("MEMORY.md")
    assert current is not None

    refused = _put(acme, ns, CURATED + "- mine\n", If_Match=stale)
    detail = _problem(refused, 412, "version-conflict")
    assert refused.headers["etag"] == f'"{current.version}"'
    assert f'If-Match: "{current.version}"' in detail
    assert ws.read_text("MEMORY.md") == "# Memory\n\n- another writer's edit\n"

    again = _put(acme, ns, CURATED + "- mine\n", If_Match=refused.headers["etag"])
    assert again.status_code == 200, again.text
    exists = _put(acme, ns, "# Memory\n\n- a create that comes late\n", If_None_Match="*")
    _problem(exists, 412, "version-conflict")
    assert exists.headers["etag"] == again.headers["etag"]
    gone = fresh_namespace()
    _put(acme, gone, CURATED, If_None_Match="*")
    served.local(gone).delete("MEMORY.md")
    missing = _put(acme, gone, CURATED, If_Match=first.headers["etag"])
    assert "If-None-Match: *" in _problem(missing, 412, "version-conflict")
    assert "etag" not in missing.headers


def test_a_put_without_a_precondition_is_428_and_writes_nothing(
    served: Served, acme: httpx.Client
) -> None:
    ns = fresh_namespace()
    _put(acme, ns, CURATED, If_None_Match="*")
    blind = _put(acme, ns, "# Memory\n\n- blind overwrite\n")
    detail = _problem(blind, 428, "precondition-required")
    assert "If-Match" in detail and "If-None-Match: *" in detail
    for headers in (
        {"If_Match": "abc"},  # not quoted
        {"If_None_Match": '"abc"'},
        {"If_Match": '"a"', "If_None_Match": "*"},
    ):
        _problem(_put(acme, ns, "# Memory\n\n- x\n", **headers), 422, "invalid-input")
    json_body = acme.put(_url(ns), json={"text": "# x"}, headers={"If-None-Match": "*"})
    _problem(json_body, 415, "unsupported-media-type")
    latin = acme.put(
        _url(ns),
        content="# Mémoire\n".encode("latin-1"),
        headers={"If-None-Match": "*", "Content-Type": "text/markdown"},
    )
    _problem(latin, 422, "invalid-input")
    assert served.local(ns).read_text("MEMORY.md") == CURATED


def test_a_put_sent_again_after_a_lost_answer_succeeds(served: Served, acme: httpx.Client) -> None:
    ns = fresh_namespace()
    created = _put(acme, ns, CURATED, If_None_Match="*")
    retried_create = _put(acme, ns, CURATED, If_None_Match="*")
    assert retried_create.status_code == 200 and retried_create.json()["changed"] is False
    assert retried_create.headers["etag"] == created.headers["etag"]
    edited = CURATED + "- one more\n"
    done = _put(acme, ns, edited, If_Match=created.headers["etag"])
    retried = _put(acme, ns, edited, If_Match=created.headers["etag"])  # the answer was lost
    assert retried.status_code == 200 and retried.json()["changed"] is False
    assert retried.headers["etag"] == done.headers["etag"]
    any_version = _put(acme, ns, CURATED, If_Match=f'W/"x", {done.headers["etag"]}')
    assert any_version.status_code == 200, any_version.text
    assert len(read_consolidation_log(served.local(ns))) == 3  # create, edit, back: no more


def test_secrets_are_masked_and_the_size_is_capped(served: Served, acme: httpx.Client) -> None:
    ns = fresh_namespace()
    masked = _put(acme, ns, f"# Memory\n\n- the deploy token is {TOKEN}\n", If_None_Match="*")
    assert masked.status_code == 201 and masked.json()["masked"] == 1
    assert TOKEN not in served.local(ns).read_text("MEMORY.md")
    huge = "# Memory\n" + "x" * MAX_MEMORY_MD_BYTES
    detail = _problem(
        _put(acme, ns, huge, If_Match=masked.headers["etag"]), 413, "payload-too-large"
    )
    assert detail.endswith(f"this route takes at most {MAX_MEMORY_MD_BYTES:,}")
    assert "xxxxxxxx" not in served.local(ns).read_text("MEMORY.md")


def test_only_a_write_key_of_the_tenant_replaces_it(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as acme:
        etag = _put(acme, ns, CURATED, If_None_Match="*").headers["etag"]
    with served.client("acme_read") as reader:
        _problem(_put(reader, ns, "# Memory\n", If_Match=etag), 403, "insufficient-scope")
    with served.client("beta_write") as beta:
        _problem(_put(beta, ns, "# Memory\n", If_Match=etag), 404, "namespace-not-found")
    with served.client() as nobody:
        _problem(_put(nobody, ns, "# Memory\n", If_Match=etag), 401, "invalid-key")
    assert served.local(ns).read_text("MEMORY.md") == CURATED
