"""A :class:`~memdir.models.ChatModel` for any OpenAI-compatible chat-completions server.

Works with OpenAI itself and with servers that speak the same protocol: vLLM, Ollama
(``http://localhost:11434/v1``), the llama.cpp server, DashScope compatible mode, DeepSeek,
OpenRouter and others. Requests are plain JSON over :mod:`httpx`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import httpx

from memdir.errors import ConfigError, ModelError
from memdir.messages import MessageFormatError, Msg, from_openai, repair_tool_pairing, to_openai
from memdir.models._adapter import HttpChatModel, request_messages
from memdir.models._base import ModelResponse, ToolSpec, Usage
from memdir.models._http import RetryPolicy
from memdir.models._openai_stream import OpenAIStreamReader
from memdir.models._text_tools import with_text_tool_calls

__all__ = ["DEFAULT_OPENAI_BASE_URL", "OpenAIChatModel"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class OpenAIChatModel(HttpChatModel):
    """Chat completions against an OpenAI-compatible server.

    Args:
        model: the model name the server knows (``"gpt-4o-mini"``, ``"qwen-plus"``,
            ``"llama3.1:8b"``…).
        base_url: the API root (ending in ``/v1`` for most servers); default
            ``$OPENAI_BASE_URL`` or OpenAI's.
        api_key: the bearer token; default ``$OPENAI_API_KEY``. Required for OpenAI's own
            endpoint; optional for other servers (local ones usually need none).
        context_window: the context size in tokens; default from a table of known models.
        client: an :class:`httpx.AsyncClient` to send requests with (connection reuse, proxies,
            tests with :class:`httpx.MockTransport`). Without one, each call opens its own.
        timeout: seconds to wait for the answer to start, and then for each further piece of
            a streamed answer; default 120, or 600 for a server on this machine or the local
            network.
        retry: how rate limits (429) and transient 5xx/network failures are retried.
        extra_body: more request fields (``temperature``, ``top_p``, provider options).
        max_tokens_field: the name of the output-cap field; default ``max_completion_tokens``
            for OpenAI and ``max_tokens`` (what other servers accept) otherwise.

    Raises:
        ConfigError: no API key for OpenAI's endpoint, or an argument of the wrong type or
            value (a ``base_url`` without ``http://`` or ``https://``, a timeout of 0...).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_tokens_field: str | None = None,
    ) -> None:
        super().__init__(
            model,
            provider="openai",
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL,
            context_window=context_window,
            client=client,
            timeout=timeout,
            retry=retry,
            extra_body=extra_body,
        )
        self.api_key = (
            api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        ) or None
        is_openai = httpx.URL(self.base_url).host == "api.openai.com"
        if is_openai and not self.api_key:
            raise ConfigError(
                "OPENAI_API_KEY is not set: export it, pass api_key=, or use --model extractive"
            )
        self._max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if is_openai else "max_tokens"
        )

    def build_payload(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The JSON body :meth:`generate` sends (useful for debugging and token counting)."""
        msgs = request_messages(
            messages, tools=tools, system=system, max_output_tokens=max_output_tokens
        )
        wire = to_openai(repair_tool_pairing(msgs))
        for item in wire:
            if item.get("role") == "assistant" and item.get("content") is None:
                # A tool-call turn has no text. OpenAI accepts null, but llama-cpp-python's
                # server (and other strict validators) answer 500 to it; "" suits all.
                item["content"] = ""
            if "name" in item:
                # OpenAI rejects names outside [A-Za-z0-9_-]{1,64}; others ignore them.
                name = _NAME_UNSAFE.sub("_", item["name"])[:64]
                if name.strip("_"):
                    item["name"] = name
                else:
                    del item["name"]
        payload: dict[str, Any] = {"model": self.model, "messages": wire}
        if tools:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if max_output_tokens is not None:
            payload[self._max_tokens_field] = max_output_tokens
        payload.update(self._extra)
        return payload

    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _parse(self, body: Mapping[str, Any], *, tools: Sequence[ToolSpec] | None) -> ModelResponse:
        return _parse_response(body, self.name, tool_names=[t.name for t in tools or ()])

    def _stream_fields(self) -> dict[str, Any]:
        # The usage arrives in a last chunk only when asked for; servers that do not know
        # the option ignore it.
        return {"stream": True, "stream_options": {"include_usage": True}}

    def _stream_reader(self, tools: Sequence[ToolSpec] | None) -> OpenAIStreamReader:
        return OpenAIStreamReader(tool_names=[t.name for t in tools or ()])


def _parse_response(
    body: Mapping[str, Any], provider: str, *, tool_names: Collection[str] = ()
) -> ModelResponse:
    """A chat-completions answer as a :class:`ModelResponse`.

    When the message has no structured ``tool_calls`` but ``tool_names`` (the tools the
    request offered) is not empty, tool calls the model wrote into its text (Hermes/Qwen
    ``<tool_call>``, Mistral ``[TOOL_CALLS]``, Llama ``<|python_tag|>`` or bare JSON; see
    :mod:`memdir.models._text_tools`) become tool calls, and the stop reason becomes
    ``"tool_calls"``, whatever the server sent (llama.cpp says ``"stop"``).
    """
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ModelError(f"{provider} answered without choices", body=dict(body))
    choice = choices[0]
    raw = choice.get("message")
    if not isinstance(raw, Mapping):
        raise ModelError(f"{provider} answered without a message", body=dict(body))
    try:
        (message,) = from_openai([{**raw, "role": "assistant"}])
    except MessageFormatError as exc:
        raise ModelError(f"{provider} sent a malformed message: {exc}", body=dict(body)) from exc
    stop_reason = choice.get("finish_reason")
    if tool_names and not message.tool_uses:
        message = with_text_tool_calls(message, tool_names)
        if message.tool_uses:
            stop_reason = "tool_calls"
    usage = body.get("usage")
    return ModelResponse(
        message=message,
        usage=Usage(
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
        )
        if isinstance(usage, Mapping)
        else None,
        stop_reason=stop_reason,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
