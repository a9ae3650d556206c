"""A forget and a namespace delete reach ``memdir serve``'s idempotency records, on both
stores: a fact added and flushed through a real server with ``Idempotency-Key`` is forgotten
(the library and the command on the same workspace), then looked for in every byte of the
records (base64 bodies and ``bytea`` decoded) and of the whole store; a retry with an erased
record's key is answered 410 and writes nothing; other facts', namespaces' and tenants'
records are kept."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import httpx

from _canaries import KEPT, decoded, hits, scan_store
from _server import Served, fresh_namespace, memdir
from memdir.forget import Target, apply_forget, delete_namespace, plan_forget
from memdir.workspace import Workspace

KEY = "Idempotency-Key"


def _add(client: httpx.Client, ns: str, text: str, key: str) -> httpx.Response:
    return client.post(f"/v1/namespaces/{ns}/memories", json={"text": text}, headers={KEY: key})


def _flush(client: httpx.Client, ns: str, text: str, key: str) -> httpx.Response:
    body = {"session_id": "s1", "format": "openai", "messages": [{"role": "user", "content": text}]}
    return client.post(f"/v1/namespaces/{ns}/flush", json=body, headers={KEY: key})


def _erased(response: httpx.Response) -> bool:
    return response.status_code == 410 and response.json()["code"] == "idempotency-result-erased"


def _replayed(response: httpx.Response, first: httpx.Response) -> bool:
    return (
        response.status_code == first.status_code
        and response.headers.get("idempotency-replayed") == "true"
        and response.json() == first.json()
    )


def _records(served: Served) -> bytes:
    """Every byte of the server's idempotency records, encoded bodies decoded."""
    if served.store == "files":
        where = Path(served.workspace) / ".memdir-server" / "idempotency"
        return b"\n".join(decoded(p.read_bytes()) for p in sorted(where.rglob("*")) if p.is_file())
    parts = urlsplit(served.workspace)
    schema = parse_qs(parts.query)["schema"][0]
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    dump = subprocess.run(
        ["pg_dump", "--no-owner", "-t", f'"{schema}".idempotency', base],
        check=True,
        capture_output=True,
    ).stdout
    return decoded(dump)


def _ledgers(served: Served, ns: str) -> str:
    ws = served.local(ns)
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


def _make_old(served: Served, key: str) -> None:
    """Make the record of ``key`` (tenant acme) one kept before records named their namespace."""
    if served.store == "files":
        import hashlib

        name = hashlib.sha256(key.encode()).hexdigest() + ".json"
        path = Path(served.workspace) / ".memdir-server" / "idempotency" / "acme" / name
        record = json.loads(path.read_bytes())
        del record["ns"]
        path.write_text(json.dumps(record))
        return
    ws = Workspace(served.workspace, create=False)
    db: Any = ws.store.db  # type: ignore[attr-defined]
    db.transaction(
        lambda cur: cur.execute(
            f'UPDATE "{db.schema}".idempotency SET ns = NULL WHERE tenant = %s AND key = %s',
            ("acme", key),
        )
    )


def test_a_forgotten_fact_leaves_no_byte_in_the_records_and_its_retry_is_refused(
    served: Served,
) -> None:
    latin, chinese = "Okapivault3391", "蓝色企鹅队伍"
    ns = fresh_namespace()
    keys = {name: str(uuid.uuid4()) for name in ("add", "flush", "kept")}
    with served.client("acme_write") as acme:
        added = _add(acme, ns, f"The vault word is {latin}.", keys["add"])
        flushed = _flush(
            acme, ns, f"Remember that my team is called {chinese} since March 2024.", keys["flush"]
        )
        kept = _add(acme, ns, KEPT, keys["kept"])
    assert added.status_code == kept.status_code == 201 and flushed.status_code == 200
    assert chinese in " ".join(flushed.json()["bullets"])  # the answer holds the fact
    assert hits(_records(served), [latin, chinese]) == [latin, chinese]

    ws = served.local(ns)
    plan = plan_forget(ws, Target(text=latin.lower()))
    assert "  server idempotency records: 1" in plan.describe().split("\n")
    assert not hits(plan.describe().encode(), [latin])
    assert apply_forget(ws, plan, by="test").records == 1
    done = memdir("-w", served.workspace, "--namespace", ns, "forget", chinese, "--yes", "--json")
    preview, end = json.JSONDecoder().raw_decode(done.stdout)
    report = json.loads(done.stdout[end:])
    assert {"path": "server idempotency records", "lines": 1, "deleted": False} in preview["places"]
    assert report["records"] == 1

    assert hits(_records(served), [latin, chinese]) == []
    assert scan_store(Workspace(served.workspace, create=False), [latin, chinese]) == {}
    with served.client("acme_write") as acme:
        add_again = _add(acme, ns, f"The vault word is {latin}.", keys["add"])
        flush_again = _flush(
            acme, ns, f"Remember that my team is called {chinese} since March 2024.", keys["flush"]
        )
        kept_again = _add(acme, ns, KEPT, keys["kept"])
    assert _erased(add_again) and _erased(flush_again)
    assert _replayed(kept_again, kept)  # another fact's record is kept
    assert not hits(_ledgers(served, ns).encode(), [latin, chinese])  # nothing written back
    assert _ledgers(served, ns).count(KEPT) == 1


def test_the_records_of_other_namespaces_tenants_and_facts_are_kept(served: Served) -> None:
    fact, other = "The tide gauge code is Capybara6620.", "The kiln runs at 1260 degrees."
    ns, sibling, theirs = fresh_namespace(), fresh_namespace(), fresh_namespace("beta")
    key, sibling_key, other_key = (str(uuid.uuid4()) for _ in range(3))
    with served.client("acme_write") as acme, served.client("beta_write") as beta:
        first = _add(acme, ns, fact, key)
        other_first = _add(acme, ns, other, other_key)
        sibling_first = _add(acme, sibling, fact, sibling_key)
        theirs_first = _add(beta, theirs, fact, key)  # the same key: beta's own record
    apply_forget(served.local(ns), plan_forget(served.local(ns), Target(text="capybara6620")))
    with served.client("acme_write") as acme, served.client("beta_write") as beta:
        assert _erased(_add(acme, ns, fact, key))
        assert _replayed(_add(acme, ns, other, other_key), other_first)
        assert _replayed(_add(acme, sibling, fact, sibling_key), sibling_first)
        assert _replayed(_add(beta, theirs, fact, key), theirs_first)
    assert first.status_code == 201
    assert "Capybara6620" in _ledgers(served, sibling)  # a forget is of one namespace


def test_a_deleted_namespace_takes_its_records_and_a_retry_does_not_bring_it_back(
    served: Served,
) -> None:
    canary = "Wombatledger4471"
    ns, sibling = fresh_namespace(), fresh_namespace()
    key, sibling_key, delete_key = (str(uuid.uuid4()) for _ in range(3))
    with served.client("acme_write") as acme:
        assert _add(acme, ns, f"The locker code is {canary}.", key).status_code == 201
        sibling_first = _add(acme, sibling, KEPT, sibling_key)
    with served.client("acme_admin") as admin:
        deleted = admin.delete(f"/v1/namespaces/{ns}", headers={KEY: delete_key})
        delete_again = admin.delete(f"/v1/namespaces/{ns}", headers={KEY: delete_key})
    assert deleted.status_code == 200, deleted.text
    assert delete_again.status_code == 404  # its own record went too: no name is kept
    assert not hits(_records(served), [canary])
    with served.client("acme_write") as acme:
        assert _erased(_add(acme, ns, f"The locker code is {canary}.", key))
        assert _replayed(_add(acme, sibling, KEPT, sibling_key), sibling_first)
    # A write makes a missing namespace only once its key is claimed: the refused retry
    # leaves none behind.
    root = Workspace(served.workspace, create=False)
    assert ns not in root.namespaces() and not root.namespaced(ns, create=False).exists()
    with served.client("acme_write") as acme:  # a new write still makes it
        assert _add(acme, ns, KEPT, str(uuid.uuid4())).status_code == 201
    assert ns in root.namespaces() and KEPT in _ledgers(served, ns)


def test_a_record_kept_before_namespaces_were_recorded_is_read_for_the_fact(
    served: Served,
) -> None:
    fact, kept_fact = "The gate phrase is Pangolin5108.", "The boiler is serviced in May."
    ns, doomed, elsewhere = fresh_namespace(), fresh_namespace(), fresh_namespace()
    key, doomed_key, kept_key = (str(uuid.uuid4()) for _ in range(3))
    with served.client("acme_write") as acme:
        assert _add(acme, ns, fact, key).status_code == 201
        assert _add(acme, doomed, "The doomed note is Tapir2290.", doomed_key).status_code == 201
        kept = _add(acme, elsewhere, kept_fact, kept_key)
    for old in (key, doomed_key, kept_key):
        _make_old(served, old)
    ws = served.local(ns)
    plan = plan_forget(ws, Target(text="pangolin5108"))
    assert "  server idempotency records: 1" in plan.describe().split("\n")
    apply_forget(ws, plan)
    delete_namespace(Workspace(served.workspace, create=False), doomed, by="test")
    assert not hits(_records(served), ["Pangolin5108", "Tapir2290"])
    with served.client("acme_write") as acme:
        assert _erased(_add(acme, ns, fact, key))
        assert _erased(_add(acme, doomed, "The doomed note is Tapir2290.", doomed_key))
        assert _replayed(_add(acme, elsewhere, kept_fact, kept_key), kept)


def test_the_erasures_stay_with_the_server_and_a_client_cannot_write_them_back(
    served: Served,
) -> None:
    from _server import remote_workspace
    from memdir import HarnessAgent
    from memdir.messages import Msg
    from memdir.sessions import SessionLog
    from memdir.testing import FunctionModel

    canary = "Narwhalvault5521"
    said = f"Remember that the vault word is {canary}."
    remote = remote_workspace(served)
    ns = str(remote.namespace)
    held = [Msg.user(said), Msg.user(KEPT)]
    SessionLog(remote, "s1").append(held)  # a remote agent offloaded it
    local = served.local(ns)
    apply_forget(local, plan_forget(local, Target(text=canary.lower())))
    # The secret and the records are not served: not read, listed, written or exported.
    with served.client("acme_write") as acme:
        base = f"/v1/namespaces/{ns}/store"
        for rel in ("memory/.forget/secret", "memory/.forget/erased.jsonl"):
            assert acme.get(f"{base}/files/{rel}").status_code == 403
            assert acme.put(f"{base}/files/{rel}", content=b"").status_code == 403
        listed = acme.get(f"{base}/dirs/memory").json()
        assert ".forget" not in json.dumps(listed)
    with served.client("acme_admin") as admin:
        exported = admin.get(f"/v1/namespaces/{ns}/export")
    assert exported.status_code == 200, exported.text
    with tarfile.open(fileobj=io.BytesIO(exported.content), mode="r:gz") as tar:
        names = tar.getnames()
    assert "MEMORY.md" in names and not [n for n in names if ".forget" in n]
    # An archive does not set them either (nor clear the records).
    records = local.read_bytes("memory/.forget/erased.jsonl")
    with served.client("acme_admin") as admin:
        blank = io.BytesIO()
        with tarfile.open(fileobj=blank, mode="w:gz") as tar:
            for name in ("memory/.forget/erased.jsonl", "memory/.forget/secret"):
                member = tarfile.TarInfo(name)
                member.size = 1
                tar.addfile(member, io.BytesIO(b"x"))
        imported = admin.post(f"/v1/namespaces/{ns}/import?replace=true", content=blank.getvalue())
    assert imported.status_code == 200, imported.text
    assert local.read_bytes("memory/.forget/erased.jsonl") == records
    # A client that still holds the message writes it as the forget left it.
    SessionLog(remote, "s2").append(held)  # another session, the same messages
    agent = HarnessAgent(
        model=FunctionModel(lambda call: "noted"),
        workspace=remote,
        session_id="s3",
        memory_flush=False,
        maintenance=None,
    )
    agent.call_sync(said)  # the user says it again: the state it saves holds no text of it
    agent.close_sync()
    assert scan_store(local, [canary]) == {}
    assert KEPT in local.read_text("sessions/s2.log.jsonl")
