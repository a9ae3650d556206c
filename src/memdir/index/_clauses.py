"""Compound questions: one query that asks two things.

``我同事有多高来着？另外，模型艺术盛宴的时间是什么？`` asks for a colleague's height and for an
event's time. Searched whole, the rare words of one half (the event's long name) fill the
page with lines about the event, and the other half's answer (``我同事身高164厘米``) falls
below them. A query of two to :data:`MAX_CLAUSES` questions, each with a content word, that
is not a conversation (:func:`memdir.index._query.is_conversation`: a pasted dialogue holds
many questions and is searched whole) is searched whole and question by question, and the
rankings are fused (:func:`fuse_rankings`): the best line for each question reaches the top.
Hybrid search does the same with the nearest lines to the whole query's vector and to each
question's.

A sentence after the last question that says how to answer it (``Mention only five items.``,
``Answer yes or no.``, ``请用中文回答。``) is no part of what is asked: its words would find
lines about items and answers, so it is left out of the search (:func:`without_answer_form`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import NamedTuple, TypeVar

from memdir.index._query import (
    MAX_QUERY_CHARS,
    Term,
    analyze_query,
    content_words,
    is_conversation,
)
from memdir.index._types import SearchHit
from memdir.store.ledger import normalize_bullet

__all__ = [
    "CLAUSE_RRF_K",
    "MAX_CLAUSES",
    "Question",
    "fuse_rankings",
    "question_clauses",
    "rank_fusion",
    "without_answer_form",
]

MAX_CLAUSES = 4
"""More questions than this in one query is a list, searched whole."""
CLAUSE_RRF_K = 2
"""Reciprocal rank fusion of the rankings: a hit at rank r (1-based) adds ``1 / (K + r)``, so
the best few of each question lead (MemDaily R@5 is flat for K from 1 to 3)."""

_K = TypeVar("_K", bound=Hashable)

_QUESTION_END = re.compile(r"[?？]+")
_HOW_TO_ANSWER = re.compile(
    r"^\W*(?:please\W+)?(?:answer|mention|respond|reply|limit|be|format|only|just"
    r"|keep (?:it|your|the|answers?))\b"
    r"|^\W*请?(?:只|仅|回答|简要|简短|简单回答|用\S{0,4}(?:回答|作答|回复))",
    re.IGNORECASE,
)
"""A sentence that tells how to answer, not what about: an instruction on the answer's form."""


def without_answer_form(query: str) -> str:
    """``query`` without a sentence after its last question that says how to answer it
    (``When is the offsite? Mention only five items.`` -> ``When is the offsite?``); as it
    is when nothing follows a question, what follows asks or says something, or the question
    has no word to search for (``What? Answer me.``)."""
    last = max(query.rfind("?"), query.rfind("？"))
    if last < 0 or not _HOW_TO_ANSWER.search(query[last + 1 :].strip()):
        return query
    asked = query[: last + 1]
    return asked if content_words(analyze_query(asked)) else query


class Question(NamedTuple):
    """One question of a compound question, and :func:`analyze_query` of it."""

    text: str
    terms: list[Term]


def question_clauses(query: str, terms: Sequence[Term]) -> list[Question]:
    """The questions of a compound question (``terms``: :func:`analyze_query` of ``query``),
    or ``[]`` when ``query`` asks one thing, is a conversation, or lists too many.

    Only the first :data:`MAX_QUERY_CHARS` characters are read, as :func:`analyze_query`
    reads them, so a huge query costs no more than a long one.
    """
    head = without_answer_form(query[:MAX_QUERY_CHARS])
    if not _QUESTION_END.search(head) or is_conversation(terms):
        return []
    parts = [part.strip() for part in _QUESTION_END.split(head)]
    if sum(1 for part in parts if part) < 2:
        return []
    questions: list[Question] = []
    for part in parts:
        found = analyze_query(part) if part else []
        if content_words(found):
            if len(questions) == MAX_CLAUSES:
                return []  # a list, searched whole
            questions.append(Question(part, found))
    return questions if len(questions) >= 2 else []


def rank_fusion(rankings: Sequence[Sequence[_K]]) -> list[tuple[_K, float]]:
    """Reciprocal rank fusion of several rankings of the same items: ``(item, fused value)``,
    best first (ties: first seen)."""
    scores: dict[_K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (CLAUSE_RRF_K + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])  # stable: first seen wins a tie


def fuse_rankings(rankings: Sequence[list[SearchHit]], limit: int) -> list[SearchHit]:
    """:func:`rank_fusion` of several rankings of search hits, each hit's score its fused
    value, identical lines shown once."""
    hits: dict[tuple[str, int], SearchHit] = {}
    for ranking in rankings:
        for hit in ranking:
            hits.setdefault((hit.path, hit.line_number), hit)
    keys = [[(hit.path, hit.line_number) for hit in ranking] for ranking in rankings]
    out: list[SearchHit] = []
    seen: set[str] = set()
    for key, score in rank_fusion(keys):
        text = normalize_bullet(hits[key].content)
        if text in seen:
            continue
        seen.add(text)
        out.append(replace(hits[key], score=round(score, 6)))
        if len(out) == limit:
            break
    return out
