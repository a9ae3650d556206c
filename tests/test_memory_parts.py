"""Building blocks of the memory pipeline: answers, entry diffs, the budget, the lease."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir.memory._answer import parse_flush_answer
from memdir.memory._budget import fit_budget, tidy
from memdir.memory._entries import diff_entries, parse_bullets
from memdir.memory._lease import Lease
from memdir.workspace import Workspace


@pytest.mark.parametrize(
    ("answer", "bullets", "nothing", "usable"),
    [
        ("- a\n- b", ("a", "b"), False, True),
        ("```markdown\n- a\n  continued\n```", ("a continued",), False, True),
        ("New facts:\n\n1. first\n2) second", ("first", "second"), False, True),
        ("NO_REPLY", (), True, True),
        ("**NO_REPLY**", (), True, True),
        ("NO_REPLY - nothing worth keeping", (), True, True),
        ("- n/a", (), True, True),
        ("- NO_REPLY\n- real fact", ("real fact",), False, True),
        ("", (), False, False),
        ("The user talked about the weather.", (), False, False),
    ],
)
def test_flush_answers_are_classified(
    answer: str, bullets: tuple[str, ...], nothing: bool, usable: bool
) -> None:
    parsed = parse_flush_answer(answer)
    assert (parsed.bullets, parsed.nothing, parsed.usable) == (bullets, nothing, usable)


def test_bullets_carry_their_heading_and_skip_code() -> None:
    text = "# Memory\n## People\n- Alice\n```\n- not a bullet\n```\n## 项目\n- 使用 Postgres\n"
    found = [(b.text, b.heading) for b in parse_bullets(text)]
    assert found == [("Alice", "People"), ("使用 Postgres", "项目")]


def test_diff_tells_rewording_from_removal() -> None:
    diff = diff_entries(
        ["Alice lives in Paris", "Bob uses vim", "Carol likes jazz", "用户喜欢喝绿茶"],
        ["alice lives in Berlin now", "Bob uses vim.", "Dan joined", "用户喜欢喝红茶"],
    )
    assert diff.unchanged == 1
    assert diff.changed == (
        ("Alice lives in Paris", "alice lives in Berlin now"),
        ("用户喜欢喝绿茶", "用户喜欢喝红茶"),
    )
    assert diff.removed == ("Carol likes jazz",)
    assert diff.added == ("Dan joined",)


def test_merged_bullets_count_as_changed() -> None:
    diff = diff_entries(
        ["Project X uses Postgres", "Project X deploys on Fridays"],
        ["Project X uses Postgres and deploys on Fridays"],
    )
    assert len(diff.changed) == 2 and diff.removed == ()


def test_tidy_drops_empty_sections_only() -> None:
    text = "# Memory\n\n## Empty\n\n## Full\n- x\n\n\n\n## Also empty\n"
    assert tidy(text) == "# Memory\n\n## Full\n- x\n"


@given(
    st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=40), max_size=30),
    st.integers(min_value=10, max_value=400),
)
def test_budget_result_is_never_over_budget(bullets: list[str], budget: int) -> None:
    text = "# Memory\n## S\n" + "".join(f"- {b}\n" for b in bullets)
    fitted = fit_budget(text, budget, newest=set())
    if fitted is not None:
        result, trimmed = fitted
        assert len(result) <= budget
        kept = {b.key for b in parse_bullets(result)}
        assert all(b.key in kept or b.text in trimmed for b in parse_bullets(text))


def test_lease_is_exclusive_and_verifiable(ws: Workspace) -> None:
    first = Lease(ws, "job", ttl=timedelta(minutes=1))
    second = Lease(ws, "job", ttl=timedelta(minutes=1))
    assert first.try_acquire() and not second.try_acquire()
    assert first.verify()
    first.release()
    assert second.try_acquire() and not first.verify()
    second.release()
    assert Lease(ws, "job", ttl=timedelta(minutes=1)).holder() is None  # free again


def test_expired_lease_is_lost_by_its_holder(ws: Workspace) -> None:
    slow = Lease(ws, "job", ttl=timedelta(seconds=-1))  # expires at once
    assert slow.try_acquire()
    taker = Lease(ws, "job", ttl=timedelta(minutes=1))
    assert taker.try_acquire()
    assert not slow.verify()  # a holder that overran must not commit
    slow.release()  # does not remove the new holder's lease
    assert taker.verify()


def test_damaged_lease_file_counts_as_free(ws: Workspace) -> None:
    (ws.memory_dir / ".job.lease").write_text("garbage")
    assert Lease(ws, "job", ttl=timedelta(minutes=1)).try_acquire()
