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
