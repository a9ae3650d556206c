"""A compound question (two questions in one query) finds the answer to each of them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memdir.index import MemoryIndex
from memdir.index._clauses import (
    fuse_rankings,
    question_clauses,
    rank_fusion,
    without_answer_form,
)
from memdir.index._engine import Engine
from memdir.index._query import MAX_QUERY_CHARS, analyze_query
from memdir.index._search import run_search
from memdir.index._types import SearchHit
from memdir.testing import ConceptEmbedder
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-29.md"
EVENT = "模型艺术盛宴"


def _clauses(query: str) -> list[str]:
    return [question.text for question in question_clauses(query, analyze_query(query))]


def test_a_compound_question_is_cut_into_its_questions() -> None:
    assert _clauses("我同事有多高来着？另外，模型艺术盛宴的时间是什么？") == [
        "我同事有多高来着",
        "另外，模型艺术盛宴的时间是什么",
    ]
    assert _clauses("What is Jing's email?? And when is the offsite?") == [
        "What is Jing's email",
        "And when is the offsite",
    ]


def test_a_sentence_on_how_to_answer_is_not_a_question_of_its_own() -> None:
    assert _clauses("When is the offsite? Where is it held? Mention ONLY and ONLY five items.") == [
        "When is the offsite",
        "Where is it held",
    ]
    assert _clauses("Did Caroline go to the support group? Answer yes or no.") == []
    assert without_answer_form("Did Caroline go? Answer yes or no.") == "Did Caroline go?"
    # a question without a word to search for keeps the sentence after it
    assert without_answer_form("What? Answer me about the offsite.") == (
        "What? Answer me about the offsite."
    )
    assert without_answer_form("Mention only five items.") == "Mention only five items."
    assert _clauses("我同事有多高来着？模型艺术盛宴在哪里？请用中文回答。") == [
        "我同事有多高来着",
        "模型艺术盛宴在哪里",
    ]
    # what follows the last question and says something is still searched on its own
    assert _clauses("What does the scarf look like? It has a rainbow pattern!") == [
        "What does the scarf look like",
        "It has a rainbow pattern!",
    ]
    assert _clauses("Where is the offsite? Keep in mind the venue moved.") == [
        "Where is the offsite",
        "Keep in mind the venue moved.",
    ]


def test_an_instruction_on_the_answer_does_not_fill_the_page(ws: Workspace) -> None:
    offsite = ["- the offsite is on Friday the 12th", "- the offsite moved to the lake house"]
    items = [f"- the shop listed {n} new items" for n in ("five", "six", "seven")]
    ws.write_text(LEDGER, "".join(f"{line}\n" for line in [*items, *offsite]))
    with MemoryIndex(ws, embedder=False) as index:
        index.refresh()
        hits = [
            hit.content for hit in index.search("When is the offsite? Mention only five items.", 5)
        ]
    assert set(hits[:2]) == set(offsite)


@pytest.mark.parametrize(
    "query",
    [
        "When did Jolene buy her snake?",  # one question
        "what was decided about the database migration",  # no question mark
        "What? Where is the cat?",  # "What" has no content word: one question
        "b? c? d? e? f?",  # a list, not a compound question
        "",
        "???",
        # a conversation: many words, searched whole
        "Caroline: I went to the support group yesterday, it was powerful? Melanie: That is "
        "wonderful, what happened there, did you meet anyone new at the centre downtown? "
        "Caroline: yes, a transgender woman shared her story about courage and family.",
    ],
)
def test_other_queries_are_one_question(query: str) -> None:
    assert _clauses(query) == []


def test_a_huge_query_is_read_as_far_as_its_analysis(ws: Workspace) -> None:
    # only the analysed head counts: questions past it are not split out
    assert _clauses("x" * MAX_QUERY_CHARS + "? cat? dog?") == []
    # thousands of questions are a list, searched whole, whatever their number
    huge = "cat? dog? " * 200_000
    assert _clauses(huge) == []
    ws.write_text(LEDGER, "- the cat sat\n- the dog ran\n")
    with MemoryIndex(ws, embedder=False) as index:
        index.refresh()
        assert {hit.content for hit in index.search(huge, 10)} == {"- the cat sat", "- the dog ran"}


def _event_ledger(ws: Workspace) -> None:
    things = ["规模是九百人", "持续时间是八个周", "地点是北京", "主要内容是模型展览"]
    things += ["时间是下周一晚上七点", "报名时间是本周五", "开幕时间是晚上六点", "门票是八十元"]
    lines = [f"{EVENT}的{thing}。" for thing in things] + ["我同事身高164厘米。"]
    lines += [f"第{n}天的天气记录：晴，风力{n}级。" for n in range(40)]
    ws.write_text(LEDGER, "".join(f"- {line}\n" for line in lines))


def test_each_question_of_a_compound_question_is_answered_near_the_top(
    any_ws: Workspace,
) -> None:
    _event_ledger(any_ws)
    query = f"我同事有多高来着？另外，{EVENT}的时间是什么？"
    with MemoryIndex(any_ws, embedder=False) as index:
        index.refresh()
        whole = [hit.content for hit in index.search(query.replace("？", "，"), 10)]
        hits = [hit.content for hit in index.search(query, 10)]
    height = "- 我同事身高164厘米。"
    # searched as one question, the event's lines fill the page above the other answer
    assert whole.index(height) == 8
    assert hits.index(height) <= 2
    assert f"- {EVENT}的时间是下周一晚上七点。" in hits[:2]
    assert len(hits) == len(set(hits))  # each line once


def test_hybrid_search_embeds_each_question(ws: Workspace) -> None:
    park = "- 世界之窗门票一百元"  # shares no word with the question: found by meaning
    cousin = [f"- my cousin has a {thing}" for thing in ("red car", "cat", "blog", "boat")]
    ws.write_text(LEDGER, "\n".join([park, "- 我表哥是护士长", *cousin]) + "\n")
    embedder = ConceptEmbedder(
        {"job": ["职位", "护士长"], "kin": ["表哥", "cousin"], "park": ["景区", "世界之窗"]}
    )
    query = "我表哥现在是干啥职位来着？另外，我参观的那个景区是哪里来着？"
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        hits = [hit.content for hit in index.search(query, 10)]
        assert embedder.queries[-2:] == [
            "我表哥现在是干啥职位来着",
            "另外，我参观的那个景区是哪里来着",
        ]
        whole = [hit.content for hit in index.search(query.replace("？", "，"), 10)]
    assert hits[0] == "- 我表哥是护士长"
    assert hits.index(park) <= 2
    assert whole.index(park) == 5  # the whole question's vector is nearer every cousin line


def _hit(path: str, line: int, content: str) -> SearchHit:
    return SearchHit(path=path, line_number=line, line_end=line, content=content, score=1.0)


def test_rankings_are_fused_by_rank_and_identical_lines_shown_once() -> None:
    a, b, c = _hit("m.md", 1, "- a"), _hit("m.md", 2, "- b"), _hit("m.md", 3, "- c")
    copy = _hit("o.md", 9, "- a")  # the same line in another file
    fused = fuse_rankings([[a, b], [c, copy], [b, a]], 10)
    assert [hit.content for hit in fused] == ["- a", "- b", "- c"]  # a tie: first seen first
    assert fused[0].score == fused[1].score == round(1 / 3 + 1 / 4, 6)
    assert fused[2].score == round(1 / 3, 6)
    assert fuse_rankings([[a, b, c]], 2) == [replace(a, score=0.333333), replace(b, score=0.25)]
    assert rank_fusion([[1, 2], [2, 3]]) == [(2, 1 / 4 + 1 / 3), (1, 1 / 3), (3, 1 / 4)]


def test_a_compound_question_ranks_as_its_questions_searched_apart(any_ws: Workspace) -> None:
    """The searches of a compound question share the rows they read and the positions they
    find in them: the ranking is the fusion of each searched on its own, scores and all."""
    filler = " ".join(f"word{n}" for n in range(70))  # long lines: positions read from terms
    lines = [f"the kiln at the studio is fired on day {n} {filler} glaze cones" for n in range(8)]
    lines += [f"glaze recipe {n} uses feldspar and silica {filler} kiln" for n in range(8)]
    lines += ["the studio opens at nine", "feldspar arrives on Mondays"]
    any_ws.write_text(LEDGER, "".join(f"- {line}\n" for line in lines))
    query = "When is the kiln at the studio fired? Which glaze recipe uses feldspar?"
    terms = analyze_query(query)
    questions = question_clauses(query, terms)
    assert len(questions) == 2
    with MemoryIndex(any_ws, embedder=False) as index:
        index.refresh()

        def searched(engine: Engine) -> tuple[list[SearchHit], list[SearchHit]]:
            with engine.snapshot():
                together = run_search(engine, query, 10, terms=terms, questions=questions)
                apart = [run_search(engine, query, 10, terms=terms, questions=())]
                apart += [run_search(engine, q.text, 10, terms=q.terms) for q in questions]
                return together, fuse_rankings(apart, 10)

        together, apart = index._run(searched, writes=False)
    assert together == apart
    assert len(together) == 10
