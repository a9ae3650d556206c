"""A PostgreSQL append is one statement: offsets, new files and torn tails.

An append whose answer was lost is found by its key (``test_pg_outcome.py``, behind a proxy
that loses the answer).
"""

from __future__ import annotations

from memdir.workspace import Workspace


def test_appends_to_a_new_file_and_after_a_torn_tail(pg_url: str) -> None:
    ws = Workspace(pg_url, tz="UTC")
    assert ws.append_text("memory/new.md", "a\n") == (0, 2)
    ws.write_text("memory/torn.md", "half")
    assert ws.append_text("memory/torn.md", "b\n") == (5, 7)  # a newline first
    assert ws.append_text("memory/torn.md", "c\n") == (7, 9)
    assert ws.read_text("memory/torn.md") == "half\nb\nc\n"
    assert ws.read_text("memory/new.md") == "a\n"
