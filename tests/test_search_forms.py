"""A question in one form of a word finds the line told in another (buy / bought, meet / met)."""

from __future__ import annotations

import pytest

from memdir.index import MemoryIndex
from memdir.index._forms import key_stems, word_forms, word_key
from memdir.messages import Msg
from memdir.sessions import SessionIndex, SessionLog, search_sessions
from memdir.workspace import Workspace


@pytest.mark.parametrize(
    ("word", "same"),
    [
        ("bought", "buy"),
        ("buying", "bought"),
        ("met", "meeting"),
        ("went", "go"),
        ("gone", "going"),
        ("taught", "teach"),
        ("felt", "feel"),
        ("children", "child"),
        ("women", "woman"),
    ],
)
def test_forms_of_one_word_share_a_key(word: str, same: str) -> None:
    assert word_key(word) == word_key(same)


@pytest.mark.parametrize(
    ("word", "other"),
    [
        ("won", "win"),  # "won't" is cut into "won" and "t"
        ("rose", "rise"),  # a flower
        ("born", "bear"),
        ("bit", "bite"),  # "a bit"
        ("ground", "grind"),
        ("lay", "lie"),
        ("bold", "buy"),  # shares a first letter with "bought", nothing else
    ],
)
def test_ambiguous_forms_are_left_alone(word: str, other: str) -> None:
    assert word_key(word) != word_key(other)


def test_the_forms_a_word_is_looked_up_as() -> None:
    assert word_forms("buy") == ("buy", "bought")
    assert word_forms("buying") == ("buying", "bought")  # "buy" is the same stem as "buying"
    assert word_forms("went") == ("went", "go", "gone")
    assert word_forms("harbour") == ("harbour",)
    assert word_forms("") == ("",)
    # What the index holds of each form: a search reads those stems out of a row's terms.
    assert key_stems(word_key("buy")) == ("bui", "bought")  # Porter: buy -> bui
    assert key_stems(word_key("went")) == ("go", "went", "gone")
    assert key_stems("harbour") == ("harbour",)


def _search(ws: Workspace, query: str, limit: int = 5) -> list[str]:
    with MemoryIndex(ws) as index:
        index.refresh()
        return [hit.content for hit in index.search(query, limit=limit)]


def test_a_question_in_the_present_finds_the_past(any_ws: Workspace) -> None:
    any_ws.write_text(
        "memory/2026-03-03.md",
        "- 10:00 I bought Seraphim, my snake, at a market in Paris\n"
        "- 11:00 The snake enclosure needs a new lamp\n"
        "- 12:00 Met Anna at the climbing gym; she taught me to belay\n"
        "- 13:00 Anna likes the gym on Mondays\n",
    )
    assert _search(any_ws, "When did I buy my snake?")[0].startswith("- 10:00 I bought")
    assert _search(any_ws, "Where did I meet Anna?")[0].startswith("- 12:00 Met Anna")
    assert _search(any_ws, "who teaches me to belay")[0].startswith("- 12:00 Met Anna")
    # And the other way round: a question in the past finds the present.
    any_ws.write_text("memory/2026-03-04.md", "- 09:00 We go hiking every Sunday with the kids\n")
    assert _search(any_ws, "where we went hiking")[0].startswith("- 09:00 We go hiking")


def test_a_form_counts_for_the_whole_question(ws: Workspace) -> None:
    # Both lines hold "Anna"; only one also holds the question's verb, in another form.
    ws.write_text(
        "memory/2026-03-03.md",
        "- 10:00 Anna called\n- 11:00 We met Anna downtown by the old harbour market\n",
    )
    assert _search(ws, "meet Anna", limit=1) == [
        "- 11:00 We met Anna downtown by the old harbour market"
    ]


def test_a_lookalike_is_not_a_form(any_ws: Workspace) -> None:
    any_ws.write_text(
        "memory/2026-03-03.md",
        "- 10:00 I won't go to the race this year\n- 11:00 The rose garden opens in May\n",
    )
    assert _search(any_ws, "win") == []
    assert _search(any_ws, "rise") == []


def test_a_form_is_found_behind_many_newer_lines_of_each_word(any_ws: Workspace) -> None:
    # More newer lines hold each word than a posting list is read for, so the old line that
    # holds both is found by an AND over the forms.
    any_ws.write_text("memory/2026-01-05.md", "- 20:00 bought the blue kayak from Jonas\n")
    for day in range(1, 13):
        any_ws.write_text(
            f"memory/2026-10-{day:02d}.md",
            "".join(f"- 08:{m:02d} bought bread, receipt r{day}x{m}\n" for m in range(60))
            + "".join(f"- 09:{m:02d} kayak rack, bolt b{day}x{m}\n" for m in range(60)),
        )
    assert _search(any_ws, "buy kayak")[0] == "- 20:00 bought the blue kayak from Jonas"


def test_past_sessions_are_found_in_another_form(ws: Workspace) -> None:
    SessionLog(ws, "trip").append(
        [
            Msg.user("I flew to Lisbon for the conference"),
            Msg.assistant("The conference"),
            Msg.user("The conference hotel is fine"),
        ]
    )
    index = SessionIndex(ws)
    try:
        index.refresh()
        hits = search_sessions(index, "when did I fly to the conference", limit=3)
    finally:
        index.close()
    assert hits and hits[0].text == "I flew to Lisbon for the conference"
