"""Updates that win: a later line that changes a value ranks above the one it updates, and
the two hits say which is newer (on every store, through the tools, the CLI and the server)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.index import MemoryIndex, SearchHit, _rank
from memdir.messages import Msg
from memdir.sessions import SessionLog, search_sessions, shared_session_index
from memdir.tools import memory_search, session_search
from memdir.tools._core import shared_index
from memdir.workspace import Workspace

OLD = "- 09:00 user: The nightly backfill job runs in batches of 2,000 rows"
# Said in passing, in a longer line: lexically weaker than the plain old statement.
NEW = (
    "- 16:30 user: Heads-up for whoever reads the pipeline notes later this week: the "
    "backfill batch size is now 5,000 rows, since the replica keeps up fine at night"
)
OTHER = "- 12:00 user: Lunch with Dana on Friday at the noodle place"


def _write(ws: Workspace, *days: tuple[str, list[str]]) -> None:
    for day, lines in days:
        ws.write_text(f"memory/{day}.md", "".join(f"{line}\n" for line in lines))


def _search(ws: Workspace, query: str) -> list[SearchHit]:
    with MemoryIndex(ws) as index:
        index.refresh()
        return index.search(query, limit=5)


def _updates_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rank, "DEFAULT", dataclasses.replace(_rank.DEFAULT, updates=False))


def test_the_newer_value_ranks_first_and_both_hits_say_so(any_ws: Workspace) -> None:
    _write(any_ws, ("2026-11-20", [OLD, OTHER]), ("2026-11-24", [NEW]))
    hits = _search(any_ws, "nightly backfill job batch rows")
    assert [h.line_number for h in hits[:2]] == [1, 1]
    new, old = hits[0], hits[1]
    assert new.path == "memory/2026-11-24.md" and "5,000" in new.content
    assert old.path == "memory/2026-11-20.md" and "2,000" in old.content
    assert old.superseded_by == "memory/2026-11-24.md#L1-L1"
    assert new.supersedes == ("memory/2026-11-20.md#L1-L1",)
    assert new.superseded_by is None and old.supersedes == ()
    assert new.score >= old.score  # scores stay in rank order


def test_without_it_the_plain_old_statement_wins(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the feature is for: lexically the stale line is the better match.
    _write(ws, ("2026-11-20", [OLD, OTHER]), ("2026-11-24", [NEW]))
    _updates_off(monkeypatch)
    hits = _search(ws, "nightly backfill job batch rows")
    assert "2,000" in hits[0].content and "5,000" in hits[1].content
    assert all(h.superseded_by is None and h.supersedes == () for h in hits)


def test_further_down_the_same_ledger_is_newer(ws: Workspace) -> None:
    _write(ws, ("2026-11-20", [OLD, OTHER, NEW]))
    hits = _search(ws, "nightly backfill job batch rows")
    assert "5,000" in hits[0].content
    assert hits[1].superseded_by == "memory/2026-11-20.md#L3-L3"


def test_a_chain_of_updates_ends_newest_first(ws: Workspace) -> None:
    latest = "- 10:00 user: We have bumped the backfill batch size again, it is now 8,000 rows"
    _write(ws, ("2026-11-20", [OLD]), ("2026-11-24", [NEW]), ("2026-11-27", [latest]))
    hits = _search(ws, "nightly backfill job batch rows")
    values = [next(v for v in ("8,000", "5,000", "2,000") if v in h.content) for h in hits[:3]]
    assert values == ["8,000", "5,000", "2,000"]
    assert hits[2].superseded_by == "memory/2026-11-27.md#L1-L1"
    assert set(hits[0].supersedes) == {"memory/2026-11-20.md#L1-L1", "memory/2026-11-24.md#L1-L1"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # another speaker's number is not an update of mine
        (OLD, NEW.replace("user:", "dana:")),
        # a later line with another number but no word of change: a different event
        (
            "- 09:00 user: Ran 5 km along the river this morning",
            "- 18:00 user: Ran 10 km along the river with the running club this evening",
        ),
        # the change is of something else: the words near the numbers differ
        (OLD, "- 16:30 user: The API rate limit is now 500 requests per minute"),
        # same words, but another kind of number (a price, not a count of rows)
        (OLD, "- 16:30 user: The backfill now costs $40 a night in replica rows"),
    ],
)
def test_what_is_not_an_update_is_left_alone(ws: Workspace, old: str, new: str) -> None:
    _write(ws, ("2026-11-20", [old]), ("2026-11-24", [new]))
    query = "nightly backfill job batch rows" if "backfill" in old else "ran km river"
    hits = _search(ws, query)
    assert all(h.superseded_by is None and h.supersedes == () for h in hits)


def test_a_question_about_the_latest_value_takes_the_later_line_without_a_change_word(
    ws: Workspace,
) -> None:
    # No "now", no "reduced": only its place says the later line is the current figure.
    early = "- 09:00 user: I logged 12 hours of overtime in February, tracking it weekly"
    later = "- 18:00 user: Overtime check: I managed 4 hours of overtime in March"
    _write(ws, ("2026-02-28", [early]), ("2026-03-31", [later]))
    plain = _search(ws, "How many hours of overtime have I tracked?")
    assert "12 hours" in plain[0].content and plain[0].superseded_by is None  # no claim made
    hits = _search(ws, "How many hours of overtime have I tracked most recently?")
    assert "4 hours" in hits[0].content
    assert hits[1].superseded_by == "memory/2026-03-31.md#L1-L1"
    # A line's own time stamp is when it was said, not a value that changed.
    stamps = ["- 09:00 user: overtime tracked for the sprint", "- 18:00 user: overtime tracked"]
    _write(ws, ("2026-02-28", stamps[:1]), ("2026-03-31", stamps[1:]))
    assert all(h.supersedes == () for h in _search(ws, "overtime tracked most recently"))


@pytest.mark.parametrize(
    ("early", "later", "asks", "names", "other"),
    [
        (
            "- 09:00 user: I'm planning to visit the bike shop on Main Street next Saturday "
            "at 3 PM to pick up the new wheels",
            "- 18:00 user: I'll make sure I'm free at 4:30 PM next Saturday for my bike shop "
            "visit, the wheels should be in by then",
            "What time should I plan to visit the bike shop next Saturday?",
            "Did I plan to visit the bike shop next Saturday at 3 PM?",
            "Where should I plan to visit the bike shop next Saturday?",
        ),
        (
            "- 09:00 user: The spam filter reached 87% accuracy on the labelled mail set",
            "- 18:00 user: How do I keep the spam filter's 91% accuracy on the labelled mail "
            "set from drifting over the holidays?",
            "What accuracy does the spam filter reach on the labelled mail set?",
            "Did the spam filter reach 87% accuracy on the labelled mail set?",
            "Which labelled mail set does the spam filter reach its accuracy on?",
        ),
        (
            "- 09:00 用户：垃圾邮件过滤器在标注邮件集上的准确率是87%",
            "- 18:00 用户：假期里怎么让垃圾邮件过滤器在标注邮件集上保持91%的准确率？",
            "垃圾邮件过滤器在标注邮件集上的准确率是多少？",
            "垃圾邮件过滤器在标注邮件集上的准确率是87%吗？",
            "垃圾邮件过滤器的准确率在哪个标注邮件集上测？",
        ),
    ],
)
def test_a_question_that_asks_for_a_time_or_a_share_takes_the_later_line_that_says_one(
    ws: Workspace, early: str, later: str, asks: str, names: str, other: str
) -> None:
    # The later line has no change word: it states the value in passing, as the current one.
    _write(ws, ("2026-03-01", [early]), ("2026-03-05", [later]))
    hits = _search(ws, asks)
    assert hits[0].path == "memory/2026-03-05.md"
    assert hits[1].superseded_by == "memory/2026-03-05.md#L1-L1"
    # A question that names the value, or asks for something else, makes no claim.
    for query in (names, other):
        assert all(h.supersedes == () for h in _search(ws, query)), query


@pytest.mark.parametrize(
    ("old", "new", "query"),
    [
        (
            "- 09:00 user: The billing database runs on Postgres 16 in eu-west",
            "- 15:00 user: Heads-up for the on-call notes: over the weekend we moved the "
            "billing database from Postgres to MySQL, and the cutover went fine",
            "which database does billing run on",
        ),
        (
            "- 09:00 user: Our CI pipeline runs on a Jenkins server in the office",
            "- 15:00 user: I finally replaced the old Jenkins server with GitHub Actions for "
            "the CI pipeline, one less machine to patch",
            "what runs our CI pipeline",
        ),
        (
            "- 09:00 用户：CI 流水线用的是 Jenkins",
            "- 15:00 用户：CI 流水线从 Jenkins 换成了 GitLab",
            "CI 流水线用的是什么",
        ),
    ],
)
def test_a_later_line_that_names_the_replacement_wins(
    ws: Workspace, old: str, new: str, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(ws, ("2026-11-20", [old]), ("2026-11-24", [new]))
    hits = _search(ws, query)
    assert hits[0].path == "memory/2026-11-24.md"
    assert hits[1].superseded_by == "memory/2026-11-24.md#L1-L1"
    assert hits[0].supersedes == ("memory/2026-11-20.md#L1-L1",)
    _updates_off(monkeypatch)
    assert _search(ws, query)[0].path == "memory/2026-11-20.md"  # the plain old line wins


@pytest.mark.parametrize(
    "new",
    [
        # the line it would update does not say the old name
        "- 15:00 user: We moved the analytics warehouse from Redshift to BigQuery",
        # it says the new name too: no replacement of it
        "- 15:00 user: We moved the billing reports from Postgres to MySQL, on Postgres 16",
    ],
)
def test_a_rename_of_something_else_is_left_alone(ws: Workspace, new: str) -> None:
    old = "- 09:00 user: The billing database runs on Postgres 16, with reports on MySQL"
    _write(ws, ("2026-11-20", [old]), ("2026-11-24", [new]))
    hits = _search(ws, "billing database reports warehouse")
    assert all(h.superseded_by is None and h.supersedes == () for h in hits)


def test_a_question_about_the_past_keeps_the_order_but_marks_the_lines(ws: Workspace) -> None:
    _write(ws, ("2026-11-20", [OLD, OTHER]), ("2026-11-24", [NEW]))
    hits = _search(ws, "nightly backfill job batch rows before")
    assert "2,000" in hits[0].content
    assert hits[0].superseded_by == "memory/2026-11-24.md#L1-L1"


def test_chinese_updates_win_too(ws: Workspace) -> None:
    _write(
        ws,
        ("2026-11-20", ["- 09:00 用户：回填任务每批处理2000行"]),
        (
            "2026-11-24",
            ["- 16:30 用户：跟大家说一下，回填任务的批大小现在是5000行了，夜里副本跟得上"],
        ),
    )
    hits = _search(ws, "回填任务每批处理多少行")
    assert "5000" in hits[0].content
    assert hits[1].superseded_by == "memory/2026-11-24.md#L1-L1"


def test_memory_search_and_the_cli_show_which_line_is_newer(ws: Workspace) -> None:
    _write(ws, ("2026-11-20", [OLD, OTHER]), ("2026-11-24", [NEW]))
    text = memory_search("nightly backfill job batch rows", workspace=ws)
    lines = text.splitlines()
    assert "memory/2026-11-24.md#L1-L1 [updates memory/2026-11-20.md#L1-L1]" in lines[1]
    assert "memory/2026-11-20.md#L1-L1 [superseded by memory/2026-11-24.md#L1-L1]" in lines[2]
    result = CliRunner().invoke(
        cli, ["-w", str(ws.root), "search", "nightly backfill job batch rows", "--json"]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown[0]["supersedes"] == ["memory/2026-11-20.md#L1-L1"]
    assert shown[1]["superseded_by"] == "memory/2026-11-24.md#L1-L1"


def test_a_server_s_hits_name_the_newer_line(remote_ws: Workspace) -> None:
    _write(remote_ws, ("2026-11-20", [OLD, OTHER]), ("2026-11-24", [NEW]))
    hits = shared_index(remote_ws).search("nightly backfill job batch rows", limit=5)
    assert "5,000" in hits[0].content
    assert hits[0].supersedes == ("memory/2026-11-20.md#L1-L1",)
    assert hits[1].superseded_by == "memory/2026-11-24.md#L1-L1"


# -- session search: the same, over logged messages ------------------------------------------

OLD_SAID = "The nightly backfill job runs in batches of 2,000 rows"
NEW_SAID = (
    "Heads-up for whoever reads the pipeline notes later this week: the backfill batch size "
    "is now 5,000 rows, since the replica keeps up fine at night"
)


def _log(ws: Workspace, session: str, *texts: str, at: datetime | None = None) -> None:
    msgs = [Msg.user(t) if i % 2 == 0 else Msg.assistant(t) for i, t in enumerate(texts)]
    if at is not None:
        msgs = [
            dataclasses.replace(m, created_at=at + timedelta(seconds=i)) for i, m in enumerate(msgs)
        ]
    SessionLog(ws, session).append(msgs)


def test_session_search_ranks_the_later_message_first_and_both_say_so(
    any_ws: Workspace,
) -> None:
    monday = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    _log(any_ws, "s1", OLD_SAID, "Noted.", "Lunch with Dana on Friday", "Enjoy.", at=monday)
    _log(any_ws, "s1", NEW_SAID, "Thanks, noted.", at=monday)  # lines 5 and 6, same times
    out = session_search("nightly backfill job batch rows", 5, workspace=any_ws)
    lines = out.splitlines()[1:]
    assert lines[0].startswith("sessions/s1.log.jsonl#L5 [user")
    assert "[updates sessions/s1.log.jsonl#L1]" in lines[0]
    assert lines[1].startswith("sessions/s1.log.jsonl#L1 [user")
    assert "[superseded by sessions/s1.log.jsonl#L5]" in lines[1]
    # Across logs, the later message is the one written at a later time.
    later = "The nightly backfill job now runs in batches of 8,000 rows"
    _log(any_ws, "s0", later, "Ok.", at=monday + timedelta(days=3))
    index = shared_session_index(any_ws)
    index.refresh()
    hits = search_sessions(index, "nightly backfill job batch rows", limit=5)
    assert hits[0].citation == "sessions/s0.log.jsonl#L1"
    assert set(hits[0].supersedes) == {"sessions/s1.log.jsonl#L1", "sessions/s1.log.jsonl#L5"}
    # An assistant's message never updates a user's.
    assert all(hit.role == "user" for hit in hits if hit.supersedes or hit.superseded_by)


def test_a_server_s_session_hits_name_the_newer_message(remote_ws: Workspace) -> None:
    _log(remote_ws, "s1", OLD_SAID, "Noted.", NEW_SAID, "Thanks.")
    out = session_search("nightly backfill job batch rows", 5, workspace=remote_ws)
    assert "#L3 [user" in out.splitlines()[1]
    assert "[superseded by sessions/s1.log.jsonl#L3]" in out.splitlines()[2]
