"""Recognise "the request is larger than the context window" errors from any provider.

:func:`is_context_overflow` looks at the whole cause chain of an exception (``__cause__``,
``__context__``, exception groups; cycle-safe) and, at every link, at the exception type, its
HTTP status and error payload (``status_code``/``body`` as on
:class:`~memdir.errors.ModelError`, or ``response.status_code`` as on httpx / SDK errors) and
its message. Recognised phrasings:

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
                        input length should be …"; xAI "maximum prompt length is N"
======================  =====================================================================

Rate-limit errors (HTTP 429, "tokens per min") are never treated as overflow, even when their
text mentions a token limit: shrinking the context would not help and retrying would loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from memdir.errors import ContextOverflowError

__all__ = ["is_context_overflow"]

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

# Bound the walk: a payload or chain this deep is not an error report any more.
_MAX_LINKS = 32
_MAX_DEPTH = 4


def is_context_overflow(error: BaseException | None) -> bool:
    """Whether ``error`` (or anything in its cause chain) says the request was too long.

    Args:
        error: any exception; ``None`` gives ``False``.

    Returns:
        ``True`` for :class:`~memdir.errors.ContextOverflowError`, HTTP 413, and the provider
        messages and error codes listed in this module's docstring; ``False`` for rate limits
        and everything else.
    """
    for link in _chain(error):
        if isinstance(link, ContextOverflowError):
            return True
        status = _status(link)
        if status == 429:
            return False
        texts = [str(link), *_payload_strings(getattr(link, "body", None))]
        if any(_RATE_LIMIT.search(t) for t in texts):
            return False
        if status == 413:
            return True
        for text in texts:
            if text.strip().lower() in _CODES or _PATTERNS.search(text):
                return True
    return False


def _chain(error: BaseException | None) -> Iterator[BaseException]:
    """The exception, its causes and contexts, and group members; each once."""
    seen: set[int] = set()
    stack = [error] if error is not None else []
    while stack and len(seen) < _MAX_LINKS:
        exc = stack.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        nested = getattr(exc, "exceptions", None)
        if isinstance(nested, list | tuple):
            stack.extend(e for e in reversed(nested) if isinstance(e, BaseException))
        for nxt in (exc.__context__, exc.__cause__):
            if nxt is not None:
                stack.append(nxt)


def _status(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status"):
            value = getattr(holder, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _payload_strings(body: Any, depth: int = 0) -> Iterator[str]:
    """Every string in an error payload (dict/list/str), e.g. ``error.message``, ``error.code``."""
    if depth > _MAX_DEPTH or body is None:
        return
    if isinstance(body, str):
        yield body
    elif isinstance(body, bytes):
        yield body.decode("utf-8", "replace")
    elif isinstance(body, Mapping):
        for value in body.values():
            yield from _payload_strings(value, depth + 1)
    elif isinstance(body, list | tuple):
        for value in body[:16]:
            yield from _payload_strings(value, depth + 1)
