"""Which messages a flushed bullet came from, and so its origin.

A flush hands the model a stretch of conversation and gets bullets back; memdir, not the
model, decides which messages each bullet was taken from: those holding most of its words
(a bullet copies or closely rewords its message). The role of the one holding most of them gives the
origin: the user's words are ``user``, the assistant's ``model``, a tool result's ``tool``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memdir.messages import Msg
from memdir.provenance._trust import ORIGINS, least_trusted
from memdir.store.ledger import bullet_words

__all__ = ["Attribution", "attribute"]

_FLOOR = 0.3  # a message must hold this share of the bullet's words to be a source
_NEAR_BEST = 0.8  # and nearly as many as the best one


@dataclass(frozen=True, slots=True)
class Attribution:
    """The messages a bullet came from (may be empty) and its origin."""

    messages: tuple[str, ...]
    origin: str


def _segments(msg: Msg) -> list[tuple[str, str]]:
    """``(text, origin)`` of each part of a message that can hold a fact."""
    if msg.role == "tool":
        return [(msg.text, "tool")] + [(r.text, "tool") for r in msg.tool_results]
    origin = {"user": "user", "assistant": "model"}.get(msg.role, "unknown")
    parts = [(msg.text, origin)]
    parts += [(r.text, "tool") for r in msg.tool_results]  # results carried in a user message
    return parts


def attribute(bullet: str, messages: Sequence[Msg], *, origin: str | None = None) -> Attribution:
    """The messages of ``messages`` that ``bullet`` was taken from, and its origin.

    Args:
        bullet: the bullet as the model wrote it.
        messages: the messages the model was shown.
        origin: the origin of every message (``"ingest"`` for an ingested transcript);
            ``None``: from each message's role.

    When no message holds enough of the bullet's words, no message is named and the origin
    is the least trusted of all of them: a bullet is never given a source it may not have.
    """
    wanted = bullet_words(bullet)
    scored: list[tuple[float, Msg, str]] = []
    for msg in messages:
        for text, kind in _segments(msg):
            if not text.strip() or not wanted:
                continue
            score = len(wanted & bullet_words(text)) / len(wanted)
            scored.append((score, msg, kind))
    best = max((s for s, _, _ in scored), default=0.0)
    if best < _FLOOR:
        kinds = [k for _, _, k in scored] or ["unknown"]
        return Attribution((), origin or least_trusted(kinds))
    chosen = [(m, k) for s, m, k in scored if s >= best * _NEAR_BEST]
    ids = tuple(dict.fromkeys(m.id for m, _ in chosen))
    # The words are the speaker's who holds most of them; of equals, the more trusted (a
    # user's preference the assistant repeats is still the user's).
    top = [k for s, _, k in scored if s == best]
    return Attribution(ids, origin or min(top, key=ORIGINS.index))
