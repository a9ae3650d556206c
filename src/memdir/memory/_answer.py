"""Read a model's flush answer: new bullets, an explicit "nothing new", or unusable text.

Models decorate. ``NO_REPLY.``, `` `NO_REPLY` ``, a fenced ``NO_REPLY``, ``- (none)`` and
``- NO_REPLY`` all mean "nothing new". Prose without any list item is *unusable* (not
"nothing"): the caller keeps the messages for the next flush instead of losing them. So is an
answer whose every bullet is a line of the prompt, a tool call written as text or a ledger
block heading (:func:`memdir.memory._guards.screen_bullets`): the model did not do the task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memdir._scaffold import Scaffold
from memdir.memory._entries import parse_bullets, strip_fence
from memdir.memory._guards import screen_bullets
from memdir.store.ledger import normalize_bullet

__all__ = ["FlushAnswer", "describe_error", "parse_flush_answer", "valid_unicode"]

_NOTHING = re.compile(
    r"^[\s\W]*(?:no[_ ]?reply|none|nothing(?: new)?(?: to (?:add|record|remember|extract))?|"
    r"n/?a|no new (?:memories|facts|information))[\s\W]*$",
    re.IGNORECASE,
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_NO_REPLY_FIRST = re.compile(r"^[\s`*_>\"'(\[]*NO_REPLY\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FlushAnswer:
    """What the answer said, and (log-safe) which of its bullets were dropped as no fact."""

    bullets: tuple[str, ...]
    nothing: bool
    usable: bool
    dropped: str = ""


def parse_flush_answer(text: str, scaffold: Scaffold | None = None) -> FlushAnswer:
    """Classify a flush answer (see the module docstring); ``scaffold``: the prompt's lines."""
    body = strip_fence(text).strip()
    if not body:
        return FlushAnswer((), nothing=False, usable=False)
    if _NO_REPLY_FIRST.match(body) or _NOTHING.match(body):
        return FlushAnswer((), nothing=True, usable=True)
    bullets = []
    for bullet in parse_bullets(body):
        if _NOTHING.match(bullet.text) or not normalize_bullet(bullet.text):
            continue
        bullets.append(bullet.text)
    dropped = ""
    if scaffold is not None and bullets:
        bullets, dropped = screen_bullets(bullets, scaffold)
        if not bullets:
            return FlushAnswer((), nothing=False, usable=False, dropped=dropped)
    if bullets:
        return FlushAnswer(tuple(bullets), nothing=False, usable=True, dropped=dropped)
    if parse_bullets(body):  # only "nothing" bullets
        return FlushAnswer((), nothing=True, usable=True)
    return FlushAnswer((), nothing=False, usable=False)


def describe_error(exc: BaseException) -> str:
    """A log-safe description of a model failure: its type and HTTP status, no message text.

    Error messages may quote the request, and the request is memory.
    """
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}, HTTP {status}" if status else type(exc).__name__


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD.

    A JSON answer may carry ``"\\udce9"``, which decodes to text that cannot be written as
    UTF-8; refusing it would fail the same way on every run.
    """
    return _SURROGATE.sub("\ufffd", text)
