"""A query that names a day finds that day's ledger first, at any size and on every store."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memdir.index import MemoryIndex, _rank
from memdir.index._dates import DateCue, date_cue
from memdir.workspace import Workspace

TODAY = date(2026, 11, 30)  # the clock fixture's day


def _days(cue: DateCue) -> list[tuple[str, str]]:
    return [(str(date.fromordinal(a)), str(date.fromordinal(b))) for a, b in cue.spans]


@pytest.mark.parametrize(
    ("query", "spans", "yearless"),
    [
        ("What dish did Nate make on 9 November, 2022?", [("2022-11-09", "2022-11-09")], []),
        ("November 9th, 2022", [("2022-11-09", "2022-11-09")], []),
        ("notes of 2022-11-09", [("2022-11-09", "2022-11-09")], []),
        ("notes of 2022/11/9", [("2022-11-09", "2022-11-09")], []),
        ("Nov 2022 budget", [("2022-11-01", "2022-11-30")], []),
        ("What did Joanna visit in summer 2021?", [("2021-06-01", "2021-08-31")], []),
        ("what happened in 2023", [("2023-01-01", "2023-12-31")], []),
        ("When did Melanie go camping in June?", [], [(6, 0)]),
        ("dinner on the 3rd of March", [], [(3, 3)]),
        ("2023年5月3日我们去了哪里", [("2023-05-03", "2023-05-03")], []),
        ("2023年11月的账单", [("2023-11-01", "2023-11-30")], []),
        ("2023年的计划", [("2023-01-01", "2023-12-31")], []),
        ("3月5日吃了什么", [], [(3, 5)]),
        ("十二月的计划", [], [(12, 0)]),
        ("六月份去哪了", [], [(6, 0)]),
        ("what did I cook yesterday", [("2026-11-29", "2026-11-29")], []),
        ("the day before yesterday", [("2026-11-28", "2026-11-28")], []),
        ("今天说了什么", [("2026-11-30", "2026-11-30")], []),
        ("前天的会议", [("2026-11-28", "2026-11-28")], []),
    ],
)
def test_the_days_a_query_names(
    query: str, spans: list[tuple[str, str]], yearless: list[tuple[int, int]]
) -> None:
    cue = date_cue(query, today=TODAY)
    assert _days(cue) == spans
    assert list(cue.yearless) == yearless


@pytest.mark.parametrize(
    "query",
    [
        "I may go to the market",  # a bare "may" is a verb
        "we march on",
        "python 3.11.7 release",  # a version, not a date
        "2023 lines were written",  # a number without "in", "of"... is not a year
        "31 February 2023",  # no such day
        "2022-13-40 is not a date",
        "每3个月复查一次",  # "every 3 months"
        "mayday summary",  # month and season names inside other words
        "x2022-11-09",
        "",
    ],
)
def test_what_is_not_a_date(query: str) -> None:
    assert not date_cue(query, today=TODAY)


@given(st.text(max_size=300))
@example("0\ud800 in 2023")  # a lone surrogate
def test_any_text_gives_a_cue_without_error(query: str) -> None:
    cue = date_cue(query, today=TODAY)
    for first, last in cue.spans:
        assert first <= last
    for month, day in cue.yearless:
        assert 1 <= month <= 12 and 0 <= day <= 31


def test_a_named_day_weighs_most_and_the_week_after_it_less() -> None:
    cue = date_cue("on 9 November 2022", today=TODAY)
    day = date(2022, 11, 9).toordinal()
    weight = [cue.weight(day + n) for n in (-1, 0, 1, 7, 8)]
    assert weight == [0.0, 1.0, 0.5, 0.5, 0.0]
    assert cue.weight(None) == 0.0
    any_year = date_cue("on 9 November", today=TODAY)
    assert any_year.weight(date(2019, 11, 9).toordinal()) == 1.0
    assert any_year.weight(date(2019, 11, 12).toordinal()) == 0.5
    # A named day late in December: the first days of January follow it.
    new_year = date_cue("on 30 December", today=TODAY)
    assert new_year.weight(date(2020, 1, 2).toordinal()) == 0.5


def _dinners(ws: Workspace, days: list[str]) -> None:
    for day in days:
        ws.write_text(f"memory/{day}.md", f"- 19:00 dinner at the harbour with Anna ({day})\n")


def _first(ws: Workspace, query: str) -> str:
    with MemoryIndex(ws) as index:
        index.refresh()
        hits = index.search(query, limit=5)
    assert hits, query
    return hits[0].path


def test_the_named_days_ledger_comes_first(any_ws: Workspace) -> None:
    _dinners(any_ws, ["2026-03-03", "2026-07-14", "2026-11-20"])
    # Without a date the newest ledger wins (recency); with one, the named day's.
    assert _first(any_ws, "dinner at the harbour") == "memory/2026-11-20.md"
    assert _first(any_ws, "dinner at the harbour on 3 March 2026") == "memory/2026-03-03.md"
    assert _first(any_ws, "March 3rd: where was dinner?") == "memory/2026-03-03.md"
    assert _first(any_ws, "dinner in July") == "memory/2026-07-14.md"
    assert _first(any_ws, "2026年7月14日的晚饭 dinner") == "memory/2026-07-14.md"
    # Yesterday is the workspace clock's yesterday (2026-11-29): none, so recency again.
    assert _first(any_ws, "dinner yesterday") == "memory/2026-11-20.md"


def test_yesterday_is_the_workspace_clocks_yesterday(ws: Workspace) -> None:
    _dinners(ws, ["2026-11-28", "2026-11-29", "2026-11-30"])
    assert _first(ws, "where was dinner yesterday") == "memory/2026-11-29.md"
    assert _first(ws, "dinner the day before yesterday") == "memory/2026-11-28.md"
    assert _first(ws, "昨天 dinner") == "memory/2026-11-29.md"


def test_a_line_of_the_named_day_is_found_behind_many_newer_ones(any_ws: Workspace) -> None:
    # Far more newer lines hold both words than a posting list is read for, so the lines
    # of 5 January are reached only by looking within that day's ledger.
    any_ws.write_text(
        "memory/2026-01-05.md", "- 20:00 dinner at the harbour with Anna and her sister\n"
    )
    for day in range(1, 21):
        any_ws.write_text(
            f"memory/2026-10-{day:02d}.md",
            "".join(
                f"- {h % 24:02d}:00 dinner at the harbour, table t{day}x{h}\n" for h in range(60)
            ),
        )
    with MemoryIndex(any_ws) as index:
        index.refresh()
        undated = [hit.path for hit in index.search("dinner harbour", limit=10)]
        dated = index.search("dinner harbour on 5 January 2026", limit=10)
    assert "memory/2026-01-05.md" not in undated
    assert dated[0].path == "memory/2026-01-05.md"
    assert "Anna" in dated[0].content


def test_dates_can_be_switched_off(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    _dinners(ws, ["2026-03-03", "2026-11-20"])
    monkeypatch.setattr(_rank, "DEFAULT", dataclasses.replace(_rank.DEFAULT, dates=False))
    assert _first(ws, "dinner at the harbour on 3 March 2026") == "memory/2026-11-20.md"


def test_the_named_days_lines_still_need_a_query_word(ws: Workspace) -> None:
    _dinners(ws, ["2026-03-03"])
    ws.write_text("memory/2026-03-04.md", "- 08:00 breakfast\n")
    with MemoryIndex(ws) as index:
        index.refresh()
        hits = index.search("lunch on 4 March 2026")
    # The dinner line holds "2026"; the named day's line holds no word of the query.
    assert [hit.path for hit in hits] == ["memory/2026-03-03.md"]
