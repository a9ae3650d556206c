"""The server's namespace pool: a namespace deleted through another replica is found missing."""

from __future__ import annotations

from memdir.forget import delete_namespace
from memdir.server.pool import NamespacePool
from memdir.tools import memory_add
from memdir.workspace import Workspace


def test_a_namespace_deleted_elsewhere_is_found_missing_once_rechecked(
    any_ws: Workspace,
) -> None:
    here, there = NamespacePool(any_ws, recheck=0.0), NamespacePool(any_ws, recheck=3600.0)
    assert here.get("acme.alice", create=True) is not None
    ws = there.get("acme.alice", create=True)
    assert ws is not None and there.opened("acme.alice") is ws  # no look at the store
    memory_add("The kiln reaches 1280 degrees.", workspace=any_ws.namespaced("acme.alice"))
    delete_namespace(any_ws, "acme.alice", by="test")  # through another process
    assert there.opened("acme.alice") is not None  # trusted until its recheck is due
    assert here.opened("acme.alice") is None  # due: the store is asked again
    assert here.get("acme.alice", create=False) is None  # a read finds none: 404
    made = here.get("acme.alice", create=True)  # a write makes it anew, empty
    assert made is not None and made.ledgers() == []
