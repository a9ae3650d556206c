"""Reading a streamed chat-completions answer (``stream: true``) back into one answer body."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from memdir.models._stream import ModelDelta, TextToolGuard
from memdir.models._text_tools import extract_text_tool_calls

__all__ = ["OpenAIStreamReader"]


class OpenAIStreamReader:
    """Accumulates ``chat.completion.chunk`` events; :meth:`body` is the non-streamed answer.

    Args:
        tool_names: the tools the request offered: tool-call markup written as text is held
            out of the text deltas (the final answer turns it into tool calls).
    """

    def __init__(self, *, tool_names: Collection[str] = ()) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._finish: str | None = None
        self._usage: Any = None
        self._whole: dict[str, Any] | None = None
        self._names = list(tool_names)
        self._guard = TextToolGuard() if self._names else None

    def feed(self, event: str, data: Any) -> list[ModelDelta]:
        """Take one chunk; return the deltas it carries."""
        if event == "response" and isinstance(data, dict):  # the server did not stream
            self._whole = data
            return self._whole_deltas(data)
        if not isinstance(data, Mapping):
            return []
        if data.get("usage") is not None:
            self._usage = data["usage"]
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            return []
        choice = choices[0]
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            return []
        out: list[ModelDelta] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            out.append(ModelDelta(kind="thinking", text=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            shown = self._guard.push(content) if self._guard is not None else content
            if shown:
                out.append(ModelDelta(kind="text", text=shown))
        for call in delta.get("tool_calls") or ():
            if isinstance(call, Mapping):
                out.append(self._call_delta(call))
        return out

    def _call_delta(self, call: Mapping[str, Any]) -> ModelDelta:
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = len(self._calls)
        entry = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        first = not entry["name"] and not entry["id"]
        if isinstance(call.get("id"), str) and not entry["id"]:
            entry["id"] = call["id"]
        function = call.get("function")
        piece = ""
        if isinstance(function, Mapping):
            if isinstance(function.get("name"), str) and not entry["name"]:
                entry["name"] = function["name"]
            if isinstance(function.get("arguments"), str):
                piece = function["arguments"]
                entry["arguments"] += piece
        return ModelDelta(
            kind="tool_call",
            text=piece,
            index=index,
            tool_call_id=entry["id"] or None if first else None,
            tool_name=entry["name"] or None if first else None,
        )

    def _whole_deltas(self, data: Mapping[str, Any]) -> list[ModelDelta]:
        choices = data.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, str) or not content:
            return []
        shown = self._guard.push(content) if self._guard is not None else content
        return [ModelDelta(kind="text", text=shown)] if shown else []

    @property
    def started(self) -> bool:
        """Whether any part of an answer arrived."""
        return bool(
            self._whole is not None or self._text or self._reasoning or self._calls or self._finish
        )

    @property
    def finished(self) -> bool:
        """Whether the answer was finished (a finish reason, or a whole answer)."""
        return self._whole is not None or self._finish is not None

    def finish(self) -> list[ModelDelta]:
        """Text held back at a possible start of tool-call markup that never came."""
        if self._guard is None:
            return []
        was_call = not self._calls and bool(
            extract_text_tool_calls("".join(self._text), self._names)[1]
        )
        held = self._guard.flush(was_call=was_call)
        return [ModelDelta(kind="text", text=held)] if held else []

    def body(self) -> dict[str, Any]:
        """The answer as a chat-completions response body."""
        if self._whole is not None:
            return self._whole
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": entry["id"] or f"call_{index}",
                    "type": "function",
                    "function": {"name": entry["name"], "arguments": entry["arguments"] or "{}"},
                }
                for index, entry in sorted(self._calls.items())
            ]
        body: dict[str, Any] = {"choices": [{"message": message, "finish_reason": self._finish}]}
        if self._usage is not None:
            body["usage"] = self._usage
        return body
