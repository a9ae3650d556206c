"""How long memdir waits for its own model calls (summaries, flush, consolidation).

A small model on a CPU can take minutes for one summary, yet be working all along. So the wait
is counted from the last sign of progress, not from the start: when the model streams
(:class:`~memdir.models.StreamingChatModel`), every piece of the answer restarts the clock;
a model that cannot stream has the whole call. The default, ``"auto"``, follows the model:
its own ``timeout`` (the HTTP adapters: 120 s for a hosted API, 600 s for a server on this
machine or the local network, where the prompt alone can take minutes before the first
token), else 300 s.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

from memdir.errors import ConfigError, ModelError
from memdir.messages import Msg
from memdir.models._base import ChatModel, ModelResponse

__all__ = ["AUTO", "Patience", "check_patience", "generate_patiently", "resolve_patience"]

AUTO: Final = "auto"
Patience: TypeAlias = float | Literal["auto"] | None
"""Seconds without progress before a call is given up (``None``: no limit; ``"auto"``)."""
_FALLBACK: Final = 300.0


def check_patience(what: str, value: object) -> Patience:
    """``value`` if it is ``"auto"``, ``None`` or a positive number of seconds."""
    if value is None or value == AUTO:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)
    raise ConfigError(
        f"{what} must be a positive number of seconds, 'auto' (follow the model) or "
        f"None (no limit), not {value!r}"
    )


def resolve_patience(value: Patience, model: object) -> float | None:
    """The seconds ``value`` stands for with ``model`` (``"auto"``: the model's own timeout)."""
    if value != AUTO:
        return value
    own = getattr(model, "timeout", None)
    if isinstance(own, int | float) and not isinstance(own, bool) and 0 < own < math.inf:
        return float(own)
    return _FALLBACK


async def generate_patiently(
    model: ChatModel,
    messages: Sequence[Msg],
    *,
    system: str | None = None,
    max_output_tokens: int | None = None,
    timeout: float | None,
) -> ModelResponse:
    """``model.generate(...)``, given up after ``timeout`` seconds without progress.

    Streams when the model can, so that each piece of the answer counts as progress.

    Raises:
        TimeoutError: no progress for ``timeout`` seconds.
        ModelError: the model failed, or its stream ended without an answer.
    """
    kwargs: dict[str, Any] = {"system": system, "max_output_tokens": max_output_tokens}
    stream = getattr(model, "stream", None)
    if not callable(stream):
        async with asyncio.timeout(timeout):
            return await model.generate(messages, **kwargs)
    pieces = stream(messages, **kwargs)
    response: ModelResponse | None = None
    try:
        while True:
            try:
                async with asyncio.timeout(timeout):
                    item = await anext(pieces)
            except StopAsyncIteration:
                break
            if isinstance(item, ModelResponse):
                response = item
    finally:
        close = getattr(pieces, "aclose", None)
        if close is not None:
            await close()
    if response is None:
        raise ModelError(
            f"{getattr(model, 'name', 'the model')}: the stream ended without an answer"
        )
    return response
