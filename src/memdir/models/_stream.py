"""Streamed answers: the delta type, the server-sent-events request loop, and the display guard.

A streaming model (:class:`~memdir.models.StreamingChatModel`) yields :class:`ModelDelta`
pieces while the answer is written, then the whole :class:`~memdir.models.ModelResponse`
last. The provider adapters read the stream with ``httpx-sse`` and rebuild the same answer body
a non-streamed request returns, so both paths end in the same parser.

Retries (429, 5xx, network) happen only before the first event: once text has been shown,
starting again would show it twice, so a failure mid-stream is a :class:`ModelError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

import httpx
from httpx_sse import SSEError, aconnect_sse

from memdir.errors import ConfigError, ContextOverflowError, ModelError
from memdir.models import _http
from memdir.models._http import RetryPolicy, _Exchange, error_message
from memdir.models._overflow import is_overflow

__all__ = ["ModelDelta", "StreamItem", "StreamReader", "TextToolGuard", "stream_events"]

DeltaKind = Literal["text", "thinking", "tool_call"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDelta:
    """A piece of an answer, as it streams in.

    Attributes:
        kind: ``"text"`` (answer text), ``"thinking"`` (reasoning) or ``"tool_call"`` (a piece
            of a tool call's JSON arguments).
        text: the new piece (may be empty on the first delta of a tool call).
        index: for ``"tool_call"``, which call of the answer (0-based).
        tool_call_id: for ``"tool_call"``, the call's id, on its first delta.
        tool_name: for ``"tool_call"``, the tool's name, on its first delta.
    """

    kind: DeltaKind
    text: str = ""
    index: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("text", "thinking", "tool_call"):
            raise ConfigError(
                f"ModelDelta.kind must be 'text', 'thinking' or 'tool_call', not {self.kind!r}"
            )
        if not isinstance(self.text, str):
            raise ConfigError(f"ModelDelta.text must be a string, not {type(self.text).__name__}")


StreamItem = tuple[str, Any]
"""``(event name, parsed JSON data)``; the name is ``""`` for unnamed events, and
``"response"`` when the server ignored the stream flag and sent one whole JSON answer."""


class StreamReader(Protocol):
    """Rebuilds one provider's answer from its stream events."""

    def feed(self, event: str, data: Any) -> list[ModelDelta]:
        """Take one event; return the deltas it carries."""
        ...

    @property
    def started(self) -> bool:
        """Whether any part of an answer arrived."""
        ...

    @property
    def finished(self) -> bool:
        """Whether the provider said the answer was complete (a finish or stop reason)."""
        ...

    def finish(self) -> list[ModelDelta]:
        """The deltas still held back when the stream ends."""
        ...

    def body(self) -> dict[str, Any]:
        """The answer as the provider's non-streamed JSON body."""
        ...


async def stream_events(
    client: httpx.AsyncClient | None,
    url: str,
    payload: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    provider: str,
    retry: RetryPolicy,
    timeout: float,
) -> AsyncIterator[StreamItem]:
    """POST ``payload`` and yield its server-sent events as parsed JSON.

    ``timeout`` bounds each wait for more bytes, not the whole answer: a slow answer that keeps
    streaming is never cut off. ``data: [DONE]`` ends the stream.

    Raises:
        ContextOverflowError: the provider said the request was too long.
        ModelError: any other failure (after bounded retries before the first event).
    """
    if client is None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0)) as own:
            async for item in stream_events(
                own, url, payload, headers=headers, provider=provider, retry=retry, timeout=timeout
            ):
                yield item
        return
    exchange = _Exchange(url, provider=provider, retry=retry, timeout=timeout)
    limits = httpx.Timeout(timeout, connect=10.0)
    while True:
        started = False
        try:
            async with aconnect_sse(
                client, "POST", url, json=dict(payload), headers=dict(headers), timeout=limits
            ) as source:
                response = source.response
                if not response.is_success:
                    await response.aread()
                    delay = exchange.outcome(response)  # raises unless worth another attempt
                    assert isinstance(delay, float)
                    await _sleep(delay)
                    continue
                kind = response.headers.get("content-type", "").partition(";")[0].strip()
                if kind != "text/event-stream":
                    await response.aread()
                    body = exchange.outcome(response)
                    if isinstance(body, float):  # pragma: no cover - success never retries
                        continue
                    yield "response", body
                    return
                async for sse in source.aiter_sse():
                    if sse.data.strip() == "[DONE]":
                        return
                    if not sse.data.strip():
                        continue
                    try:
                        data = json.loads(sse.data)
                    except ValueError as exc:
                        raise ModelError(
                            f"{provider} sent an unreadable stream event: {sse.data[:200]!r}"
                        ) from exc
                    _raise_for_error(sse.event, data, provider)
                    started = True
                    yield sse.event if sse.event != "message" else "", data
                return
        except httpx.RequestError as exc:
            if started:
                if isinstance(exc, httpx.TimeoutException):
                    raise ModelError(
                        f"{provider} stopped sending for {timeout:g}s in the middle of an answer"
                    ) from exc
                raise ModelError(f"{provider}: the stream broke off: {exc}") from exc
            delay = exchange.outcome(None, exc)
            assert isinstance(delay, float)
            await _sleep(delay)
        except SSEError as exc:
            raise ModelError(f"{provider} sent a malformed stream: {exc}") from exc


async def _sleep(seconds: float) -> None:
    await _http._sleep(seconds)  # looked up on each call: tests patch it to skip the waits


def _raise_for_error(event: str, data: Any, provider: str) -> None:
    """An error reported inside the stream (OpenAI ``{"error": ...}``, Anthropic ``error``)."""
    if not isinstance(data, Mapping):
        return
    error = data.get("error")
    if event != "error" and error is None:
        return
    if is_overflow(None, data):
        raise ContextOverflowError(
            f"{provider}: request exceeds the context window: {error_message(data)}", body=data
        )
    raise ModelError(f"{provider} reported an error mid-stream: {error_message(data)}", body=data)


_TEXT_CALL_MARKERS: Final = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")
_WHOLE_CALL_OPENINGS: Final = ("```", "~~~", "{", "<tools>")


class TextToolGuard:
    """Keeps tool-call markup that a model writes as text out of the streamed text.

    Servers such as llama.cpp's stream a call written as ``<tool_call>{...}</tool_call>`` as
    ordinary text. The final answer turns it into a tool call; while streaming, :meth:`push`
    holds back from the first marker at a line start on, and keeps a possible start of one
    until the next piece shows what it is.
    """

    def __init__(self) -> None:
        self._pending = ""
        self._line_start = True
        self._stopped = False
        self._shown = False
        self._whole = ""  # an answer that may be one bare call, held until it ends

    def push(self, text: str) -> str:
        """The part of ``text`` (after what was held back) that is safe to show now."""
        if self._stopped:
            return ""
        if not self._shown:
            # An answer that opens like a bare call (a fence, a brace, <tools>) is held
            # whole: only its end says whether it is a call or a code block to show.
            self._whole += text
            head = self._whole.lstrip()
            if not head or any(
                head.startswith(w) or w.startswith(head) for w in _WHOLE_CALL_OPENINGS
            ):
                return ""
            text, self._whole = self._whole, ""
        self._shown = True
        buf = self._pending + text
        out: list[str] = []
        i = 0
        while i < len(buf):
            if self._line_start:
                rest = buf[i:].lstrip(" \t")
                if any(rest.startswith(m) for m in _TEXT_CALL_MARKERS):
                    self._stopped = True
                    self._pending = ""
                    return "".join(out)
                if (
                    rest
                    and len(rest) < max(map(len, _TEXT_CALL_MARKERS))
                    and any(m.startswith(rest) for m in _TEXT_CALL_MARKERS)
                ):
                    self._pending = buf[i:]  # could still become a marker
                    return "".join(out)
                if not rest:
                    self._pending = buf[i:]
                    return "".join(out)
            end = buf.find("\n", i)
            if end < 0:
                out.append(buf[i:])
                self._line_start = False
                i = len(buf)
            else:
                out.append(buf[i : end + 1])
                self._line_start = True
                i = end + 1
        self._pending = ""
        return "".join(out)

    def flush(self, *, was_call: bool = False) -> str:
        """What is still held back, at the end of the stream (nothing after a marker).

        Args:
            was_call: the whole answer turned out to be a tool call (then a held answer is
                not shown).
        """
        if self._stopped:
            return ""
        if self._whole:
            held, self._whole = self._whole, ""
            return "" if was_call else held
        held, self._pending = self._pending, ""
        return held
