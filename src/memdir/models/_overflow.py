"""How providers say "the request is larger than the context window" — one list for all.

The provider adapters (:mod:`memdir.models`) use :func:`is_overflow` on a failed HTTP answer to
raise :class:`~memdir.errors.ContextOverflowError`; the compactor's
:func:`memdir.compaction.is_context_overflow` uses :func:`overflow_verdict` at every link of an
exception's cause chain. Both therefore recognise exactly the same phrasings:

======================  =====================================================================
OpenAI (and Groq, …)    ``context_length_exceeded``; "This model's maximum context length is
                        …"; "Your input exceeds the context window of this model";
                        ``string_above_max_length``
Anthropic               "prompt is too long: N tokens > M maximum"; "input length and
                        ``max_tokens`` exceed context limit"; 413 ``request_too_large``
vLLM                    "This model's maximum context length is …"; "… is longer than the
                        maximum model length of …"
Ollama / LM Studio      "the input length exceeds the context length"; "… greater than the
                        context length"
llama.cpp server        ``exceed_context_size_error``; "request (N tokens) exceeds the
                        available context size (M tokens)"
Gemini, Bedrock, other  "input token count … exceeds the maximum"; "Input is too long";
                        "too many tokens"; "context window exceeded"; DashScope "range of
                        input length should be …"; xAI "maximum prompt length is N";
                        MiniMax "context window exceeds limit"
======================  =====================================================================

Rate-limit errors (HTTP 429, "tokens per min") are never overflow, even when their text
mentions a token limit: shrinking the context would not help and retrying would loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["StatedLimit", "is_overflow", "overflow_verdict", "payload_strings", "stated_limit"]

_CODES = frozenset(
    {
        "context_length_exceeded",
        "context_window_exceeded",
        "exceed_context_size_error",
        "request_too_large",
        "string_above_max_length",
        "prompt_too_long",
    }
)

_PATTERNS = re.compile(
    "|".join(
        (
            r"context[ _-]length[ _-]exceeded",
            r"context[ _-]window[ _-]exceeded",
            r"exceed_context_size_error",
            r"request_too_large",
            r"maximum context length",
            r"prompt is too long",
            r"exceeds? (?:the )?(?:model'?s? |available |maximum |max )*"
            r"(?:context|input limit|token limit)",
            r"exceed context limit",
            r"input (?:is )?too long",
            r"too many (?:input |prompt )?tokens",
            r"reduce the length of the (?:messages|input|prompt)",
            r"longer than the maximum model length",
            r"input token count .{0,60}exceeds",
            r"context (?:window|length|size) (?:is |was )?(?:full|exceeded)",
            r"context window exceeds limit",
            r"greater than the context length",
            r"range of input length should be",
            r"maximum prompt length is \d+",
            r"input (?:length|tokens?) (?:exceeds?|is too long)",
            r"token limit exceeded",
            r"expected a string with maximum length",
        )
    ),
    re.IGNORECASE,
)

_RATE_LIMIT = re.compile(r"rate[ _-]?limit|per min(?:ute)?\b|\btpm\b", re.IGNORECASE)

# A payload this deep or wide is not an error report any more.
_MAX_DEPTH = 4
_MAX_ITEMS = 16


def payload_strings(body: Any, depth: int = 0) -> Iterator[str]:
    """Every string in an error payload (dict/list/str/bytes), e.g. ``error.message``."""
    if depth > _MAX_DEPTH or body is None:
        return
    if isinstance(body, str):
        yield body
    elif isinstance(body, bytes):
        yield body.decode("utf-8", "replace")
    elif isinstance(body, Mapping):
        for value in body.values():
            yield from payload_strings(value, depth + 1)
    elif isinstance(body, list | tuple):
        for value in body[:_MAX_ITEMS]:
            yield from payload_strings(value, depth + 1)


def overflow_verdict(status_code: int | None, texts: Iterable[str]) -> bool | None:
    """What one failure says: ``True`` overflow, ``False`` a rate limit, ``None`` neither.

    Args:
        status_code: the HTTP status, if any.
        texts: the error message and the strings of its payload.
    """
    if status_code == 429:
        return False
    texts = list(texts)
    if any(_RATE_LIMIT.search(t) for t in texts):
        return False
    if status_code == 413:
        return True
    if any(t.strip().lower() in _CODES or _PATTERNS.search(t) for t in texts):
        return True
    return None


def is_overflow(status_code: int | None, body: object) -> bool:
    """Whether a failed response (status and error body) says the request was too long."""
    return overflow_verdict(status_code, payload_strings(body)) is True


_NUM = r"(\d[\d,]*)"


def _compiled(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


# What providers say the limit is (tokens), first match wins.
_LIMIT_PATTERNS = _compiled(
    rf"maximum context length is {_NUM}",
    rf"tokens? > {_NUM} maximum",
    rf"available context size \({_NUM} tokens?\)",
    rf"maximum model length of {_NUM}",
    rf"maximum prompt length is {_NUM}",
    rf"context (?:length|window|size) (?:of|is) {_NUM}",
    rf"range of input length should be \[\d+, *{_NUM}\]",
    rf"exceeds the maximum (?:number of )?(?:input )?tokens? (?:of |allowed \(){_NUM}",
)
# What they say the request was (tokens).
_REQUESTED_PATTERNS = _compiled(
    rf"{_NUM} in the messages",
    rf"resulted in {_NUM} tokens",
    rf"prompt is too long: {_NUM} tokens",
    rf"request \({_NUM} tokens?\)",
    rf"contains {_NUM} tokens",
    rf"input token count(?: \(| of | is |: ?){_NUM}",
    rf"you requested {_NUM} tokens",
)
_COMPLETION = re.compile(rf"{_NUM} in the completion", re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatedLimit:
    """The numbers an overflow error states, in the provider's tokens.

    Attributes:
        limit: the most the request's input may hold (the output reserve, when the provider
            names it, already taken off).
        requested: the size of the refused input, when stated.
    """

    limit: int | None
    requested: int | None


def _first(patterns: Iterable[re.Pattern[str]], texts: list[str]) -> int | None:
    for pattern in patterns:
        for text in texts:
            found = pattern.search(text)
            if found is not None:
                value = int(found.group(1).replace(",", ""))
                if value > 0:
                    return value
    return None


def stated_limit(texts: Iterable[str]) -> StatedLimit | None:
    """The limit and request size an overflow message states, or ``None`` if it names none.

    ``"This model's maximum context length is 8192 tokens. However, you requested 9100 tokens
    (8000 in the messages, 1100 in the completion)"`` gives ``limit=7092, requested=8000``:
    the input may hold what the window leaves after the completion.
    """
    texts = [t[:2_000] for t in texts]
    limit = _first(_LIMIT_PATTERNS, texts)
    requested = _first(_REQUESTED_PATTERNS, texts)
    completion = _first((_COMPLETION,), texts)
    if limit is not None and completion is not None and completion < limit:
        limit -= completion
    if limit is None and requested is None:
        return None
    if limit is not None and requested is not None and requested <= limit:
        requested = None  # contradictory (e.g. the output reserve counted elsewhere)
    return StatedLimit(limit=limit, requested=requested)
