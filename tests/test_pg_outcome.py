"""A write whose answer was lost: found by its key on reconnect, or reported "outcome unknown".

Every test runs a real PostgreSQL behind the proxy of ``_pgproxy.py``, which forwards a write's
commit, keeps the server's answer back and cuts the connection, so the client cannot know
whether its write was made. While the client waits, another writer may take its turn (on a
direct connection), or the proxy goes down as a stopped server does. Nothing is timed: each
step waits for the protocol message before it.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _pgproxy import Proxy
from memdir.errors import OutcomeUnknownError, WorkspaceError
from memdir.store.postgres import PostgresStore
from memdir.store.postgres._locks import RowLock
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-30.md"


@pytest.fixture
def proxy(postgres_server: str) -> Iterator[Proxy]:
    made = Proxy(postgres_server)
    yield made
    made.close()


@pytest.fixture
def mine(proxy: Proxy, pg_url: str) -> Iterator[Workspace]:
    """The workspace of ``pg_url`` reached through the proxy (connect_timeout 2 s)."""
    from memdir.store.postgres import _connect

    schema = pg_url.rpartition("schema=")[2]
    url = proxy.url(f"schema={schema}&connect_timeout=2")
    yield Workspace(url, tz="UTC")
    with _connect._DATABASES_LOCK:
        opened = _connect._DATABASES.pop(url, None)
    if opened is not None:
        opened.close()


@pytest.fixture
def other(pg_url: str) -> Workspace:
    """The same workspace on a direct connection: another writer, and the reader of truth."""
    return Workspace(pg_url, tz="UTC")


def _store(ws: Workspace) -> PostgresStore:
    assert isinstance(ws.store, PostgresStore)
    return ws.store


def _lost(proxy: Proxy) -> None:
    assert proxy.lost.is_set(), "the proxy kept no answer back"
    assert not proxy.failures, proxy.failures


# -- the server is back at once: the key answers ----------------------------------------------


def test_an_append_whose_answer_was_lost_is_answered_from_its_key(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    mine.write_text(LEDGER, "first\n")
    proxy.lose_answer_to(b"append_chunk")
    assert mine.append_text(LEDGER, "second\n") == (6, 13)
    _lost(proxy)
    assert other.read_text(LEDGER) == "first\nsecond\n"


def test_an_append_is_found_though_its_file_was_rewritten_before_the_retry(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    mine.write_text(LEDGER, "first\n")
    # Another host rewrites the ledger (as a compaction would) while the client waits.
    proxy.lose_answer_to(b"append_chunk", then=lambda: other.write_text(LEDGER, "first\nsecond\n"))
    assert mine.append_text(LEDGER, "second\n") == (6, 13)
    _lost(proxy)
    assert other.read_text(LEDGER) == "first\nsecond\n"  # not appended a second time


def test_a_compare_and_swap_that_was_made_is_reported_made_after_another_writer_swapped(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    mine.write_text("MEMORY.md", "# Memory\n- a\n")
    seen = mine.read_versioned("MEMORY.md")
    assert seen is not None

    def another_swap() -> None:
        theirs = other.read_versioned("MEMORY.md")
        assert theirs is not None and theirs.data == b"# Memory\n- a\n- b\n"  # ours was made
        assert other.replace_if("MEMORY.md", "# Memory\n- a\n- b\n- c\n", theirs.version)

    proxy.lose_answer_to(b"COMMIT", then=another_swap)
    assert mine.replace_if("MEMORY.md", "# Memory\n- a\n- b\n", seen.version)
    _lost(proxy)
    assert other.read_text("MEMORY.md") == "# Memory\n- a\n- b\n- c\n"


def test_a_write_that_was_made_is_not_made_again_over_a_later_one(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    mine.write_text("memory/.state.json", '{"n": 1}')
    proxy.lose_answer_to(b"COMMIT", then=lambda: other.write_text("memory/.state.json", '{"n": 3}'))
    mine.write_text("memory/.state.json", '{"n": 2}')
    _lost(proxy)
    assert other.read_text("memory/.state.json") == '{"n": 3}'  # the later write stands


def test_a_create_that_was_made_is_reported_made_after_the_file_changed(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    proxy.lose_answer_to(b"COMMIT", then=lambda: other.write_text("memory/.history/v1", "later"))
    assert mine.create_text("memory/.history/v1", "mine")
    _lost(proxy)


def test_a_delete_that_was_made_is_reported_made(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    mine.write_text("memory/old.md", "- gone\n")
    proxy.lose_answer_to(b"COMMIT")
    assert mine.delete("memory/old.md")
    _lost(proxy)
    assert other.stat("memory/old.md") is None


def test_a_lock_that_was_taken_is_held_though_the_answer_was_lost(
    proxy: Proxy, mine: Workspace
) -> None:
    store = _store(mine)
    mine.init()
    lock = RowLock(store.db, store.ns, "session-1", ttl=600)
    proxy.lose_answer_to(b"COMMIT")
    try:
        assert lock.try_take()  # its own row, not another holder's
        _lost(proxy)
    finally:
        lock.release()
    assert RowLock(store.db, store.ns, "session-1").try_take()


# -- the server stays away: outcome unknown, with the key ---------------------------------------

WRITES: dict[str, tuple[Callable[[Workspace], Any], bytes]] = {
    "append": (lambda ws: ws.append_text(LEDGER, "- note\n"), b"append_chunk"),
    "write": (lambda ws: ws.write_text("memory/.state.json", "{}"), b"COMMIT"),
    "create": (lambda ws: ws.create_text("memory/.history/v2", "x"), b"COMMIT"),
    "replace_if": (lambda ws: ws.replace_if("memory/new.json", "{}", None), b"COMMIT"),
    "delete": (lambda ws: ws.delete("memory/old.md"), b"COMMIT"),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_write_whose_server_never_came_back_is_outcome_unknown_with_its_key(
    proxy: Proxy, mine: Workspace, other: Workspace, name: str
) -> None:
    write, marker = WRITES[name]
    mine.write_text("memory/old.md", "- old\n")
    before = other.read_text(LEDGER)
    proxy.lose_answer_to(marker, stay_down=True)
    with pytest.raises(OutcomeUnknownError) as info:
        write(mine)
    _lost(proxy)
    error = info.value
    assert isinstance(error, WorkspaceError)  # callers catching WorkspaceError still catch it
    message = str(error)
    assert "\n" not in message
    assert message.startswith("outcome unknown:") and error.key in message
    assert "connection refused" in message
    assert uuid.UUID(error.key)

    proxy.come_back()  # the server is back: the key says the write was made
    assert _store(mine).was_written(error.key)
    assert not _store(mine).was_written(str(uuid.uuid4()))
    if name == "append":
        assert other.read_text(LEDGER) == before + "- note\n"


def test_a_write_sent_to_a_server_already_gone_failed_and_says_so(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    mine.write_text(LEDGER, "first\n")  # the pool holds an idle connection
    proxy.go_down()  # the server stops: the idle connection is closed
    with pytest.raises(WorkspaceError) as info:
        mine.append_text(LEDGER, "second\n")
    assert not isinstance(info.value, OutcomeUnknownError)
    assert "the append to memory/2026-11-30.md was not written" in str(info.value)
    proxy.come_back()
    assert other.read_text(LEDGER) == "first\n"


def test_the_cli_says_outcome_unknown_and_names_the_key(
    proxy: Proxy, mine: Workspace, other: Workspace, tmp_path: Path
) -> None:
    mine.init()
    proxy.lose_answer_to(b"append_chunk", stay_down=True)
    done = subprocess.run(
        [sys.executable, "-m", "memdir", "-w", mine.url or "", "add", "Alice prefers tabs"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    _lost(proxy)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: outcome unknown: the append to memory/")
    key = last.split("(key ")[1].split(")")[0]
    assert "psycopg" not in done.stderr and "Traceback" not in done.stderr
    proxy.come_back()
    assert _store(mine).was_written(key)
    ledgers = [other.read_text(rel) for _, rel in other.ledgers()]
    assert sum(text.count("Alice prefers tabs") for text in ledgers) == 1


def test_the_memory_add_tool_says_outcome_unknown_and_names_the_key(
    proxy: Proxy, mine: Workspace, other: Workspace
) -> None:
    from memdir import memory_add

    mine.init()
    proxy.lose_answer_to(b"append_chunk", stay_down=True)
    said = memory_add("Alice prefers tabs", workspace=mine)
    _lost(proxy)
    assert said.startswith("Error: outcome unknown: the append to memory/")
    assert "\n" not in said and "before writing it again" in said
    key = said.split("(key ")[1].split(")")[0]
    proxy.come_back()
    assert _store(mine).was_written(key)
