"""Feedback from the best hits: lines that go on about the thing a hit names are found."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memdir.index import MemoryIndex, _rank
from memdir.workspace import Workspace


def _index(tmp_path: Path, ledger: str) -> MemoryIndex:
    ws = Workspace(tmp_path / "ws", tz="UTC")
    ws.write_text("memory/2026-11-20.md", ledger)
    index = MemoryIndex(ws)
    index.refresh()
    return index


PHONE = """## Memory Flush — 2026-11-20T09:00:00Z
- 我的手机是小米11。
- 小米11真的让我挺惊喜的，拍照清楚，电池也耐用。
- 我的表弟喜欢打篮球。
- 周末去了一趟杭州西湖。
- 我同事的邮箱是li@example.com。
"""


def test_a_follow_up_that_names_the_thing_but_not_the_question_word_is_found(
    tmp_path: Path,
) -> None:
    index = _index(tmp_path, PHONE)
    hits = [hit.content for hit in index.search("我用的这个手机怎么样啊？", limit=10)]
    assert hits[0] == "- 我的手机是小米11。"
    assert "- 小米11真的让我挺惊喜的，拍照清楚，电池也耐用。" in hits
    # Lines that share nothing with the question or with what its best hit names stay out.
    assert not any("篮球" in hit or "西湖" in hit for hit in hits)


def test_a_line_that_shares_nothing_with_the_question_is_not_brought_in(tmp_path: Path) -> None:
    index = _index(tmp_path, PHONE)
    # 小米11 is named by the best hit, but the follow-up has no character of "手机".
    assert [hit.content for hit in index.search("手机", limit=10)] == ["- 我的手机是小米11。"]


EVENTS = """## Memory Flush — 2026-11-20T09:00:00Z
- 我将要参加设计前沿论坛。
- 我将要参加高尔夫欢乐友谊赛。
- 设计前沿论坛的地点是上海。
- 高尔夫欢乐友谊赛的地点是北京。
- 我将要参加设计总监项目启动会。
- 设计总监项目启动会的地点是广东广州。
- 我将要参加美食盛宴。
"""


def test_the_second_step_of_a_two_step_question_ranks_above_its_look_alikes(
    tmp_path: Path,
) -> None:
    index = _index(tmp_path, EVENTS)
    query = "那个地点是广东广州的活动，我要参加的活动是什么？"
    hits = [hit.content for hit in index.search(query, 10)]
    assert hits[0] == "- 设计总监项目启动会的地点是广东广州。"
    joins = [hit for hit in hits if hit.startswith("- 我将要参加")]
    assert joins[0] == "- 我将要参加设计总监项目启动会。"


def test_the_hit_that_names_the_thing_stays_above_the_lines_found_through_it(
    tmp_path: Path,
) -> None:
    index = _index(tmp_path, PHONE)
    hits = index.search("我的手机", limit=10)
    assert [hit.content for hit in hits[:2]] == [
        "- 我的手机是小米11。",
        "- 小米11真的让我挺惊喜的，拍照清楚，电池也耐用。",
    ]
    assert hits[0].score > hits[1].score


def test_a_full_page_of_matching_lines_is_left_as_the_query_ranked_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [f"- deploy note {i}: the staging cluster uses region eu-west-{i}" for i in range(12)]
    lines.append("- eu-west-3 is also where the billing database lives")
    index = _index(tmp_path, "## Memory Flush — 2026-11-20T09:00:00Z\n" + "\n".join(lines) + "\n")
    with_feedback = [(h.line_number, h.score) for h in index.search("staging cluster", limit=5)]
    monkeypatch.setattr(_rank, "DEFAULT", dataclasses.replace(_rank.DEFAULT, feedback=False))
    without = [(h.line_number, h.score) for h in index.search("staging cluster", limit=5)]
    assert with_feedback == without


def test_a_long_query_is_not_expanded(tmp_path: Path) -> None:
    screen = "- 小米11的屏幕有点小，拍视频还行。"
    index = _index(tmp_path, PHONE + screen + "\n")
    # Found through 小米11, the best hit's name (and it shares 拍 with the question).
    assert screen in [h.content for h in index.search("拍照 电池", limit=10)]
    # A pasted paragraph says enough on its own: only lines holding its words come back.
    query = "拍照 电池 耐用 清楚 惊喜 周末 杭州 西湖 表弟 篮球 邮箱"
    assert screen not in [h.content for h in index.search(query, limit=10)]
