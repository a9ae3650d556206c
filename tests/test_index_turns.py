"""Dialogue turns in memory: a reply is embedded after the end of the turn it answers."""

from __future__ import annotations

import pytest

from memdir.index import MemoryIndex
from memdir.index._turns import CONTEXT_CHARS, embedded_texts, speaker
from memdir.testing import ConceptEmbedder
from memdir.workspace import Workspace

np = pytest.importorskip("numpy")

LEDGER = "memory/2026-11-29.md"


@pytest.mark.parametrize(
    ("text", "who"),
    [
        ("10:01 Caroline: I passed the adoption interviews!", "caroline"),
        ("Caroline: I passed", "caroline"),
        ("10:01:59 Dr. Chen: take two a day", "dr. chen"),
        ("09:00 Mary-Jane O'Neil: hi", "mary-jane o'neil"),
        ("assistant: the tests pass", "assistant"),
        ("小明：我明天去北京", "小明"),
        ("14:30 小红: 好的", "小红"),
    ],
)
def test_a_turn_names_its_speaker(text: str, who: str) -> None:
    assert speaker(text) == who


@pytest.mark.parametrize(
    "text",
    [
        "The plan for the Monday release: ship it",  # more than three words before the colon
        "招聘会的主要内容是招聘会：介绍",  # a Chinese sentence, not a name
        "10:01 bought cat food",
        "see https://example.com/x: broken",
        "42: the answer",
        "",
        "Caroline:no space after the colon",
    ],
)
def test_other_lines_are_not_turns(text: str) -> None:
    assert speaker(text) is None


def _in_one_section(*texts: str) -> list[tuple[int, str]]:
    return [(0, text) for text in texts]


def test_a_reply_is_read_after_the_turn_it_answers() -> None:
    texts = [
        "10:01 Caroline: I passed the adoption interviews!",
        "10:02 Melanie: Congrats! Tell me more",
        "10:03 Melanie: When do you meet the child?",  # the same speaker again: alone
        "",
        "10:04 Caroline: Next month",
        "a fact that is not a turn",
        "10:05 Caroline: after a fact: alone",
    ]
    out = embedded_texts(_in_one_section(*texts))
    assert out[0] == texts[0]
    assert out[1] == f"{texts[0]} {texts[1]}"
    assert out[2] == texts[2]
    assert out[3] == ""
    assert out[4] == f"{texts[2]} {texts[4]}"  # a blank unit does not break the dialogue
    assert out[5] == texts[5]
    assert out[6] == texts[6]


def test_only_the_end_of_a_long_turn_is_read() -> None:
    long = "10:01 Caroline: " + "word " * 200 + "the kitten"
    out = embedded_texts(
        _in_one_section(long, "10:02 Melanie: lovely", "Caroline: x", "Melanie: y")
    )
    context = out[1].removesuffix(" 10:02 Melanie: lovely")
    assert len(context) <= CONTEXT_CHARS
    assert context.endswith("the kitten")


def test_facts_are_embedded_alone() -> None:
    facts = ["Jing prefers tabs", "The shop database moved to PostgreSQL 16", "deploys on Friday"]
    assert embedded_texts(_in_one_section(*facts)) == facts


def test_labelled_facts_are_not_a_dialogue() -> None:
    # a flush's labels each start one line: not speakers
    facts = [
        "Decision: WeChat Pay is postponed to Q1 2027",
        "Fix: CREATE INDEX CONCURRENTLY orders_customer_created_idx",
        "经验：迁移后要对最慢的查询重新跑 EXPLAIN ANALYZE",
        "Team offsite confirmed: Moganshan, 2026-12-12",
        "Owner: Tom books the guesthouse",
    ]
    assert embedded_texts(_in_one_section(*facts)) == facts


def test_a_turn_is_not_read_after_another_section() -> None:
    units = [
        (1, "Caroline: see you"),
        (1, "Melanie: bye"),
        (1, "Caroline: bye"),
        (1, "Melanie: see you"),
        (5, "Caroline: hello again"),  # a new session: nothing to answer
        (5, "Melanie: hi"),
        (5, "Caroline: how are you"),
        (5, "Melanie: fine"),
    ]
    out = embedded_texts(units)
    assert out[4] == "Caroline: hello again"
    assert out[5] == "Caroline: hello again Melanie: hi"
    # a name that starts only one line of its section is no speaker there
    assert embedded_texts([(1, "Caroline: a"), (1, "Melanie: b"), (2, "Melanie: c")]) == [
        "Caroline: a",
        "Melanie: b",
        "Melanie: c",
    ]


def test_a_reply_is_found_by_what_it_answers(any_ws: Workspace) -> None:
    ws = any_ws
    ws.write_text(
        LEDGER,
        "- 10:01 Caroline: We adopted a kitten last week\n"
        "- 10:02 Melanie: Congrats! Tell me everything\n"
        "- 10:03 Caroline: The weather was fine\n"
        "- 10:04 Melanie: Sunny here too\n",
    )
    embedder = ConceptEmbedder({"cat": ["kitten", "cat"], "weather": ["weather"]})
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        hits = index.search("cat", 10)
    contents = [h.content for h in hits]
    # the reply shares no word with the question, and answers the turn that does
    assert "- 10:02 Melanie: Congrats! Tell me everything" in contents
    assert "- 10:03 Caroline: The weather was fine" not in contents
    assert "- 10:04 Melanie: Sunny here too" not in contents
    # what was embedded for the reply: the turn before it, then the reply
    assert (
        "10:01 Caroline: We adopted a kitten last week 10:02 Melanie: Congrats! Tell me everything"
        in embedder.documents
    )


def test_a_changed_turn_embeds_its_reply_again(ws: Workspace) -> None:
    embedder = ConceptEmbedder({"cat": ["kitten"], "dog": ["puppy"]})
    tail = "- Melanie: Congrats!\n- Caroline: Thanks\n- Melanie: Bye\n"
    ws.write_text(LEDGER, "- Caroline: We adopted a kitten\n" + tail)
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        assert index.embed_pending().embedded == 4
        ws.write_text(LEDGER, "- Caroline: We adopted a puppy\n" + tail)
        index.index_all_from_workspace()
        stats = index.embed_pending()
        # the changed turn and the reply that reads it; the later turns are as they were
        assert (stats.embedded, stats.removed, stats.total) == (2, 2, 4)
        contents = [h.content for h in index.search("puppy", 10)]
    assert contents[:2] == ["- Caroline: We adopted a puppy", "- Melanie: Congrats!"]
