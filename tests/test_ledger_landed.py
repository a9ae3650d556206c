"""An append whose answer was lost: landed_since finds the block if it landed, once."""

from __future__ import annotations

from typing import Any

import pytest

from memdir.errors import MemdirError
from memdir.store.ledger import append_block, landed_since, line_at
from memdir.workspace import Workspace

BULLETS = ["the deploy moved to Friday", "staging uses Postgres 16"]


def _size(ws: Workspace, rel: str) -> int:
    found = ws.stat(rel)
    return found.size if found is not None else 0


def test_a_block_that_landed_is_found_where_it_was_written(any_ws: Workspace) -> None:
    ws = any_ws
    rel = ws.ledger_rel()
    append_block(ws, ["an earlier fact"], header="Memory Add")
    before = _size(ws, rel)
    assert landed_since(ws, rel, before, BULLETS) is None  # not written yet: write it
    written = append_block(ws, BULLETS, header="Memory Add")
    # another writer's block lands after it; ours is still the one found
    append_block(ws, ["someone else's fact"], header="Memory Flush")
    found = landed_since(ws, rel, before, BULLETS)
    assert found == written
    # the answer of the lost append can be rebuilt from it: the same lines
    assert found.bullet_lines(line_at(ws, rel, found.start)) == written.bullet_lines(
        line_at(ws, rel, written.start)
    )
    assert ws.read_text(rel).count("the deploy moved to Friday") == 1


def test_bullets_compare_as_ledger_bullets_do(any_ws: Workspace) -> None:
    ws = any_ws
    rel = ws.ledger_rel()
    written = append_block(ws, BULLETS, header="Memory Add")
    asked = ["  The deploy moved to   FRIDAY. ", "- staging uses Postgres 16"]
    assert landed_since(ws, rel, 0, asked) == written
    assert landed_since(ws, rel, 0, BULLETS[:1]) == written  # part of the block
    assert landed_since(ws, rel, 0, [*BULLETS, "a third bullet"]) is None


def test_only_blocks_after_the_offset_count(any_ws: Workspace) -> None:
    ws = any_ws
    rel = ws.ledger_rel()
    append_block(ws, BULLETS, header="Memory Add")  # the same facts, saved before
    after = _size(ws, rel)
    assert landed_since(ws, rel, after, BULLETS) is None
    assert landed_since(ws, "memory/2020-01-01.md", 0, BULLETS) is None  # no such ledger


def test_bad_arguments_are_clear_errors(any_ws: Workspace) -> None:
    rel = any_ws.ledger_rel()
    with pytest.raises(MemdirError, match="non-blank bullet"):
        landed_since(any_ws, rel, 0, ["  "])
    with pytest.raises(MemdirError, match="list of bullet strings"):
        landed_since(any_ws, rel, 0, "one bullet")
    with pytest.raises(MemdirError, match="byte offset"):
        landed_since(any_ws, rel, -1, BULLETS)


def test_an_add_retried_with_its_recorded_intent_is_written_once(any_ws: Workspace) -> None:
    from memdir.tools._core import add_memory

    ws = any_ws
    recorded: list[tuple[str, int, list[str]]] = []

    def record(rel: str, offset: int, bullets: list[str]) -> None:
        recorded.append((rel, offset, bullets))  # what a server keeps before the write

    first = add_memory(
        ws, "the deploy moved to Friday\nstaging uses Postgres 16", before_append=record
    )
    ((rel, offset, bullets),) = recorded
    assert rel == first.path and bullets == BULLETS

    def earlier(rel_now: str, offset_now: int, bullets_now: list[str]) -> Any:
        return landed_since(ws, rel, offset, bullets)  # the first try's answer was lost

    again = add_memory(
        ws, "the deploy moved to Friday\nstaging uses Postgres 16", before_append=earlier
    )
    assert (again.path, again.first_line, again.last_line) == (
        first.path,
        first.first_line,
        first.last_line,
    )
    assert ws.read_text(rel).count("the deploy moved to Friday") == 1
