"""Token counting for whole model requests.

A :class:`TokenCounter` counts a text, a message, a list of messages, or a whole request
(system prompt, tool schemas, every message). Two implementations share the message
accounting and differ only in how they count text:

* :class:`EstimatingCounter` - the default, no dependencies. A script-aware linear model
  (ideographs, kana, Hangul, ASCII words, digits, punctuation, indentation...) calibrated
  against the exact tokenizer; about 5-9 % mean error per text on English, Chinese, code and
  tool-call JSON, and unbiased (``docs/benchmarks.md``). The classic ``chars / 4`` is off by
  -61 % on Chinese.
* :class:`ExactCounter` - an exact BPE tokenizer (``o200k_base``, ``cl100k_base``) from the
  optional ``quicktok`` package (``pip install 'memdir[tokens]'``); nothing is downloaded.

:func:`default_counter` picks the exact one when it is installed.

How a request is counted (the same for both):

* every message: 4 tokens of framing (role, delimiters) + its name + its blocks;
* text and thinking: their text (thinking is counted: providers keep the current turn's);
* a tool call: 8 + name + id + its arguments as JSON (``ensure_ascii=False``);
* a tool result: 4 + tool-call id + name + output (text parts; images as below);
* an image: a flat :data:`IMAGE_TOKENS` (a 1-megapixel image costs about 1,300-1,600 tokens
  on current providers; the true cost depends on the size and the provider);
* the system prompt: as a message; each tool schema: 8 + its JSON
  (``{"name", "description", "parameters"}``); 3 tokens priming the reply.

Messages are immutable, so a message's count is cached under its id and a fingerprint of its
content: a 1,000-message conversation re-counts only the messages that are new or edited.

:class:`UsageAnchor` improves on any estimate once the provider has reported the real input
tokens of a request: the next request is counted as those real tokens plus an estimate of
only the messages added since.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memdir._tokenizers import PROFILES, EstimatorProfile, load_exact
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
    from memdir.models import ToolSpec, Usage

__all__ = [
    "IMAGE_TOKENS",
    "EstimatingCounter",
    "ExactCounter",
    "TokenCounter",
    "UsageAnchor",
    "default_counter",
]

IMAGE_TOKENS = 1_600
"""Flat cost of one image block (no pixel size is known from a URL or data URI)."""

MESSAGE_OVERHEAD = 4
NAME_OVERHEAD = 1
TOOL_CALL_OVERHEAD = 8
TOOL_RESULT_OVERHEAD = 4
TOOL_SCHEMA_OVERHEAD = 8
REPLY_PRIMING = 3


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model provider would bill a request."""

    def count_text(self, text: str) -> int:
        """Tokens of a plain text."""
        ...

    def count_message(self, msg: Msg) -> int:
        """Tokens of one message, framing included."""
        ...

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Tokens of several messages (the sum of :meth:`count_message`)."""
        ...

    def count_request(
        self,
        msgs: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> int:
        """Tokens of a whole request: system prompt, tool schemas, messages, reply priming."""
        ...


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


def _fingerprint(msg: Msg) -> int:
    """A hash of everything in ``msg`` that is sent to a model (not its time or metadata)."""
    return hash((msg.role, msg.name, tuple(_block_key(b) for b in msg.content)))


def _tools_fingerprint(tools: Sequence[ToolSpec] | None) -> int:
    if not tools:
        return 0
    return hash(tuple((t.name, t.description, _freeze(t.parameters)) for t in tools))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# -- counters ---------------------------------------------------------------------------------


class _MessageCounter:
    """Message and request accounting over a text counter, with a per-message cache."""

    def __init__(self, *, image_tokens: int, cache_size: int) -> None:
        if image_tokens < 0:
            raise ConfigError("image_tokens must be zero or more")
        if cache_size < 0:
            raise ConfigError("cache_size must be zero or more")
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
        key = (msg.id, _fingerprint(msg))
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
        if system:
            total += MESSAGE_OVERHEAD + self.count_text(system)
        for spec in tools or ():
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


class EstimatingCounter(_MessageCounter):
    """The default counter: a script-aware estimate, no dependencies.

    Args:
        profile: the tokenizer to imitate, ``"o200k_base"`` (GPT-4o and later; default) or
            ``"cl100k_base"`` (GPT-4, GPT-3.5), or a custom :class:`EstimatorProfile`.
        image_tokens: flat cost of one image.
        cache_size: how many message counts to keep (least recently used are dropped).

    Raises:
        ConfigError: an unknown profile name or a negative setting.
    """

    def __init__(
        self,
        profile: str | EstimatorProfile = "o200k_base",
        *,
        image_tokens: int = IMAGE_TOKENS,
        cache_size: int = 10_000,
    ) -> None:
        super().__init__(image_tokens=image_tokens, cache_size=cache_size)
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ConfigError(
                    f"unknown estimator profile {profile!r}: use one of {', '.join(PROFILES)}"
                )
            profile = PROFILES[profile]
        self.profile = profile
        self._estimate = profile.estimate

    def __repr__(self) -> str:
        return f"EstimatingCounter({self.profile.name!r})"

    def count_text(self, text: str) -> int:
        """Estimated tokens of ``text`` (0 when empty, else at least 1)."""
        return self._estimate(text)


class ExactCounter(_MessageCounter):
    """Exact text counts from a bundled BPE tokenizer (the ``tokens`` extra).

    Args:
        encoding: ``"o200k_base"`` (default), ``"cl100k_base"``, or another encoding the
            ``quicktok`` package ships (``"llama3"``, ``"qwen3"``).
        image_tokens: flat cost of one image.
        cache_size: how many message counts to keep.

    Raises:
        ConfigError: the extra is not installed or the encoding is unknown.
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        image_tokens: int = IMAGE_TOKENS,
        cache_size: int = 10_000,
    ) -> None:
        super().__init__(image_tokens=image_tokens, cache_size=cache_size)
        count = load_exact(encoding)
        if count is None:
            raise ConfigError(
                f"exact tokenizer {encoding!r} is not available: "
                "pip install 'memdir[tokens]', or use EstimatingCounter()"
            )
        self.encoding = encoding
        self._count: Callable[[str], int] = count

    def __repr__(self) -> str:
        return f"ExactCounter({self.encoding!r})"

    def count_text(self, text: str) -> int:
        """Exact tokens of ``text`` (special-token text counts as ordinary text)."""
        return self._count(text) if text else 0


@functools.cache
def default_counter() -> TokenCounter:
    """The shared default counter: exact ``o200k_base`` if installed, else the estimator."""
    try:
        return ExactCounter("o200k_base")
    except ConfigError:
        return EstimatingCounter("o200k_base")


# -- anchoring on reported usage ---------------------------------------------------------------


class UsageAnchor:
    """Anchors request estimates on the input tokens a provider actually reported.

    After :meth:`record` of a request and its :class:`~memdir.models.Usage`, :meth:`estimate`
    of a later request that *extends* it (same system prompt, same tools, the recorded
    messages unchanged at its start) returns the real input tokens plus an estimate of the
    new messages only. The new messages' estimate is scaled by how far the counter was off on
    the recorded request (clamped to ``[min_ratio, max_ratio]``), which corrects a tokenizer
    mismatch such as a non-OpenAI model.

    Safety rule: if anything in the recorded part changed - compaction replaced messages, a
    message was edited, the system prompt or tools differ - the anchor does not apply and the
    plain estimate of the whole request is returned.

    Args:
        counter: the counter for the estimated parts (default :func:`default_counter`).
        min_ratio: lower bound of the correction applied to new messages.
        max_ratio: upper bound of that correction.
    """

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        min_ratio: float = 0.5,
        max_ratio: float = 3.0,
    ) -> None:
        if not 0 < min_ratio <= 1 <= max_ratio:
            raise ConfigError("UsageAnchor needs 0 < min_ratio <= 1 <= max_ratio")
        self.counter = counter or default_counter()
        self.min_ratio = min_ratio
        self.max_ratio = max_ratio
        self._lock = threading.Lock()
        self._anchor: tuple[tuple[tuple[str, int], ...], int, int, int, float] | None = None

    @property
    def anchored(self) -> bool:
        """Whether a usage report has been recorded."""
        return self._anchor is not None

    def record(
        self,
        msgs: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        usage: Usage | int | None,
    ) -> None:
        """Remember the real input tokens of the request made of ``msgs``, ``system``, ``tools``.

        A missing or non-positive ``usage.input_tokens`` is ignored (the previous anchor, if
        any, stays).
        """
        real = usage if isinstance(usage, int) or usage is None else usage.input_tokens
        if real is None or isinstance(real, bool) or real <= 0:
            return
        estimated = self.counter.count_request(msgs, system=system, tools=tools)
        ratio = min(self.max_ratio, max(self.min_ratio, real / max(1, estimated)))
        prefix = tuple((m.id, _fingerprint(m)) for m in msgs)
        anchor = (prefix, hash(system or ""), _tools_fingerprint(tools), real, ratio)
        with self._lock:
            self._anchor = anchor

    def clear(self) -> None:
        """Forget the recorded usage."""
        with self._lock:
            self._anchor = None

    def estimate(
        self,
        msgs: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> int:
        """Tokens of the request, anchored on recorded usage when it still applies."""
        with self._lock:
            anchor = self._anchor
        if anchor is not None:
            prefix, system_fp, tools_fp, real, ratio = anchor
            if (
                len(msgs) >= len(prefix)
                and system_fp == hash(system or "")
                and tools_fp == _tools_fingerprint(tools)
                and all(
                    m.id == key[0] and _fingerprint(m) == key[1]
                    for m, key in zip(msgs, prefix, strict=False)
                )
            ):
                delta = self.counter.count_messages(msgs[len(prefix) :])
                return real + math.ceil(delta * ratio)
        return self.counter.count_request(msgs, system=system, tools=tools)
