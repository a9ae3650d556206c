"""A standing rule ("Always ... when I ask about ...") is found when its topic comes up."""

from __future__ import annotations

import dataclasses

import pytest

from memdir.index import MemoryIndex, _rank
from memdir.index._rules import standing_rule
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-20.md"
RULE = (
    "- 10:02 user: Always format code snippets with syntax highlighting when I ask how to "
    "implement something for the login."
)
TALK = [
    "- 10:{:02d} assistant: To implement the {} we add a {} to the Flask app and a login form.",
    "- 10:{:02d} user: I want to implement the {} next, with a {} so the login stays simple.",
]
THINGS = ["session store", "password reset", "remember-me cookie", "rate limit", "audit log"]
PARTS = ["blueprint", "decorator", "helper", "view", "model"]


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        (RULE, True),
        ("- Never push to main without a review", True),
        ("- 09:00 Bart: From now on, answer in German.", True),
        ("- please always ask before deleting files", True),
        ("- 以后回答都用中文", True),
        ("- 用户：每次都要先确认预算", True),
        ("- I always loved painting", False),  # a habit, not a rule
        ("- 09:00 Caroline: Always here to help!", False),  # no order follows
        ("- Never been to an animal shelter before", False),
        ("- Always good to hear! See you later!", False),
        ("- Never say never!", False),
        ("- 10:42 assistant: Always happy to help", False),  # an assistant sets no rule
        ("- 10:02 user: we never found the cat", False),
        ("- the offsite is on Friday", False),
        ("- 我以前住在上海", False),
    ],
)
def test_a_standing_rule_is_told_from_a_line_that_says_always(line: str, rule: bool) -> None:
    assert standing_rule(line) is rule


def _ledger(ws: Workspace) -> None:
    lines = [RULE]
    for n, (thing, part) in enumerate(zip(THINGS * 2, PARTS * 2, strict=True)):
        lines.append(TALK[n % 2].format(n + 10, thing, part))
    ws.write_text(LEDGER, "\n".join(lines) + "\n")


def _rank_of_rule(ws: Workspace) -> int:
    with MemoryIndex(ws, embedder=False) as index:
        index.refresh()
        hits = [hit.content for hit in index.search("How do I implement the login feature?", 10)]
    return hits.index(RULE) if RULE in hits else len(hits)


def test_a_rule_on_the_topic_of_a_request_ranks_near_the_top(any_ws: Workspace) -> None:
    _ledger(any_ws)
    assert _rank_of_rule(any_ws) == 0


def test_without_rules_the_talk_about_the_topic_buries_it(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_rank, "DEFAULT", dataclasses.replace(_rank.DEFAULT, rules=False))
    _ledger(ws)
    assert _rank_of_rule(ws) >= 3
