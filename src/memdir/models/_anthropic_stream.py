"""Reading a streamed Messages API answer (``stream: true``) back into one answer body."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memdir.messages._openai_format import RAW_ARGUMENTS_KEY
from memdir.models._stream import ModelDelta

__all__ = ["AnthropicStreamReader"]


class AnthropicStreamReader:
    """Accumulates ``message_start`` … ``message_stop`` events; :meth:`body` is the answer."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._order: dict[int, int] = {}  # block index -> tool-call index
        self._usage: dict[str, Any] = {}
        self._stop: str | None = None
        self._whole: dict[str, Any] | None = None

    def feed(self, event: str, data: Any) -> list[ModelDelta]:
        """Take one event; return the deltas it carries."""
        if event == "response" and isinstance(data, dict):  # the server did not stream
            self._whole = data
            return [
                ModelDelta(kind="text", text=b["text"])
                for b in data.get("content") or ()
                if isinstance(b, Mapping) and b.get("type") == "text" and b.get("text")
            ]
        if not isinstance(data, Mapping):
            return []
        kind = data.get("type") or event
        if kind == "message_start" and isinstance(data.get("message"), Mapping):
            usage = data["message"].get("usage")
            if isinstance(usage, Mapping):
                self._usage.update(usage)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason"):
                self._stop = delta["stop_reason"]
            if isinstance(data.get("usage"), Mapping):
                self._usage.update(data["usage"])
        elif kind == "content_block_start":
            return self._start(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        return []

    def _start(self, data: Mapping[str, Any]) -> list[ModelDelta]:
        index, block = data.get("index"), data.get("content_block")
        if not isinstance(index, int) or not isinstance(block, Mapping):
            return []
        self._blocks[index] = dict(block)
        if block.get("type") != "tool_use":
            text = block.get("text") or block.get("thinking")
            if not isinstance(text, str) or not text:
                return []
            return [
                ModelDelta(
                    kind="thinking" if block.get("type") == "thinking" else "text", text=text
                )
            ]
        self._order[index] = len(self._order)
        self._json[index] = []
        return [
            ModelDelta(
                kind="tool_call",
                index=self._order[index],
                tool_call_id=block.get("id"),
                tool_name=block.get("name"),
            )
        ]

    def _delta(self, data: Mapping[str, Any]) -> list[ModelDelta]:
        index, delta = data.get("index"), data.get("delta")
        block = self._blocks.get(index) if isinstance(index, int) else None
        if block is None or not isinstance(delta, Mapping):
            return []
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block["text"] = block.get("text", "") + delta["text"]
            return [ModelDelta(kind="text", text=delta["text"])]
        if kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return [ModelDelta(kind="thinking", text=delta["thinking"])]
        if kind == "signature_delta" and isinstance(delta.get("signature"), str):
            block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            assert isinstance(index, int)
            self._json.setdefault(index, []).append(delta["partial_json"])
            return [
                ModelDelta(
                    kind="tool_call", text=delta["partial_json"], index=self._order.get(index, 0)
                )
            ]
        return []

    @property
    def started(self) -> bool:
        """Whether any part of an answer arrived."""
        return bool(self._whole is not None or self._blocks or self._stop)

    @property
    def finished(self) -> bool:
        """Whether the answer was finished (a stop reason, or a whole answer)."""
        return self._whole is not None or self._stop is not None

    def finish(self) -> list[ModelDelta]:
        """Nothing is held back in this format."""
        return []

    def body(self) -> dict[str, Any]:
        """The answer as a Messages API response body."""
        if self._whole is not None:
            return self._whole
        content = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if block.get("type") == "tool_use" and self._json.get(index):
                raw = "".join(self._json[index])
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                block["input"] = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: raw}
            content.append(block)
        return {"content": content, "usage": self._usage, "stop_reason": self._stop}
