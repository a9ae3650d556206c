"""Compaction settings: :class:`CompactionConfig`, :class:`TruncateArgsConfig`,
:class:`ClearToolResultsConfig`.

All three are frozen keyword-only dataclasses validated on construction; a bad value raises
:class:`~memdir.errors.ConfigError` with a one-line message naming the field.

Names and defaults follow the original harness (``trigger_messages=50``, ``keep_messages=20``,
``TruncateArgsConfig`` 25 / 40,000 / 20 / 2,000), with two differences: the token trigger is a
fixed 80,000 tokens of the *whole request* (system prompt and tool schemas included), and the
request is also compacted whenever it passes the hard limit ``context_window - reserve_tokens``
of the agent's model, whatever the triggers say.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memdir.errors import ConfigError
from memdir.models import AUTO, Patience, check_patience
from memdir.redact import redact

if TYPE_CHECKING:
    from memdir.models import ChatModel

__all__ = [
    "DEFAULT_CLEAR_EXCLUDED_TOOLS",
    "ClearToolResultsConfig",
    "CompactionConfig",
    "TruncateArgsConfig",
]

DEFAULT_CLEAR_EXCLUDED_TOOLS: frozenset[str] = frozenset({"memory_search", "memory_get"})
"""Tools whose results are never cleared: they are memory the model asked for on purpose."""


def _check_int(owner: str, name: str, value: object, *, minimum: int = 0) -> None:
    # bool is an int subclass; ``keep_messages=True`` is a mistake, not 1.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{owner}.{name} must be an integer, not {value!r}")
    if value < minimum:
        raise ConfigError(f"{owner}.{name} must be >= {minimum}, not {value}")


def _check_keep(owner: str, trigger: int, keep: int, what: str) -> None:
    # A tail as large as the trigger would leave the conversation over the trigger right after
    # compacting, so every later call would compact again.
    if trigger > 0 and keep >= trigger:
        raise ConfigError(
            f"{owner}.keep_{what} ({keep}) must be smaller than trigger_{what} ({trigger}), "
            "or every call would compact again"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncateArgsConfig:
    """Shorten long string arguments of old tool calls (a cheap pass that runs before a summary).

    The pass has its own trigger, usually lower than the compaction trigger. When it fires, every
    string longer than ``max_arg_length`` (at any depth of the arguments) in a tool call older
    than the kept tail is replaced by its first ``head_chars`` characters, ``truncation_text``
    and a note of the original length and of the session log that holds the full call. Message
    ids, names, timestamps and metadata are preserved, and the change is kept even when no
    summary follows.

    Attributes:
        trigger_messages: run when the conversation has at least this many messages (0: off).
        trigger_tokens: run when the request is at least this many tokens (0: off).
        keep_messages: the newest messages left untouched (message mode).
        keep_tokens: when > 0, leave untouched the newest messages fitting in this many tokens
            instead of ``keep_messages``.
        max_arg_length: strings longer than this many characters are shortened.
        head_chars: characters kept from the start of a shortened string.
        truncation_text: the marker appended after the kept head.
    """

    trigger_messages: int = 25
    trigger_tokens: int = 40_000
    keep_messages: int = 20
    keep_tokens: int = 0
    max_arg_length: int = 2_000
    head_chars: int = 500
    truncation_text: str = "...(argument truncated)"

    def __post_init__(self) -> None:
        owner = "TruncateArgsConfig"
        for name in ("trigger_messages", "trigger_tokens", "keep_messages", "keep_tokens"):
            _check_int(owner, name, getattr(self, name))
        _check_int(owner, "max_arg_length", self.max_arg_length, minimum=1)
        _check_int(owner, "head_chars", self.head_chars)
        if self.head_chars >= self.max_arg_length:
            raise ConfigError(
                f"{owner}.head_chars ({self.head_chars}) must be smaller than max_arg_length "
                f"({self.max_arg_length})"
            )
        if not isinstance(self.truncation_text, str) or not self.truncation_text.strip():
            raise ConfigError(f"{owner}.truncation_text must be a non-blank string")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClearToolResultsConfig:
    """Replace old, large tool results by a short preview (a cheap pass before a summary).

    When compaction triggers, the newest ``keep_results`` tool results stay whole; every older
    result longer than ``min_chars`` (and not from an ``excluded_tools`` tool) becomes its first
    and last characters (``preview_chars`` in all), the original length, and a pointer to the
    session log line that holds it whole. The call/result pairing, ``is_error``, and the
    message's id, timestamp and metadata are kept.

    Attributes:
        keep_results: the newest results never cleared.
        min_chars: only results longer than this many characters are cleared.
        preview_chars: characters of the result kept, split between its head and its tail (the
            tail often holds the error or the final line).
        excluded_tools: tool names whose results are never cleared.
    """

    keep_results: int = 5
    min_chars: int = 2_000
    preview_chars: int = 400
    excluded_tools: frozenset[str] = field(default=DEFAULT_CLEAR_EXCLUDED_TOOLS)

    def __post_init__(self) -> None:
        owner = "ClearToolResultsConfig"
        _check_int(owner, "keep_results", self.keep_results)
        _check_int(owner, "min_chars", self.min_chars, minimum=1)
        _check_int(owner, "preview_chars", self.preview_chars)
        if self.preview_chars >= self.min_chars:
            raise ConfigError(
                f"{owner}.preview_chars ({self.preview_chars}) must be smaller than min_chars "
                f"({self.min_chars})"
            )
        tools: object = self.excluded_tools
        if (
            isinstance(tools, str)
            or not isinstance(tools, Iterable)
            or not all(isinstance(t, str) for t in tools)
        ):
            raise ConfigError(f"{owner}.excluded_tools must be a set of tool names")
        object.__setattr__(self, "excluded_tools", frozenset(tools))


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionConfig:
    """When and how :class:`~memdir.compaction.ConversationCompactor` compacts a conversation.

    Attributes:
        trigger_messages: compact when the conversation has at least this many non-system
            messages (0: off).
        trigger_tokens: compact when the whole request (system prompt, tool schemas and
            messages) is estimated at least this many tokens (0: off).
        keep_messages: how many of the newest messages stay verbatim (message mode).
        keep_tokens: when > 0, keep the newest messages fitting in this many tokens instead of
            ``keep_messages``.
        reserve_tokens: headroom below the model's context window for the answer and the
            summary call, at most a quarter of the window. A request above ``context_window -
            min(reserve_tokens, context_window // 4)`` is compacted even when both triggers are
            off.
        flush_before_compact: call the ``on_flush`` hook with the summarised messages first.
        offload_before_compact: append the summarised messages to the session log before the
            context changes (turning this off makes compaction lossy).
        summary_prompt: the summariser prompt; must contain ``{messages}``. ``None`` uses
            :data:`~memdir.compaction.DEFAULT_SUMMARY_PROMPT`.
        truncate_args: settings of the argument-truncation pass, or ``None`` (off).
        clear_tool_results: settings of the old-tool-result clearing pass, or ``None`` (off).
        model: a dedicated summary model; ``None`` uses the compactor's model.
        summary_max_tokens: the output cap given to the summary call.
        summary_input_tokens: the largest slice of conversation sent in one summary call; a
            longer prefix is summarised slice by slice with a running summary. ``0`` derives it
            from the summary model's context window (unlimited when unknown).
        summary_timeout: seconds a summary call may go without progress (each streamed piece
            of the answer counts; a model that does not stream has the whole call); ``"auto"``
            follows the summary model (its ``timeout``: 120 s for a hosted API, 600 s for a
            local server; else 300 s); ``None``: no limit.
        summary_retries: extra attempts after a failed or timed-out summary call.
        redactor: masks secrets in every message written to the session log (text, thinking,
            tool arguments and outputs); default :func:`memdir.redact.redact`. Pass a
            :class:`~memdir.redact.Redactor` with your own patterns, or ``None`` to log
            messages exactly as they were.
    """

    trigger_messages: int = 50
    trigger_tokens: int = 80_000
    keep_messages: int = 20
    keep_tokens: int = 0
    reserve_tokens: int = 20_000
    flush_before_compact: bool = True
    offload_before_compact: bool = True
    summary_prompt: str | None = None
    truncate_args: TruncateArgsConfig | None = None
    clear_tool_results: ClearToolResultsConfig | None = field(
        default_factory=ClearToolResultsConfig
    )
    model: ChatModel | None = None
    summary_max_tokens: int = 2_000
    summary_input_tokens: int = 0
    summary_timeout: Patience = AUTO
    summary_retries: int = 1
    redactor: Callable[[str], str] | None = redact

    def __post_init__(self) -> None:
        owner = "CompactionConfig"
        for name in (
            "trigger_messages",
            "trigger_tokens",
            "keep_messages",
            "keep_tokens",
            "reserve_tokens",
            "summary_input_tokens",
            "summary_retries",
        ):
            _check_int(owner, name, getattr(self, name))
        _check_int(owner, "summary_max_tokens", self.summary_max_tokens, minimum=1)
        if self.keep_tokens == 0:  # message mode: the tail is keep_messages long
            _check_keep(owner, self.trigger_messages, self.keep_messages, "messages")
        _check_keep(owner, self.trigger_tokens, self.keep_tokens, "tokens")
        for name in ("flush_before_compact", "offload_before_compact"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{owner}.{name} must be True or False")
        if self.summary_prompt is not None and (
            not isinstance(self.summary_prompt, str) or "{messages}" not in self.summary_prompt
        ):
            raise ConfigError(
                f"{owner}.summary_prompt must be a string containing the placeholder {{messages}}"
            )
        if self.truncate_args is not None and not isinstance(
            self.truncate_args, TruncateArgsConfig
        ):
            raise ConfigError(f"{owner}.truncate_args must be a TruncateArgsConfig or None")
        if self.clear_tool_results is not None and not isinstance(
            self.clear_tool_results, ClearToolResultsConfig
        ):
            raise ConfigError(
                f"{owner}.clear_tool_results must be a ClearToolResultsConfig or None"
            )
        if self.model is not None and not callable(getattr(self.model, "generate", None)):
            raise ConfigError(f"{owner}.model must be a ChatModel (an object with generate())")
        if self.redactor is not None and not callable(self.redactor):
            raise ConfigError(f"{owner}.redactor must be a function str -> str (or None)")
        check_patience(f"{owner}.summary_timeout", self.summary_timeout)

    def hard_limit(self, context_window: int | None) -> int | None:
        """The request size (tokens) that always triggers compaction, or ``None`` if unknown."""
        if not context_window or context_window <= 0:
            return None
        # A small window keeps three quarters for the request: a fixed 20,000-token reserve
        # would leave a 32k model 12k, and a 4k one (its system prompt and tool schemas
        # alone near 2k) compacting on every turn.
        return max(1, context_window - min(self.reserve_tokens, context_window // 4))
