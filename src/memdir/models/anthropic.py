"""A :class:`~memdir.models.ChatModel` for the Anthropic Messages API (plain JSON over httpx)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from memdir.errors import ConfigError, ModelError
from memdir.messages import (
    MessageFormatError,
    Msg,
    from_anthropic,
    repair_tool_pairing,
    to_anthropic,
)
from memdir.models._adapter import HttpChatModel, request_messages
from memdir.models._anthropic_stream import AnthropicStreamReader
from memdir.models._base import ModelResponse, ToolSpec, Usage
from memdir.models._http import RetryPolicy

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_ANTHROPIC_BASE_URL", "AnthropicModel"]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every request."""

# The API requires max_tokens; this is used when the caller gives no cap.
_DEFAULT_MAX_TOKENS = 4096


class AnthropicModel(HttpChatModel):
    """Claude models through the Messages API.

    Args:
        model: the model name (``"claude-sonnet-4-5"``…).
        api_key: default ``$ANTHROPIC_API_KEY``.
        base_url: default ``$ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``.
        context_window: the context size in tokens (default 200,000 for ``claude-*``).
        client: an :class:`httpx.AsyncClient` to send requests with (tests inject
            :class:`httpx.MockTransport`). Without one, each call opens its own.
        timeout: seconds to wait for the answer to start, and then for each further piece of
            a streamed answer; default 120, or 600 for a server on this machine or the local
            network.
        retry: how 429/529/5xx and network failures are retried.
        max_tokens: the output cap used when :meth:`generate` gets none.
        extra_body: more request fields (``temperature``, ``thinking``…).

    Raises:
        ConfigError: no API key, or an argument of the wrong type or value.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        context_window: int | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            model,
            provider="anthropic",
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_BASE_URL,
            context_window=context_window,
            client=client,
            timeout=timeout,
            retry=retry,
            extra_body=extra_body,
        )
        self.api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        if not self.api_key:
            raise ConfigError(
                "ANTHROPIC_API_KEY is not set: export it, pass api_key=, or use --model extractive"
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive int, not {max_tokens!r}")
        self._max_tokens = max_tokens

    def build_payload(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The JSON body :meth:`generate` sends."""
        msgs = request_messages(
            messages, tools=tools, system=system, max_output_tokens=max_output_tokens
        )
        system_text, turns = to_anthropic(repair_tool_pairing(msgs))
        if turns and turns[0]["role"] == "assistant":
            # The API wants the conversation to open with a user turn (e.g. after compaction
            # removed it); a neutral one keeps the assistant turn's content intact.
            turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_output_tokens if max_output_tokens is not None else self._max_tokens,
            "messages": turns,
        }
        if system_text:
            payload["system"] = system_text
        if tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        payload.update(self._extra)
        return payload

    def _url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _headers(self) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "x-api-key": self.api_key or "",
            "anthropic-version": ANTHROPIC_VERSION,
        }

    def _parse(self, body: Mapping[str, Any], *, tools: Sequence[ToolSpec] | None) -> ModelResponse:
        # The Messages API always returns tool calls as tool_use blocks.
        return _parse_response(body, self.name)

    def _stream_reader(self, tools: Sequence[ToolSpec] | None) -> AnthropicStreamReader:
        return AnthropicStreamReader()


def _parse_response(body: Mapping[str, Any], provider: str) -> ModelResponse:
    content = body.get("content")
    if not isinstance(content, list):
        raise ModelError(f"{provider} answered without content", body=dict(body))
    try:
        (message,) = from_anthropic(None, [{"role": "assistant", "content": content}])
    except (MessageFormatError, ValueError) as exc:
        raise ModelError(f"{provider} sent a malformed message: {exc}", body=dict(body)) from exc
    usage = body.get("usage")
    parsed: Usage | None = None
    if isinstance(usage, Mapping):
        # input_tokens excludes cached prompt parts; the request's size is the sum of all three.
        parts = [
            usage.get(k)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        ]
        counts = [p for p in parts if isinstance(p, int)]
        out = usage.get("output_tokens")
        parsed = Usage(
            input_tokens=sum(counts) if counts else None,
            output_tokens=out if isinstance(out, int) else None,
        )
    return ModelResponse(message=message, usage=parsed, stop_reason=body.get("stop_reason"))
