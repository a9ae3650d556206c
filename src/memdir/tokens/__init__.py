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
import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memdir.errors import ConfigError
from memdir.messages import Msg
from memdir.tokens._msgcount import MessageCounter, fingerprint, tools_fingerprint
from memdir.tokens._tokenizers import PROFILES, EstimatorProfile, load_exact

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

_NO_USAGE = object()

IMAGE_TOKENS = 1_600
"""Flat cost of one image block (no pixel size is known from a URL or data URI)."""


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


class EstimatingCounter(MessageCounter):
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
        if not isinstance(profile, EstimatorProfile):
            raise ConfigError(
                "profile must be a profile name or an EstimatorProfile, "
                f"not {type(profile).__name__}"
            )
        self.profile = profile
        self._estimate = profile.estimate

    def __repr__(self) -> str:
        return f"EstimatingCounter({self.profile.name!r})"

    def count_text(self, text: str) -> int:
        """Estimated tokens of ``text`` (0 when empty, else at least 1)."""
        if not isinstance(text, str):
            raise ConfigError(f"count_text needs a str, not {type(text).__name__}")
        return self._estimate(text)


class ExactCounter(MessageCounter):
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
        if not isinstance(text, str):
            raise ConfigError(f"count_text needs a str, not {type(text).__name__}")
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
        if counter is not None and not isinstance(counter, TokenCounter):
            raise ConfigError(
                f"counter must be a TokenCounter such as EstimatingCounter(), "
                f"not {type(counter).__name__}"
            )
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
        real: object = usage
        if usage is not None and not isinstance(usage, int):
            real = getattr(usage, "input_tokens", _NO_USAGE)
            if real is _NO_USAGE:
                raise ConfigError(
                    f"usage must be a Usage or an int of input tokens, not {type(usage).__name__}"
                )
        if not isinstance(real, int) or isinstance(real, bool) or real <= 0:
            return
        estimated = self.counter.count_request(msgs, system=system, tools=tools)
        ratio = min(self.max_ratio, max(self.min_ratio, real / max(1, estimated)))
        prefix = tuple((m.id, fingerprint(m)) for m in msgs)
        anchor = (prefix, hash(system or ""), tools_fingerprint(tools), real, ratio)
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
                and tools_fp == tools_fingerprint(tools)
                and all(
                    m.id == key[0] and fingerprint(m) == key[1]
                    for m, key in zip(msgs, prefix, strict=False)
                )
            ):
                delta = self.counter.count_messages(msgs[len(prefix) :])
                return real + math.ceil(delta * ratio)
        return self.counter.count_request(msgs, system=system, tools=tools)
