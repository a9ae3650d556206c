"""Message and request accounting shared by the token counters (see :mod:`memdir.tokens`).

A counter subclasses :class:`MessageCounter` and supplies ``count_text``; this module adds the
framing of messages, tool calls, tool results, images and tool schemas, and a per-message
cache keyed by id and a fingerprint of what is sent to the model.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memdir.errors import ConfigError
from memdir.messages import (
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

if TYPE_CHECKING:
    from memdir.models import ToolSpec

__all__ = ["MessageCounter", "fingerprint", "tools_fingerprint"]

MESSAGE_OVERHEAD = 4
NAME_OVERHEAD = 1
TOOL_CALL_OVERHEAD = 8
TOOL_RESULT_OVERHEAD = 4
TOOL_SCHEMA_OVERHEAD = 8
REPLY_PRIMING = 3


# -- fingerprints -----------------------------------------------------------------------------


def _freeze(value: Any) -> Hashable:
    """A hashable image of a JSON-like value (``str`` hashes are cached by Python)."""
    if isinstance(value, dict):
        return ("{", tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("[", tuple(_freeze(v) for v in value))
    if isinstance(value, str | int | float | bool) or value is None:
        return (type(value).__name__, value)
    return ("?", repr(value))


def _block_key(block: object) -> Hashable:
    if isinstance(block, TextBlock):
        return ("t", block.text)
    if isinstance(block, ToolUseBlock):
        return ("u", block.id, block.name, _freeze(block.input))
    if isinstance(block, ToolResultBlock):
        output = block.output
        out_key = output if isinstance(output, str) else tuple(_block_key(p) for p in output)
        return ("r", block.tool_use_id, block.name, block.is_error, out_key)
    if isinstance(block, ThinkingBlock):
        return ("k", block.thinking, block.signature, block.redacted)
    if isinstance(block, ImageBlock):
        return ("i", block.source, block.media_type)
    return ("?", repr(block))


def fingerprint(msg: Msg) -> int:
    """A hash of everything in ``msg`` that is sent to a model (not its time or metadata)."""
    return hash((msg.role, msg.name, tuple(_block_key(b) for b in msg.content)))


def tools_fingerprint(tools: Sequence[ToolSpec] | None) -> int:
    """A hash of the tool schemas of a request (0 for none)."""
    if not tools:
        return 0
    return hash(tuple((t.name, t.description, _freeze(t.parameters)) for t in tools))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# -- counters ---------------------------------------------------------------------------------


class MessageCounter:
    """Message and request accounting over a text counter, with a per-message cache."""

    def __init__(self, *, image_tokens: int, cache_size: int) -> None:
        for name, value in (("image_tokens", image_tokens), ("cache_size", cache_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an int, zero or more, not {value!r}")
        self.image_tokens = image_tokens
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def count_text(self, text: str) -> int:
        """Tokens of a plain text (0 for an empty text)."""
        raise NotImplementedError

    def count_message(self, msg: Msg) -> int:
        """Tokens of one message, framing included (cached by id and content)."""
        if not isinstance(msg, Msg):
            raise ConfigError(f"count_message needs a Msg, not {type(msg).__name__}")
        if self.cache_size == 0:
            return self._count_uncached(msg)
        key = (msg.id, fingerprint(msg))
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        tokens = self._count_uncached(msg)
        with self._lock:
            self._cache[key] = tokens
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return tokens

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Tokens of several messages."""
        if isinstance(msgs, Msg | str | bytes | dict) or not isinstance(msgs, Iterable):
            raise ConfigError(f"count_messages takes a list of Msg, not {type(msgs).__name__}")
        return sum(self.count_message(m) for m in msgs)

    def count_request(
        self,
        msgs: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> int:
        """Tokens of a whole request: system prompt, tool schemas, messages, reply priming."""
        total = self.count_messages(msgs) + REPLY_PRIMING
        if system is not None and not isinstance(system, str):
            raise ConfigError(f"system must be a str, not {type(system).__name__}")
        if system:
            total += MESSAGE_OVERHEAD + self.count_text(system)
        for spec in tools or ():
            if not hasattr(spec, "parameters"):  # ToolSpec, checked without importing models
                raise ConfigError(f"tools must be ToolSpec objects, not {type(spec).__name__}")
            schema = {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            }
            total += TOOL_SCHEMA_OVERHEAD + self.count_text(_json(schema))
        return total

    def clear_cache(self) -> None:
        """Forget every cached message count."""
        with self._lock:
            self._cache.clear()

    def _count_uncached(self, msg: Msg) -> int:
        total = MESSAGE_OVERHEAD
        if msg.name:
            total += NAME_OVERHEAD + self.count_text(msg.name)
        for block in msg.content:
            total += self._count_block(block)
        return total

    def _count_block(self, block: object) -> int:
        if isinstance(block, TextBlock):
            return self.count_text(block.text)
        if isinstance(block, ToolUseBlock):
            return (
                TOOL_CALL_OVERHEAD
                + self.count_text(block.name)
                + self.count_text(block.id)
                + self.count_text(_json(block.input))
            )
        if isinstance(block, ToolResultBlock):
            total = TOOL_RESULT_OVERHEAD + self.count_text(block.tool_use_id)
            if block.name:
                total += self.count_text(block.name)
            if isinstance(block.output, str):
                return total + self.count_text(block.output)
            return total + sum(self._count_block(part) for part in block.output)
        if isinstance(block, ThinkingBlock):
            # A redacted block's opaque payload travels back to the provider in `signature`.
            text = (block.signature or "") if block.redacted else block.thinking
            return self.count_text(text)
        if isinstance(block, ImageBlock):
            return self.image_tokens
        return 0
