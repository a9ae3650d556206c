"""Export and import of a namespace as a ``.tar.gz`` through ``memdir serve``, over real HTTP
to a real server process on each store: a round trip into another namespace is byte for byte,
conflicts are kept unless replaced, and hostile archives are refused whole (422) with the
reason, nothing written."""

from __future__ import annotations

import base64
import gzip
import http.client
import io
import os
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from _server import Served, fresh_namespace, wait_for
from memdir.store.archive import unpack_archive
from memdir.store.transfer import workspace_files
from memdir.workspace import Workspace

LIMIT = 256 << 20  # memdir serve's default --import-limit
MAX_FILES = 10_000  # and --import-max-files


@pytest.fixture
def admin(served: Served) -> Iterator[httpx.Client]:
    with served.client("acme_admin") as client:
        yield client


def _files(ws: Workspace) -> dict[str, bytes]:
    return {rel: ws.read_bytes(rel) for rel in workspace_files(ws)}


def _import(client: httpx.Client, ns: str, archive: bytes, **params: Any) -> httpx.Response:
    return client.post(
        f"/v1/namespaces/{ns}/import",
        content=archive,
        params=params,
        headers={"Content-Type": "application/gzip"},
    )


def _export(client: httpx.Client, ns: str) -> bytes:
    response = client.get(f"/v1/namespaces/{ns}/export")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/gzip"
    assert response.headers["content-disposition"] == f'attachment; filename="{ns}.tar.gz"'
    return response.content


def _fill(client: httpx.Client, ns: str) -> None:
    """A namespace with a bit of everything: ledgers, a curated MEMORY.md, sessions, a flush."""
    base = f"/v1/namespaces/{ns}"
    for fact in ("Wang Lei owns billing", "数据库迁移在周五晚上进行"):
        assert client.post(f"{base}/memories", json={"text": fact}).status_code == 201
    etag = client.get(f"{base}/memory-md").headers["etag"]
    put = client.put(
        f"{base}/memory-md",
        content=b"# Memory\n\n- Deploys need two approvals\n",
        headers={"If-Match": etag, "Content-Type": "text/markdown"},
    )
    assert put.status_code == 200, put.text
    messages = [
        {"role": "user", "content": "Remember that Wang Lei prefers PostgreSQL 16 for billing."},
        {"role": "assistant", "content": "Noted: billing runs PostgreSQL 16."},
    ]
    logged = client.post(f"{base}/sessions/s1/messages", json={"messages": messages})
    assert logged.status_code == 201, logged.text
    flush = {"session_id": "s1", "format": "openai", "messages": messages}
    assert client.post(f"{base}/flush", json=flush).json()["written"]


def test_an_export_imported_elsewhere_is_byte_for_byte_the_same(
    served: Served, admin: httpx.Client, tmp_path: Any
) -> None:
    source, target = fresh_namespace(), fresh_namespace()
    _fill(admin, source)
    archive = _export(admin, source)
    expected = _files(served.local(source))
    unpack_archive(io.BytesIO(archive), tmp_path / "unpacked")
    assert _files(Workspace(tmp_path / "unpacked", create=False)) == expected

    done = _import(admin, target, archive)
    assert done.status_code == 200, done.text
    assert done.json() == {
        "files": len(expected),
        "unchanged": 0,
        "conflicts": [],
        "bytes": sum(len(data) for data in expected.values()),
    }
    assert _files(served.local(target)) == expected
    again = _import(admin, target, archive).json()
    assert again == {"files": 0, "unchanged": len(expected), "conflicts": [], "bytes": 0}
    hits = admin.get(f"/v1/namespaces/{target}/search", params={"q": "approvals"}).json()
    assert [h["path"] for h in hits["hits"]] == ["MEMORY.md"]  # searchable at once


def _archive(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member, data in members:
            member.size = len(data) if member.isfile() else 0
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return out.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, link
    return member


def test_a_conflict_is_kept_unless_replace_is_asked(served: Served, admin: httpx.Client) -> None:
    ns = fresh_namespace()
    _fill(admin, ns)
    kept = served.local(ns).read_bytes("MEMORY.md")
    other = _archive([(_member("MEMORY.md"), b"# Memory\n\n- another team's view\n")])
    conflict = _import(admin, ns, other)
    assert conflict.json()["conflicts"] == [f"{ns}:MEMORY.md"] and conflict.json()["files"] == 0
    assert served.local(ns).read_bytes("MEMORY.md") == kept
    replaced = _import(admin, ns, other, replace="true").json()
    assert replaced["files"] == 1 and replaced["conflicts"] == []
    assert served.local(ns).read_bytes("MEMORY.md") == b"# Memory\n\n- another team's view\n"


Members = list[tuple[tarfile.TarInfo, bytes]]
SOUND: Members = [(_member("memory/2020-01-01.md"), b"- an innocent bullet\n")]


def _after_a_sound_member(members: Callable[[], Members]) -> Callable[[], bytes]:
    """An archive whose first member is sound (it must not land either), then ``members``."""
    return lambda: _archive([*SOUND, *members()])


def _declares_too_much() -> bytes:
    member = _member("memory/big.md")
    member.size = LIMIT + 1  # the header says so; the bytes never come
    return gzip.compress(member.tobuf(format=tarfile.PAX_FORMAT) + b"x" * 512)


HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "dotdot": (
        _after_a_sound_member(lambda: [(_member("../../evil.md"), b"x")]),
        "leads out of the archive (..)",
    ),
    "absolute": (
        _after_a_sound_member(lambda: [(_member("/etc/evil.md"), b"x")]),
        "has an absolute name",
    ),
    "symlink": (
        _after_a_sound_member(
            lambda: [(_member("memory/link.md", tarfile.SYMTYPE, "/etc/passwd"), b"")]
        ),
        "is a symlink",
    ),
    "hardlink": (
        _after_a_sound_member(
            lambda: [(_member("AGENTS.md", tarfile.LNKTYPE, "/etc/passwd"), b"")]
        ),
        "is a hard link",
    ),
    "device": (
        _after_a_sound_member(lambda: [(_member("memory/d", tarfile.CHRTYPE), b"")]),
        "is a device",
    ),
    "twice": (
        _after_a_sound_member(lambda: [(_member("MEMORY.md"), b"a"), (_member("MEMORY.md"), b"b")]),
        "comes twice",
    ),
    "too many": (
        _after_a_sound_member(
            lambda: [(_member(f"memory/f{i}.md"), b"x") for i in range(MAX_FILES)]
        ),
        f"holds more than {MAX_FILES:,} members",
    ),
    "too large": (_declares_too_much, f"unpacks to more than {LIMIT:,} bytes"),
    "not gzip": (lambda: b"PK\x03\x04 a zip file", "not a gzip-compressed tar archive"),
    "other namespaces": (
        _after_a_sound_member(
            lambda: [(_member("ns/beta.victim/MEMORY.md"), b"# Memory\n\n- owned\n")]
        ),
        "holds namespaces (ns/)",
    ),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_archive_is_refused_whole_with_the_reason(
    served: Served, admin: httpx.Client, kind: str
) -> None:
    ns = fresh_namespace()
    _fill(admin, ns)
    before = _files(served.local(ns))
    build, reason = HOSTILE[kind]
    refused = _import(admin, ns, build())
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert reason in refused.json()["detail"]
    assert _files(served.local(ns)) == before
    assert not Workspace(served.workspace, namespace="beta.victim", create=False).exists()


def test_an_archive_cannot_plant_the_server_s_files(served: Served, admin: httpx.Client) -> None:
    ns = fresh_namespace()
    _fill(admin, ns)
    before = _files(served.local(ns))
    planted = _archive(
        [
            (_member(".memdir-server/keys.json"), b'{"version": 1, "keys": []}'),
            (_member(".index/memory.sqlite"), b"not an index"),
        ]
    )
    done = _import(admin, ns, planted)
    assert done.json() == {"files": 0, "unchanged": 0, "conflicts": [], "bytes": 0}
    assert _files(served.local(ns)) == before


def test_a_body_over_the_import_limit_is_413_before_it_is_read(served: Served) -> None:
    url = httpx.URL(served.server.url)
    assert url.host is not None and url.port is not None
    conn = http.client.HTTPConnection(url.host, url.port, timeout=60)
    try:
        conn.putrequest("POST", f"/v1/namespaces/{fresh_namespace()}/import")
        conn.putheader("Authorization", f"Bearer {served.keys.secrets['acme_admin']}")
        conn.putheader("Content-Type", "application/gzip")
        conn.putheader("Content-Length", str(LIMIT + 1))
        conn.endheaders()  # and not a byte of the body
        response = conn.getresponse()
        assert response.status == 413
        body = response.read().decode()
    finally:
        conn.close()
    assert f"the body is {LIMIT + 1:,} bytes; this route takes at most {LIMIT:,}" in body


def test_a_client_that_leaves_an_export_stops_it_and_frees_the_slot(
    served: Served, admin: httpx.Client
) -> None:
    ns = fresh_namespace()
    ws = Workspace(served.workspace, namespace=ns, create=True)
    ws.init()
    for i in range(40):  # 30 MB that gzip cannot shrink: more than the sockets hold
        ws.write_bytes(
            f"memory/2025-01-{i % 28 + 1:02d}-{i}.md", base64.b64encode(os.urandom(768_000))
        )
    with admin.stream("GET", f"/v1/namespaces/{ns}/export") as response:
        assert response.status_code == 200
        next(response.iter_bytes())  # then the client goes away
    busy = admin.post(f"/v1/namespaces/{ns}/consolidate", json={"dry_run": True})
    assert busy.status_code in (200, 429)

    def free() -> bool:
        answer = admin.post(f"/v1/namespaces/{ns}/consolidate", json={"dry_run": True})
        return answer.status_code == 200

    wait_for(free, "the export to stop and give the tenant's job slot back")
    assert "Traceback" not in served.server.log()


def test_export_and_import_need_an_admin_key_of_the_tenant(served: Served) -> None:
    ns = fresh_namespace()
    with served.client("acme_admin") as admin:
        _fill(admin, ns)
        archive = _export(admin, ns)
    before = _files(served.local(ns))
    for key, status in (("acme_read", 403), ("acme_write", 403), ("beta_admin", 404), (None, 401)):
        with served.client(key) as client:
            assert client.get(f"/v1/namespaces/{ns}/export").status_code == status, key
            refused = _import(client, ns, archive, replace="true")
            assert refused.status_code == status, (key, refused.text)
    assert _files(served.local(ns)) == before
