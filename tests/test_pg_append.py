"""A PostgreSQL append is one statement: retried after a lost answer, it is not written twice.

The connection can break after the server committed an append and before its answer
arrived; the store then runs the append again on a fresh connection. The append's key makes
the second run find the first one's chunk and answer with its offsets.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memdir.workspace import Workspace


def _lose_first_answer(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make the first operation of ``ws``'s store fail after it ran, as a dropped link does."""
    store: Any = ws.store
    real = store._tx
    answers: list[Any] = []

    def flaky(fn: Any, **kwargs: Any) -> Any:
        def once(cur: Any) -> Any:
            result = fn(cur)
            if not answers:
                answers.append(result)
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return result

        return real(once, **kwargs)

    monkeypatch.setattr(store, "_tx", flaky)
    return answers


def test_an_append_whose_answer_was_lost_is_not_written_twice(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(pg_url, tz="UTC")
    ws.write_text("memory/day.md", "first\n")
    lost = _lose_first_answer(ws, monkeypatch)
    start, end = ws.append_text("memory/day.md", "second\n")
    assert lost == [(6, 13)]  # it was committed, and its answer lost
    assert (start, end) == (6, 13)  # the retry answers with the same place
    assert ws.read_text("memory/day.md") == "first\nsecond\n"
    stat = ws.stat("memory/day.md")
    assert stat is not None and stat.size == 13


def test_appends_to_a_new_file_and_after_a_torn_tail(pg_url: str) -> None:
    ws = Workspace(pg_url, tz="UTC")
    assert ws.append_text("memory/new.md", "a\n") == (0, 2)
    ws.write_text("memory/torn.md", "half")
    assert ws.append_text("memory/torn.md", "b\n") == (5, 7)  # a newline first
    assert ws.append_text("memory/torn.md", "c\n") == (7, 9)
    assert ws.read_text("memory/torn.md") == "half\nb\nc\n"
    assert ws.read_text("memory/new.md") == "a\n"
