"""The idempotency records of both stores, in-process: claims, replays, takeovers, expiry.

A lease or a time to live of 0 seconds has lapsed by the next statement, so the tests need
no clock and no waiting.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memdir.server.idempotency import Answer, IdempotencyStore, open_idempotency_store
from memdir.workspace import Workspace

LONG = 3600.0
ANSWER = Answer(status=201, headers={"content-type": "application/json"}, body=b'{"ok":1}')
FP = b"a" * 32
OTHER_FP = b"b" * 32


@pytest.fixture(params=["files", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IdempotencyStore]:
    if request.param == "files":
        yield open_idempotency_store(Workspace(tmp_path / "ws"))
    else:
        yield open_idempotency_store(Workspace(request.getfixturevalue("pg_url")))


def _token() -> str:
    return str(uuid.uuid4())


def test_a_key_is_claimed_once_and_its_answer_replayed(store: IdempotencyStore) -> None:
    first = _token()
    assert store.claim("acme", "k1", FP, first, lease=LONG, ttl=LONG).kind == "new"
    assert store.claim("acme", "k1", FP, _token(), lease=LONG, ttl=LONG).kind == "running"
    assert store.claim("acme", "k1", OTHER_FP, _token(), lease=LONG, ttl=LONG).kind == "mismatch"
    assert store.claim("beta", "k1", OTHER_FP, _token(), lease=LONG, ttl=LONG).kind == "new"
    assert store.finish("acme", "k1", first, ANSWER, ttl=LONG)
    again = store.claim("acme", "k1", FP, _token(), lease=LONG, ttl=LONG)
    assert again.kind == "replay" and again.answer == ANSWER
    assert store.claim("acme", "k1", OTHER_FP, _token(), lease=LONG, ttl=LONG).kind == "mismatch"


def test_a_lapsed_claim_is_taken_over_with_what_it_was_about_to_write(
    store: IdempotencyStore,
) -> None:
    dead = _token()
    assert store.claim("acme", "k2", FP, dead, lease=0, ttl=LONG).kind == "new"
    intent = {"op": "ledger-append", "rel": "memory/2026-01-02.md", "offset": 7, "bullets": ["x"]}
    assert store.record_intent("acme", "k2", dead, intent)
    alive = _token()
    taken = store.claim("acme", "k2", FP, alive, lease=LONG, ttl=LONG)
    assert taken.kind == "takeover" and taken.intent == intent
    # the run that lost its claim can neither renew it, record, nor answer
    assert not store.renew("acme", "k2", dead, lease=LONG)
    assert not store.record_intent("acme", "k2", dead, {"op": "other"})
    assert not store.finish("acme", "k2", dead, ANSWER, ttl=LONG)
    assert store.renew("acme", "k2", alive, lease=LONG)
    assert store.claim("acme", "k2", FP, _token(), lease=LONG, ttl=LONG).kind == "running"


def test_an_error_gives_the_claim_up(store: IdempotencyStore) -> None:
    holder = _token()
    store.claim("acme", "k3", FP, holder, lease=LONG, ttl=LONG)
    store.release("acme", "k3", holder)  # nothing was about to be written: the key is free
    assert store.claim("acme", "k3", OTHER_FP, _token(), lease=LONG, ttl=LONG).kind == "new"
    holder = _token()
    store.claim("acme", "k4", FP, holder, lease=LONG, ttl=LONG)
    assert store.record_intent("acme", "k4", holder, {"op": "ledger-append"})
    store.release("acme", "k4", holder)  # something may have been written: taken over at once
    taken = store.claim("acme", "k4", FP, _token(), lease=LONG, ttl=LONG)
    assert taken.kind == "takeover" and taken.intent == {"op": "ledger-append"}


def test_a_record_lives_for_its_ttl_then_goes(store: IdempotencyStore) -> None:
    kept, gone = _token(), _token()
    store.claim("acme", "kept", FP, kept, lease=LONG, ttl=LONG)
    store.finish("acme", "kept", kept, ANSWER, ttl=LONG)
    store.claim("acme", "gone", FP, gone, lease=LONG, ttl=LONG)
    store.finish("acme", "gone", gone, ANSWER, ttl=0)
    held = _token()
    store.claim("acme", "held", FP, held, lease=LONG, ttl=0)  # running: outlives its ttl
    assert store.purge() == 1
    assert store.claim("acme", "gone", OTHER_FP, _token(), lease=LONG, ttl=LONG).kind == "new"
    assert store.claim("acme", "kept", FP, _token(), lease=LONG, ttl=LONG).kind == "replay"
    assert store.claim("acme", "held", FP, _token(), lease=LONG, ttl=LONG).kind == "running"


def _answered(store: IdempotencyStore, tenant: str, key: str, namespace: str, ttl: float) -> None:
    holder = _token()
    store.claim(tenant, key, FP, holder, lease=LONG, ttl=ttl, namespace=namespace)
    assert store.finish(tenant, key, holder, ANSWER, ttl=ttl)


def test_an_erased_record_refuses_its_key_until_it_would_have_expired(
    store: IdempotencyStore,
) -> None:
    _answered(store, "acme", "e1", "acme.a", LONG)
    _answered(store, "acme", "e2", "acme.b", LONG)
    _answered(store, "beta", "e1", "acme.a", LONG)
    _answered(store, "acme", "e3", "", LONG)  # a route that writes into no namespace
    _answered(store, "acme", "e4", "acme.a", 0)  # expired
    running = _token()
    store.claim("acme", "e5", FP, running, lease=LONG, ttl=LONG, namespace="acme.a")
    store.record_intent("acme", "e5", running, {"op": "ledger-append", "bullets": ["x"]})
    found = sorted(store.records("acme.a"), key=lambda r: (r.tenant, r.ref))
    assert [(r.tenant, r.namespace) for r in found] == [
        ("acme", "acme.a"),
        ("acme", "acme.a"),
        ("beta", "acme.a"),
    ]
    assert {"op": "ledger-append", "bullets": ["x"]} in [r.content["intent"] for r in found]
    assert [r.content["body"] for r in found if r.content["intent"] is None] == [{"ok": 1}] * 2
    assert list(store.records(None)) == []  # the root: no record of a known namespace
    acme = [r for r in found if r.tenant == "acme"]
    assert store.erase(acme) == 2 and store.erase(acme) == 0
    for fp in (FP, OTHER_FP):
        assert store.claim("acme", "e1", fp, _token(), lease=LONG, ttl=LONG).kind == "erased"
    # the run that held e5 can neither answer nor keep writing
    assert not store.finish("acme", "e5", running, ANSWER, ttl=LONG)
    assert not store.record_intent("acme", "e5", running, {"op": "other"})
    assert store.claim("acme", "e5", FP, _token(), lease=LONG, ttl=LONG).kind == "erased"
    assert [r.tenant for r in store.records("acme.a")] == ["beta"]
    for tenant, key in (("acme", "e2"), ("beta", "e1"), ("acme", "e3")):
        assert store.claim(tenant, key, FP, _token(), lease=LONG, ttl=LONG).kind == "replay"


def test_an_erased_record_goes_when_it_would_have_expired(store: IdempotencyStore) -> None:
    holder = _token()
    store.claim("acme", "x1", FP, holder, lease=LONG, ttl=0, namespace="acme.a")
    store.finish("acme", "x1", holder, ANSWER, ttl=0)
    _answered(store, "acme", "x2", "acme.a", LONG)
    # an expired record is not read; erasing it deletes it
    assert [r.namespace for r in store.records("acme.a")] == ["acme.a"]
    assert store.erase(store.records("acme.a")) == 1
    assert store.purge() == 1  # x1, expired; the marker of x2 stays for its time
    assert store.claim("acme", "x1", OTHER_FP, _token(), lease=LONG, ttl=LONG).kind == "new"
    assert store.claim("acme", "x2", FP, _token(), lease=LONG, ttl=LONG).kind == "erased"


def test_records_of_a_schema_made_before_namespaces_were_kept_are_read_and_erased(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memdir.store.postgres import _schema

    older = {v: steps for v, steps in _schema.MIGRATIONS.items() if v <= 8}
    with monkeypatch.context() as patch:
        patch.setattr(_schema, "MIGRATIONS", older)
        ws = Workspace(pg_url)
        db = ws.store.db  # type: ignore[attr-defined]
        _schema.ensure_migrated(db)
        db.transaction(
            lambda cur: cur.execute(
                f'INSERT INTO "{db.schema}".idempotency (tenant, key, fingerprint, token, state,'
                " locked_until, expires_at, status, headers, body) VALUES ('acme', 'old', %s,"
                " %s, 'done', now(), now() + interval '1 hour', 201, '{}', %s)",
                (FP, uuid.uuid4(), b'{"said":"Quokka"}'),
            )
        )
    db.migrated = False
    store = open_idempotency_store(ws)
    assert store.claim("acme", "old", FP, _token(), lease=LONG, ttl=LONG).kind == "replay"
    found = list(store.records("acme.a"))  # a record of no namespace known is read anywhere
    assert [(r.namespace, r.content["body"]) for r in found] == [(None, {"said": "Quokka"})]
    assert store.erase(found) == 1
    assert store.claim("acme", "old", FP, _token(), lease=LONG, ttl=LONG).kind == "erased"
