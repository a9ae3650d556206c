"""Feedback from the best hits: the lines that go on about what they name.

A question often names a thing by a general word (``手机``, "the event in Guangzhou") while
the lines that answer it name the thing itself (``小米11``, the event's title) and never repeat
the question's words: a follow-up remark, the other half of a two-step question. When the
query's own words find fewer lines than were asked for, the rarest words of the best hits that
the query does not hold are searched too, and the lines holding them join the results, each
scored by the share of those words it holds times a fraction of the best hit's score (so they
rank below the hit that named the thing, and a hit that also holds them moves up).

Cheap by construction: it runs only for short queries whose page is not full, reads at most
``feedback_top`` rows again, and asks the engine for a few short posting lists.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from memdir.index._engine import Engine, StoredRow
from memdir.index._forms import word_key
from memdir.index._query import Term, analyze_query
from memdir.index._rank import RankConfig, Scorer, WeightedTerm, idf, positions_of, query_words
from memdir.index._text import fold

__all__ = ["with_feedback"]

MAX_NEW_WORDS = 6
"""New words of the best hits whose posting lists are looked at, in the order they occur."""
RARE = 40
"""A word found in this many lines or more is too common to name one thing."""


def _new_words(rows: list[StoredRow], asked: set[tuple[str, ...]]) -> list[Term]:
    """Content words of ``rows`` that the query does not hold (CJK: two characters or more)."""
    fresh: dict[tuple[str, ...], Term] = {}
    for row in rows:
        for term in analyze_query(row.content):
            if term.stop or term.part or term.tokens in asked or term.tokens in fresh:
                continue
            if len(term.tokens) == 1 and (term.cjk or len(term.tokens[0]) < 3):
                continue  # one character, or a short Latin word: too vague to name a thing
            fresh[term.tokens] = term
            if len(fresh) >= MAX_NEW_WORDS:
                return list(fresh.values())
    return list(fresh.values())


def with_feedback(
    engine: Engine,
    rows: dict[int, StoredRow],
    scores: dict[int, float],
    query_terms: Sequence[Term],
    words_found: int,
    *,
    total: int,
    avgdl: float,
    limit: int,
    config: RankConfig,
) -> dict[int, float]:
    """``scores`` with the lines sharing the best hits' rarest new words (``rows`` grows).

    Unchanged when more than ``config.feedback_query_terms`` of the query's words are in the
    index (``words_found``: a pasted dialogue says enough on its own) or its words already
    fill ``limit`` lines.
    """
    if words_found > config.feedback_query_terms:
        return scores
    matched = [rowid for rowid, score in scores.items() if score > 0]
    if not matched or len(matched) >= limit:
        return scores
    top = heapq.nlargest(config.feedback_top, matched, key=scores.__getitem__)
    words = _new_words([rows[rowid] for rowid in top], {term.tokens for term in query_terms})
    found: list[tuple[float, Term, list[int]]] = []
    for term in words:
        ids = engine.rowids([term.tokens], RARE)
        if 2 <= len(ids) < RARE:  # elsewhere too, and rare enough to name one thing
            found.append((idf(len(ids), total), term, ids))
    found.sort(key=lambda item: -item[0])
    found = found[: config.feedback_terms]
    if not found:
        return scores
    scorer = Scorer(
        [
            WeightedTerm(tuple(word_key(fold(token)) for token in term.tokens), weight, 1.0)
            for weight, term, _ in found
        ],
        avgdl=avgdl,
        newest_day=None,
        config=config,
    )
    wanted = {rowid for _, _, ids in found for rowid in ids}
    for fetched in engine.fetch([rowid for rowid in wanted if rowid not in rows]):
        rows[fetched.rowid] = fetched
    own = max(scorer.score(rows[rowid]) for rowid in top)
    if own <= 0:
        return scores
    best = scores[top[0]]
    asked = query_words(
        list({word_key(fold(token)) for term in query_terms for token in term.tokens})
    )
    out = dict(scores)
    for rowid in wanted:
        row = rows.get(rowid)
        if row is None:
            continue
        if out.get(rowid, 0.0) <= 0 and not positions_of(row, asked)[1]:
            continue  # shares nothing with the question, not even a function word
        gain = scorer.score(row) / own
        if gain > 0:
            out[rowid] = out.get(rowid, 0.0) + config.feedback_weight * best * min(1.0, gain)
    return out
