"""The store routes over real HTTP, on both stores: files read, written by compare-and-swap,
appended to, listed and deleted; hostile paths refused before the store is touched;
``.index/`` and ``.memdir-server/`` never reached; lent locks exclude the server's own lock
users in another process."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from _server import Served, fresh_namespace
from memdir.errors import MemdirError
from memdir.workspace import Workspace


def _files(ns: str) -> str:
    return f"/v1/namespaces/{ns}/store/files"


def test_a_file_is_written_read_swapped_appended_listed_and_deleted(served: Served) -> None:
    ns = fresh_namespace()
    files = _files(ns)
    with served.client("acme_write") as http:
        assert http.get(f"/v1/namespaces/{ns}/store").status_code == 404
        assert http.put(f"/v1/namespaces/{ns}/store").json() == {"namespace": ns}
        assert http.put(f"{files}/notes/a.md", content="- 数据库\n".encode()).status_code == 204
        read = http.get(f"{files}/notes/a.md")
        assert read.content == "- 数据库\n".encode() and read.headers["etag"].startswith('"')
        version = read.headers["etag"]
        created = http.put(f"{files}/notes/a.md", content=b"x", headers={"If-None-Match": "*"})
        assert created.status_code == 412
        swapped = http.put(f"{files}/notes/a.md", content=b"- b\n", headers={"If-Match": version})
        assert swapped.status_code == 204
        stale = http.put(f"{files}/notes/a.md", content=b"- c\n", headers={"If-Match": version})
        assert stale.status_code == 412 and stale.json()["code"] == "version-conflict"
        assert http.post(f"{files}/notes/a.md", content=b"- c\n").json() == {"start": 4, "end": 8}
        assert http.get(f"{files}/notes/a.md", params={"offset": 4}).content == b"- c\n"
        assert http.get(f"{files}/notes/a.md", params={"offset": 99}).content == b""
        stat = http.get(f"/v1/namespaces/{ns}/store/stats/notes/a.md").json()
        assert stat["size"] == 8 and stat["tag"] and stat["identity"]
        top = http.get(f"/v1/namespaces/{ns}/store/dirs").json()
        names = {(e["name"], e["kind"]) for e in top["items"]}
        assert {("notes", "dir"), ("MEMORY.md", "file")} <= names
        assert not {n for n, _ in names} & {".index", ".memdir-server"}
        listed = http.get(f"/v1/namespaces/{ns}/store/dirs/notes").json()["items"]
        assert [(e["name"], e["stat"]["size"]) for e in listed] == [("a.md", 8)]
        assert http.delete(f"{files}/notes/a.md").json() == {"deleted": True}
        assert http.delete(f"{files}/notes/a.md").json() == {"deleted": False}
        missing = http.get(f"{files}/notes/a.md")
        assert missing.status_code == 404 and missing.json()["code"] == "not-found"


def test_a_write_sent_again_with_its_idempotency_key_is_made_once(served: Served) -> None:
    """A retry after a lost answer gets the first answer, not the failure its own write
    would now cause (412 for a create or a swap, ``deleted: false`` for a delete)."""
    ns = fresh_namespace()
    files = _files(ns)

    def once(http: httpx.Client, method: str, path: str, **options: Any) -> httpx.Response:
        key = {"Idempotency-Key": str(uuid.uuid4())}
        headers = {**key, **options.pop("headers", {})}
        first = http.request(method, path, headers=headers, **options)
        again = http.request(method, path, headers=headers, **options)
        assert again.status_code == first.status_code < 300, again.text
        assert again.headers.get("idempotency-replayed") == "true"
        assert again.content == first.content
        return first

    with served.client("acme_write") as http:
        once(http, "PUT", f"{files}/a.md", content=b"- one\n", headers={"If-None-Match": "*"})
        version = http.get(f"{files}/a.md").headers["etag"]
        once(http, "PUT", f"{files}/a.md", content=b"- two\n", headers={"If-Match": version})
        once(http, "POST", f"{files}/a.md", content=b"- three\n")
        assert http.get(f"{files}/a.md").content == b"- two\n- three\n"  # appended once
        assert once(http, "DELETE", f"{files}/a.md").json() == {"deleted": True}
        reused = http.put(f"{files}/b.md", content=b"x", headers={"Idempotency-Key": "k-1"})
        other = http.put(f"{files}/b.md", content=b"y", headers={"Idempotency-Key": "k-1"})
        assert reused.status_code == 204 and other.status_code == 422
        assert http.get(f"{files}/b.md").content == b"x"


def test_a_listing_walks_its_pages(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as http:
        for n in range(5):
            assert http.put(f"{_files(ns)}/many/{n}.md", content=b"x").status_code == 204
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = http.get(f"/v1/namespaces/{ns}/store/dirs/many", params=params).json()
            seen += [e["name"] for e in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert seen == [f"{n}.md" for n in range(5)]


@pytest.mark.parametrize(
    ("path", "statuses"),
    [
        ("..%2F..%2Fkeys.json", {404, 422}),
        ("%2e%2e/%2e%2e/x", {404, 422}),
        ("a/..%2F..%2F..%2Fx", {404, 422}),
        ("memory/%00x.md", {422}),
        (".index/memory_index.db", {403}),
        ("memory/../.index/locks/x.lease", {403}),
        (".memdir-server/keys.json", {403}),
        ("x" * 5000, {422}),
    ],
)
def test_hostile_paths_are_refused_and_reach_nothing(
    served: Served, path: str, statuses: set[int]
) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as http:
        assert http.put(f"{_files(ns)}/memory/x.md", content=b"- mine\n").status_code == 204
        for method, body in (
            ("GET", None),
            ("PUT", b"owned"),
            ("POST", b"owned"),
            ("DELETE", None),
        ):
            answer = http.request(method, f"{_files(ns)}/{path}", content=body)
            assert answer.status_code in statuses, (method, path, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
        assert http.get(f"/v1/namespaces/{ns}/store/dirs/.index").status_code == 403
    if served.store == "files":  # nothing was written anywhere
        from pathlib import Path

        written = [p for p in Path(served.workspace).rglob("*") if p.is_file()]
        assert not [p for p in written if b"owned" in p.read_bytes()]


def test_scopes_and_tenants_hold_on_the_store(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_write") as http:
        assert http.put(f"{_files(ns)}/notes/secret.md", content=b"acme only").status_code == 204
    with served.client("acme_read") as reader:
        assert reader.get(f"{_files(ns)}/notes/secret.md").content == b"acme only"
        refused = reader.put(f"{_files(ns)}/notes/secret.md", content=b"overwritten")
        assert refused.status_code == 403 and refused.json()["code"] == "insufficient-scope"
    with served.client("beta_write") as stranger:
        for method in ("GET", "PUT", "POST", "DELETE"):
            answer = stranger.request(method, f"{_files(ns)}/notes/secret.md", content=b"x")
            assert answer.status_code == 404 and "acme only" not in answer.text
        taken = stranger.post(
            f"/v1/namespaces/{ns}/store/locks/job", json={"token": str(uuid.uuid4())}
        )
        assert taken.status_code == 404
    with served.client("acme_write") as http:
        assert http.get(f"{_files(ns)}/notes/secret.md").content == b"acme only"


async def test_a_lent_lock_keeps_the_servers_own_users_out(served: Served) -> None:
    ns = fresh_namespace()
    holder, other = str(uuid.uuid4()), str(uuid.uuid4())
    locks = f"/v1/namespaces/{ns}/store/locks"
    with served.client("acme_write") as http:
        taken = http.post(f"{locks}/job", json={"token": holder})
        assert taken.status_code == 200 and taken.json() == {"held": True, "ttl": 30.0}
        assert http.post(f"{locks}/job", json={"token": holder}).status_code == 200  # a retry
        busy = http.post(f"{locks}/job", json={"token": other})
        assert busy.status_code == 409 and busy.json()["code"] == "lock-held"
        # Another process using the server's workspace directly waits for the lent lock.
        local = Workspace(served.workspace, namespace=ns, create=False)
        with pytest.raises(MemdirError, match="held by another"):
            async with local.async_lock("job", timeout=0.3):
                pass
        assert http.put(f"{locks}/job", json={"token": holder}).json()["held"] is True
        assert http.put(f"{locks}/job", json={"token": other}).json()["held"] is False
        assert http.delete(f"{locks}/job", params={"token": holder}).json()["held"] is True
        async with local.async_lock("job", timeout=10):
            inside = await asyncio.to_thread(http.post, f"{locks}/job", json={"token": other})
            assert inside.status_code == 409  # the local holder excludes the remote one
        assert http.post(f"{locks}/job", json={"token": other}).status_code == 200
        bad = http.post(f"{locks}/..%2Fx", json={"token": other})
        assert bad.status_code in (404, 422)
        assert http.post(f"{locks}/job", json={"token": "nope"}).status_code == 422
