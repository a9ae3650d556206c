"""Merging the search index's segments: searches see the same results, from fewer segments."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from memdir.errors import ConfigError
from memdir.index import MemoryIndex
from memdir.index import _indexing as indexing
from memdir.index._sqlite import SqliteEngine
from memdir.memory import MemoryConsolidator, MemoryMaintenanceScheduler
from memdir.models import model_from_string
from memdir.workspace import Workspace

QUERIES = ("otter river", "数据库 迁移", "deploy friday", "otter", "水獭 数据库 friday")
TOPICS = (
    "the otter family moved down the river",
    "我们讨论了数据库迁移方案",
    "never deploy on a friday afternoon",
    "水獭在河边吃鱼",
    "the river otter index rebuild took 3 minutes",
)
_PAGES = ("freelist_count", "page_count")


def _day(n: int) -> str:
    return f"memory/2026-11-{n:02d}.md"


def _write_days(ws: Workspace, index: MemoryIndex, days: int, lines: int) -> None:
    """One ledger per day, each indexed in its own write (a segment each)."""
    for day in range(1, days + 1):
        body = "".join(
            f"- {TOPICS[(day + i) % len(TOPICS)]} (day {day}, note {i})\n" for i in range(lines)
        )
        ws.write_text(_day(day), body)
        index.index_file(_day(day))


@contextmanager
def _engine(ws: Workspace) -> Iterator[SqliteEngine]:
    engine, problem = SqliteEngine.open(ws.index_dir / "memory_index.db")
    assert engine is not None, problem
    try:
        yield engine
    finally:
        engine.close()


def _segments(ws: Workspace) -> int:
    with _engine(ws) as engine:
        return engine.segments()


def _results(index: MemoryIndex) -> list[list[tuple[str, int, float]]]:
    return [[(h.path, h.line_number, h.score) for h in index.search(q, limit=10)] for q in QUERIES]


def test_merging_keeps_every_result_and_leaves_one_segment(ws: Workspace) -> None:
    with MemoryIndex(ws).open() as index:
        _write_days(ws, index, days=12, lines=8)
        assert _segments(ws) > 1
        before = _results(index)
        assert all(before), "every query finds something"
        assert index.optimize(above=1) is True
        assert _segments(ws) == 1
        assert _results(index) == before
        assert index.optimize(above=1) is False  # nothing left to merge


def test_optimize_leaves_a_few_segments_alone(ws: Workspace) -> None:
    with MemoryIndex(ws).open() as index:
        _write_days(ws, index, days=3, lines=4)
        count = _segments(ws)
        assert count > 1
        assert index.optimize(above=count) is False
        assert _segments(ws) == count


def test_a_large_sync_ends_merged(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexing, "MERGE_AFTER_UNITS", 50)
    for day in range(1, 13):
        ws.write_text(_day(day), "".join(f"- {TOPICS[day % 5]} {day} {i}\n" for i in range(8)))
    with MemoryIndex(ws).open() as index:
        stats = index.index_all_from_workspace()
        assert stats.lines_indexed == 96
        assert _segments(ws) == 1
    with _engine(ws) as engine:  # the old segments' pages went back to the file system
        free, pages = (engine._con.execute(f"PRAGMA {p}").fetchone()[0] for p in _PAGES)
        assert free * 50 <= pages
    with MemoryIndex(ws).open() as index:
        assert index.search("otter river", limit=3)


def test_a_small_sync_does_not_rewrite_a_large_index(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexing, "MERGE_AFTER_UNITS", 1_000)
    monkeypatch.setattr(indexing, "SMALL_INDEX_UNITS", 5)  # these 12 lines count as large
    for day in range(1, 13):
        ws.write_text(_day(day), f"- {TOPICS[day % 5]} {day}\n")
    with MemoryIndex(ws).open() as index:
        index.index_all_from_workspace()
    assert _segments(ws) > indexing.MAX_SEGMENTS


def test_a_sync_that_leaves_a_small_index_in_many_segments_merges_it(ws: Workspace) -> None:
    for day in range(1, 13):
        ws.write_text(
            _day(day), "".join(f"- {TOPICS[(day + i) % 5]} {day} {i}\n" for i in range(6))
        )
    with MemoryIndex(ws).open() as index:
        index.index_all_from_workspace()
        assert _segments(ws) <= indexing.MAX_SEGMENTS
        merged = _results(index)
    shutil.rmtree(ws.index_dir)
    with MemoryIndex(ws).open() as index:  # the same files, each indexed on its own
        for day in range(1, 13):
            index.index_file(_day(day))
        assert _segments(ws) > indexing.MAX_SEGMENTS
        assert _results(index) == merged


def test_maintenance_merges_a_fragmented_index(ws: Workspace) -> None:
    with MemoryIndex(ws).open() as index:
        _write_days(ws, index, days=12, lines=3)
    assert _segments(ws) > 4
    scheduler = MemoryMaintenanceScheduler(
        ws, MemoryConsolidator(ws, model_from_string("extractive"))
    )
    report = scheduler.run_once()
    assert not [e for e in report.errors if "reindex" in e], report.errors
    assert _segments(ws) == 1
    with MemoryIndex(ws).open() as index:
        assert index.search("otter river", limit=3)


@pytest.mark.parametrize("above", [0, -1, True, 2.5, "4", None])
def test_optimize_rejects_a_bad_threshold(ws: Workspace, above: object) -> None:
    with MemoryIndex(ws).open() as index, pytest.raises(ConfigError, match="above"):
        index.optimize(above=above)  # type: ignore[arg-type]


def test_optimize_on_postgresql_has_nothing_to_merge(pg_url: str) -> None:
    pg = Workspace(pg_url, tz="UTC")
    pg.write_text(_day(1), "- the otter family moved down the river\n")
    with MemoryIndex(pg).open() as index:
        index.index_all_from_workspace()
        assert index.optimize(above=1) is False
        assert [h.line_number for h in index.search("otter", limit=3)] == [1]
