"""Asking the model for the new ``MEMORY.md``: one call, and one "shorten it" follow-up.

A failed, timed-out, blank, grossly oversized (three times the budget) or bullet-less answer
gives nothing, and so does one that repeats the request's own lines (a weak model's echo,
:mod:`memdir.memory._guards`; a wrapper of tags or a fence is removed first). An answer over
the budget is sent back once to be shortened, and when the follow-up fails or is still over,
the shortest over-budget answer is returned for the caller to trim. An answer cut off by the
output limit is never used as it is. An answer of headings only is a valid, empty file (the
caller decides whether it may replace the old one).

The ``[src: …]`` ids the model ends its bullets with (:mod:`memdir.memory._markers`) are
taken off the answer first, and handed back by bullet; a follow-up shows them again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from memdir.memory._answer import describe_error, valid_unicode
from memdir.memory._budget import tidy
from memdir.memory._entries import parse_bullets
from memdir.memory._guards import consolidation_scaffold, screen_memory, unwrap_memory
from memdir.memory._markers import mark_bullets, strip_markers
from memdir.memory._prompts import shorten_request
from memdir.messages import Msg
from memdir.models import CURRENT_KEY, ChatModel, generate_patiently

__all__ = ["Proposal", "propose"]

log = logging.getLogger("memdir.memory")

_HEADING = re.compile(r"^#{1,6}\s+\S")
_TRUNCATED = {"length", "max_tokens", "max_output_tokens"}

Proposal = tuple[str | None, str, dict[str, list[str]]]
"""``(text, "", ids by bullet key)`` or ``(None, why, {})``."""


async def propose(
    model: ChatModel,
    request: Msg,
    *,
    system: str,
    max_chars: int,
    max_output_tokens: int,
    timeout: float | None,
    redactor: Callable[[str], str],
) -> Proposal:
    """Ask the model, and once more if over budget: ``(text, "", ids)`` or ``(None, why, {})``.

    The text is unwrapped (fence, ``<MEMORY.md>`` tags), redacted, screened and tidied. An
    over-budget text is returned when the follow-up fails or is still over (the caller trims
    it); ``why`` is one of ``timeout``, ``model_error``, ``oversized_answer``,
    ``blank_answer``, ``unusable_answer`` (also for an echo of the request).
    """
    hard_limit = max(3 * max_chars, 8_000)
    current = request.metadata.get(CURRENT_KEY)
    current = current if isinstance(current, str) else ""
    candidates: list[str] = []
    ids: dict[str, list[str]] = {}
    conversation: list[Msg] = [request]

    def best() -> Proposal:
        return min(candidates, key=len), "", ids

    def failed(why: str) -> Proposal:
        return best() if candidates else (None, why, {})

    for attempt in range(2):
        try:
            response = await generate_patiently(
                model,
                conversation,
                system=system,
                max_output_tokens=max_output_tokens,
                timeout=timeout,
            )
        except TimeoutError:
            log.warning(
                "consolidation: the model made no progress for %g s; nothing changed",
                timeout,
            )
            return failed("timeout")
        except Exception as exc:
            log.warning(
                "consolidation: the model call failed (%s); nothing changed",
                describe_error(exc),
            )
            return failed("model_error")
        raw = response.text
        if len(raw) > hard_limit:
            log.warning(
                "consolidation: refused a %d-character answer (budget %d)",
                len(raw),
                max_chars,
            )
            return failed("oversized_answer")
        clean, given = strip_markers(redactor(valid_unicode(unwrap_memory(raw))))
        for key, names in given.items():  # a later answer's ids add to an earlier one's
            ids[key] = list(dict.fromkeys([*names, *ids.get(key, [])]))
        body, note = screen_memory(
            clean,
            consolidation_scaffold(system=system, conversation=conversation, max_chars=max_chars),
            current=current,
        )
        if body is None:
            log.warning("consolidation: refused the answer: %s; nothing changed", note)
            return failed("unusable_answer")
        if note:
            log.warning("consolidation: in the answer, %s", note)
        if body and all(_HEADING.match(ln) for ln in body.splitlines() if ln.strip()):
            # A well-formed file with no entries at all (every one left out, e.g. for size):
            # a valid answer; the caller refuses it if it would drop existing bullets.
            return body + "\n", "", ids
        text = tidy(body)
        if not text.strip():
            log.warning("consolidation: the model's answer was blank; nothing changed")
            return failed("blank_answer")
        if not parse_bullets(text):
            log.warning("consolidation: the answer has no bullet list; nothing changed")
            return failed("unusable_answer")
        truncated = (response.stop_reason or "").lower() in _TRUNCATED
        if len(text) <= max_chars and not truncated:
            return text, "", ids
        if not truncated:
            candidates.append(text)
        if attempt == 0:
            marked = mark_bullets(
                text, {b.first_line: ids[b.key] for b in parse_bullets(text) if b.key in ids}
            )
            conversation = list(
                shorten_request(previous=request, answer=text, max_chars=max_chars, marked=marked)
            )
    if candidates:
        return best()
    log.warning("consolidation: the answer was cut off twice; nothing changed")
    return None, "unusable_answer", {}
