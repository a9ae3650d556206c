"""How many workspaces' indexes a process keeps open: settable, for a server of many namespaces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memdir._opencache import DEFAULT_INDEX_LIMIT
from memdir.errors import ConfigError
from memdir.sessions import shared_session_index
from memdir.tools import close_shared_indexes, memory_add, set_open_index_limit, shared_index
from memdir.workspace import Workspace


@pytest.fixture(autouse=True)
def _default_limit() -> Iterator[None]:
    yield
    set_open_index_limit(DEFAULT_INDEX_LIMIT)
    close_shared_indexes()


def namespaces(tmp_path: Path, count: int) -> list[Workspace]:
    root = Workspace(tmp_path / "ws", tz="UTC")
    spaces = [root.namespaced(f"user{i}") for i in range(count)]
    for ws in spaces:
        memory_add(f"a fact of {ws.namespace}", workspace=ws)
    return spaces


def test_a_raised_limit_keeps_every_busy_namespace_open(tmp_path: Path) -> None:
    spaces = namespaces(tmp_path, DEFAULT_INDEX_LIMIT + 4)
    first = shared_index(spaces[0])
    for ws in spaces[1:]:
        shared_index(ws)
    assert shared_index(spaces[0]) is not first  # the default closed the least recent
    set_open_index_limit(64)
    kept = [shared_index(ws) for ws in spaces]
    for ws in spaces:
        shared_index(ws).search("fact")
    assert [shared_index(ws) for ws in spaces] == kept  # none closed and reopened
    sessions = [shared_session_index(ws) for ws in spaces]
    assert [shared_session_index(ws) for ws in spaces] == sessions


def test_lowering_the_limit_closes_the_least_recent_at_once(tmp_path: Path) -> None:
    spaces = namespaces(tmp_path, 4)
    kept = [shared_index(ws) for ws in spaces]
    set_open_index_limit(2)
    assert shared_index(spaces[3]) is kept[3] and shared_index(spaces[2]) is kept[2]
    assert shared_index(spaces[0]) is not kept[0]
    # an index closed while a caller held it opens again on that caller's next use
    assert [h.path for h in kept[0].search("user0")] == [spaces[0].ledger_rel()]


def test_a_bad_limit_is_a_clear_error() -> None:
    for bad in (0, -1, 2.5, "64", True):
        with pytest.raises(ConfigError, match="open index limit"):
            set_open_index_limit(bad)  # type: ignore[arg-type]
