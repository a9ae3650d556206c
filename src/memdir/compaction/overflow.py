"""Recognise "the request is larger than the context window" errors from any provider.

:func:`is_context_overflow` looks at the whole cause chain of an exception (``__cause__``,
``__context__``, exception groups; cycle-safe) and, at every link, at the exception type, its
HTTP status and error payload (``status_code``/``body`` as on
:class:`~memdir.errors.ModelError`, or ``response.status_code`` as on httpx / SDK errors) and
its message. The phrasings and codes it recognises are those of :mod:`memdir.models._overflow`, the
same list the provider adapters use; rate limits (HTTP 429, "tokens per min") are never
overflow.
"""

from __future__ import annotations

from collections.abc import Iterator

from memdir.errors import ContextOverflowError
from memdir.models._overflow import StatedLimit, overflow_verdict, payload_strings, stated_limit

__all__ = ["StatedLimit", "is_context_overflow", "overflow_limit"]

# Bound the walk: a chain this long is not an error report any more.
_MAX_LINKS = 32


def is_context_overflow(error: BaseException | None) -> bool:
    """Whether ``error`` (or anything in its cause chain) says the request was too long.

    Args:
        error: any exception; ``None`` gives ``False``.

    Returns:
        ``True`` for :class:`~memdir.errors.ContextOverflowError`, HTTP 413, and the provider
        messages and error codes listed in :mod:`memdir.models._overflow`; ``False`` for rate limits
        and everything else.
    """
    for link in _chain(error):
        if isinstance(link, ContextOverflowError):
            return True
        texts = [str(link), *payload_strings(getattr(link, "body", None))]
        verdict = overflow_verdict(_status(link), texts)
        if verdict is not None:
            return verdict
    return False


def overflow_limit(error: BaseException | None) -> StatedLimit | None:
    """The context limit (and request size) an overflow error states, if it states one.

    Looks at the same cause chain as :func:`is_context_overflow`. OpenAI, vLLM, Anthropic,
    llama.cpp, xAI and DashScope state the limit; Ollama and many gateways do not.
    """
    for link in _chain(error):
        found = stated_limit([str(link), *payload_strings(getattr(link, "body", None))])
        if found is not None:
            return found
    return None


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
