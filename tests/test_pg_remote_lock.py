"""A PostgreSQL lock held from elsewhere: taken, renewed and dropped by token, from any process.

A client of ``memdir serve`` holds a lock through whichever replica answers each of its calls,
so every step runs here in a process of its own (as two replicas would), and none of them
renews anything by itself: the holder does.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from memdir.errors import WorkspaceError
from memdir.store.postgres import PostgresStore
from memdir.store.postgres._locks import RowLock
from memdir.workspace import Workspace

# One step of a holder, as a replica runs it: python -c STEP URL NS NAME STEP TOKEN TTL
STEP = """
import sys
from memdir.workspace import Workspace
from memdir.store.postgres._locks import RowLock
url, ns, name, step, token, ttl = sys.argv[1:]
store = Workspace(url).store
store.init()
lock = RowLock(store.db, ns, name, ttl=float(ttl))
print(getattr(lock, step)(token))
"""


@pytest.fixture
def store(pg_url: str) -> PostgresStore:
    ws = Workspace(pg_url)
    ws.init()
    assert isinstance(ws.store, PostgresStore)
    return ws.store


def replica(url: str, ns: str, step: str, token: uuid.UUID, ttl: float = 600) -> bool:
    """Run ``step`` (take, renew, drop) of the lock ``remote`` in a process of its own."""
    args = [sys.executable, "-c", STEP, url, ns, "remote", step, str(token), str(ttl)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return {"True": True, "False": False}[done.stdout.strip()]


def test_a_remote_holder_takes_renews_and_drops_through_any_process(
    pg_url: str, store: PostgresStore
) -> None:
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    assert replica(pg_url, store.ns, "take", mine)  # through replica a
    assert replica(pg_url, store.ns, "take", mine)  # a retry after a lost answer: still ours
    assert not replica(pg_url, store.ns, "take", theirs)  # another holder, through replica b
    assert replica(pg_url, store.ns, "renew", mine)  # renewed through b
    assert not replica(pg_url, store.ns, "renew", theirs)
    assert not replica(pg_url, store.ns, "drop", theirs)  # not theirs to drop
    # the process that took it is gone; nothing of it renews the lock, which is still held
    local = RowLock(store.db, store.ns, "remote")
    assert not local.try_take()  # the server's own users are excluded too
    assert replica(pg_url, store.ns, "drop", mine)
    assert not replica(pg_url, store.ns, "drop", mine)
    assert local.try_take()  # free now
    assert not replica(pg_url, store.ns, "take", theirs)  # and a remote holder waits for it
    local.release()
    assert replica(pg_url, store.ns, "take", theirs)


def test_a_holder_that_stops_renewing_loses_the_lock_to_the_next(
    pg_url: str, store: PostgresStore
) -> None:
    gone, next_holder = uuid.uuid4(), uuid.uuid4()
    assert replica(pg_url, store.ns, "take", gone, ttl=0)  # expired as soon as it is taken
    assert replica(pg_url, store.ns, "take", next_holder)
    assert not replica(pg_url, store.ns, "renew", gone)  # it learns it lost the lock
    assert not replica(pg_url, store.ns, "drop", gone)  # and cannot free the new holder's
    assert not RowLock(store.db, store.ns, "remote").try_take()


def test_a_bad_token_is_a_clear_error(store: PostgresStore) -> None:
    lock = RowLock(store.db, store.ns, "remote")
    for step in (lock.take, lock.renew, lock.drop):
        with pytest.raises(WorkspaceError, match="not a lock token"):
            step("not-a-token")
