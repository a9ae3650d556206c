"""What the HTTP provider adapters share: argument checks, the request loop, the response."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

import httpx

from memdir.errors import ConfigError, ModelError
from memdir.messages._msg import Msg, as_list
from memdir.models._base import ModelResponse, ToolSpec
from memdir.models._http import RetryPolicy, post_json
from memdir.models._stream import ModelDelta, StreamReader, stream_events
from memdir.models._windows import known_context_window

__all__ = ["HttpChatModel"]


class HttpChatModel:
    """Base of the JSON-over-HTTP adapters; subclasses say how to build and read a request.

    Subclasses set :attr:`name` and implement :meth:`build_payload`, :meth:`_url`,
    :meth:`_headers` and :meth:`_parse`.
    """

    name: str
    context_window: int | None

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str,
        context_window: int | None,
        client: httpx.AsyncClient | None,
        timeout: float | None,
        retry: RetryPolicy | None,
        extra_body: Mapping[str, Any] | None,
    ) -> None:
        cls = type(self).__name__
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{cls} needs a model name (a non-empty string), not {model!r}")
        if not is_http_url(base_url):
            raise ConfigError(
                f"base_url must be an http:// or https:// URL, not {base_url!r} "
                "(e.g. http://localhost:11434/v1)"
            )
        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or context_window < 1
        ):
            raise ConfigError(f"context_window must be a positive int, not {context_window!r}")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < math.inf
        ):
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise ConfigError(f"client must be an httpx.AsyncClient, not {type(client).__name__}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry must be a RetryPolicy, not {type(retry).__name__}")
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ConfigError(f"extra_body must be a mapping, not {type(extra_body).__name__}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = f"{provider}:{model}"
        self.context_window = (
            context_window if context_window is not None else known_context_window(model)
        )
        self._client = client
        self.timeout = float(timeout) if timeout is not None else default_timeout(self.base_url)
        """Seconds to wait for the answer to start, and then for each further piece of it."""
        self._retry = retry or RetryPolicy()
        self._extra = dict(extra_body or {})

    def build_payload(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The JSON body :meth:`generate` sends (useful for debugging and token counting)."""
        raise NotImplementedError

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        """Send one request and parse the answer.

        Raises:
            ContextOverflowError: the provider said the request exceeds the context window.
            ModelError: any other failure (after bounded retries for 429/5xx/network errors).
            MessageFormatError: ``messages`` is not a list of :class:`Msg`.
            ConfigError: ``tools``, ``system`` or ``max_output_tokens`` has the wrong type.
        """
        payload = self.build_payload(
            messages, tools=tools, system=system, max_output_tokens=max_output_tokens
        )
        body = await post_json(
            self._client,
            self._url(),
            payload,
            headers=self._headers(),
            provider=self.name,
            retry=self._retry,
            timeout=self.timeout,
        )
        return self._parse(body, tools=tools)

    async def stream(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Send one request and yield the answer as it is written, then the whole answer.

        The deltas are :class:`ModelDelta` pieces (text, thinking, tool-call arguments); the
        last item is the same :class:`ModelResponse` that :meth:`generate` would return. The
        timeout bounds each wait for more of the answer, so a slow model that keeps writing
        is never cut off.

        Raises:
            The same errors as :meth:`generate`; a failure after the first delta is not
            retried (the text already shown would be shown twice).
        """
        payload = self.build_payload(
            messages, tools=tools, system=system, max_output_tokens=max_output_tokens
        )
        reader = self._stream_reader(tools)
        events = stream_events(
            self._client,
            self._url(),
            {**payload, **self._stream_fields()},
            headers=self._headers(),
            provider=self.name,
            retry=self._retry,
            timeout=self.timeout,
        )
        async for event, data in events:
            for delta in reader.feed(event, data):
                yield delta
        if not reader.started:
            # Some servers answer a streamed request they refuse (one over the context window,
            # for llama-cpp-python) with an empty stream: ask once more without streaming, to
            # get the answer or the error that says what is wrong.
            response = await self.generate(
                messages, tools=tools, system=system, max_output_tokens=max_output_tokens
            )
            if response.text:
                yield ModelDelta(kind="text", text=response.text)
            yield response
            return
        for delta in reader.finish():
            yield delta
        if not reader.finished:
            raise ModelError(
                f"{self.name}: the answer ended before it was finished (the stream closed "
                "without a finish reason); a server that cuts one request short when another "
                "arrives does this (llama-cpp-python: start it with --interrupt_requests False)"
            )
        yield self._parse(reader.body(), tools=tools)

    def _stream_fields(self) -> dict[str, Any]:
        """Request fields that ask for a stream."""
        return {"stream": True}

    def _stream_reader(self, tools: Sequence[ToolSpec] | None) -> StreamReader:
        raise NotImplementedError

    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _parse(self, body: Mapping[str, Any], *, tools: Sequence[ToolSpec] | None) -> ModelResponse:
        """The answer ``body`` as a response; ``tools`` are the ones the request offered."""
        raise NotImplementedError


REMOTE_TIMEOUT: Final = 120.0
"""Default timeout of a hosted API."""
LOCAL_TIMEOUT: Final = 600.0
"""Default timeout of a server on this machine or the local network: a model on a CPU may
read a long prompt for minutes before it writes the first token."""


def is_local_url(url: str) -> bool:
    """Whether ``url`` points at this machine or the local network.

    Loopback, private and link-local addresses, ``localhost``, names under ``.local``,
    ``.localhost``, ``.internal`` or ``.lan``, and single-label names (a container such as
    ``http://ollama:11434``).
    """
    try:
        host = httpx.URL(url).host.strip("[]").lower()
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host.endswith((".local", ".localhost", ".internal", ".lan"))
    return address.is_loopback or address.is_private or address.is_link_local


def default_timeout(base_url: str) -> float:
    """The default timeout of a model served at ``base_url``: longer for local servers."""
    return LOCAL_TIMEOUT if is_local_url(base_url) else REMOTE_TIMEOUT


def is_http_url(value: object) -> bool:
    """Whether ``value`` is an ``http://`` or ``https://`` URL with a host."""
    if not isinstance(value, str):
        return False
    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    return url.scheme in ("http", "https") and bool(url.host)


def request_messages(
    messages: Sequence[Msg],
    *,
    tools: Sequence[ToolSpec] | None,
    system: str | None,
    max_output_tokens: int | None,
) -> list[Msg]:
    """Check a request's arguments; the conversation with ``system`` (if any) put first.

    Raises:
        MessageFormatError: ``messages`` is not a list of :class:`Msg`.
        ConfigError: ``tools``, ``system`` or ``max_output_tokens`` has the wrong type.
    """
    msgs = as_list(messages, "generate", of_msgs=True)
    if system is not None and not isinstance(system, str):
        raise ConfigError(f"system must be a string, not {type(system).__name__}")
    if tools is not None:
        for spec in as_list(tools, "tools"):
            if not isinstance(spec, ToolSpec):
                raise ConfigError(f"tools must be ToolSpec objects, not {type(spec).__name__}")
    if max_output_tokens is not None and (
        isinstance(max_output_tokens, bool)
        or not isinstance(max_output_tokens, int)
        or max_output_tokens < 1
    ):
        raise ConfigError(f"max_output_tokens must be a positive int, not {max_output_tokens!r}")
    if system:
        msgs.insert(0, Msg.system(system))
    return msgs
