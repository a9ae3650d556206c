"""A store's named lock lent to a holder elsewhere (a client of ``memdir serve``), on files and
on PostgreSQL: it excludes the store's own lock users as they exclude it, a retry of the take
is no conflict, a holder that stops renewing loses it, and only its token renews or drops it.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from memdir.errors import MemdirError, WorkspaceError
from memdir.workspace import Workspace


def _token() -> str:
    return str(uuid.uuid4())


async def test_a_lent_lock_keeps_local_users_out_until_it_is_dropped(any_ws: Workspace) -> None:
    store, holder = any_ws.store, _token()
    assert store.take_lock("job", holder)
    assert store.take_lock("job", holder)  # a retry after a lost answer: still ours
    assert not store.take_lock("job", _token())
    with pytest.raises(MemdirError, match="held by another"):
        async with any_ws.async_lock("job", timeout=0.3):
            pass
    assert store.renew_lock("job", holder)
    assert not store.renew_lock("job", _token()) and not store.drop_lock("job", _token())
    assert store.drop_lock("job", holder)
    assert not store.renew_lock("job", holder)  # dropped: nothing to renew
    async with any_ws.async_lock("job", timeout=10):
        assert not store.take_lock("job", _token())  # a local holder is inside


def test_a_local_holder_waits_for_the_lent_lock(any_ws: Workspace) -> None:
    store, holder = any_ws.store, _token()
    assert store.take_lock("job", holder)
    entered = threading.Event()

    def local() -> None:
        with any_ws.lock("job"):
            entered.set()

    thread = threading.Thread(target=local)
    thread.start()
    try:
        # The local user polls the lease; it is still out after several of its polls.
        for _ in range(5):
            assert store.renew_lock("job", holder)
            assert not entered.wait(0.1)
    finally:
        store.drop_lock("job", holder)
    assert entered.wait(30)
    thread.join(30)


def test_a_holder_that_stops_renewing_loses_the_lock(
    any_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memdir.store._files as files
    import memdir.store.postgres as postgres

    monkeypatch.setattr(files, "LENT_LOCK_SECONDS", 0.3)
    monkeypatch.setattr(postgres, "LENT_LOCK_SECONDS", 0.3)
    store, stalled, other = any_ws.store, _token(), _token()
    assert store.take_lock("job", stalled)
    deadline = time.monotonic() + 30
    while not store.take_lock("job", other):
        assert time.monotonic() < deadline, "the lease never ended"
        time.sleep(0.05)
    assert not store.renew_lock("job", stalled)
    assert not store.drop_lock("job", stalled)
    assert store.drop_lock("job", other)
    with any_ws.lock("job"):
        pass


def test_a_token_must_be_a_uuid_and_a_name_a_lock_name(any_ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="UUID"):
        any_ws.store.take_lock("job", "not-a-token")
    with pytest.raises(WorkspaceError, match="lock name"):
        any_ws.store.take_lock("../x", _token())
