"""The model protocol and its plain-data request/response types.

A :class:`ChatModel` takes messages (plus optional tools and system prompt) and returns one
assistant message with usage. Provider failures raise :class:`~memdir.errors.ModelError`; a
request larger than the context window raises :class:`~memdir.errors.ContextOverflowError`.

Requests written by memdir itself (compaction summary, memory flush, consolidation) carry a task
marker in the metadata of their last user message, so an offline model can serve them without
parsing prose. The keys are the ``*_KEY`` constants below.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memdir.errors import ConfigError
from memdir.messages import Msg, ToolUseBlock
from memdir.messages._msg import as_list

__all__ = [
    "CURRENT_KEY",
    "ENTRIES_KEY",
    "KNOWN_KEY",
    "MAX_CHARS_KEY",
    "MESSAGES_KEY",
    "SOURCES_KEY",
    "TASK_KEY",
    "ChatModel",
    "ModelResponse",
    "StreamingChatModel",
    "ToolSpec",
    "Usage",
    "request_task",
]

TASK_KEY = "memdir.task"
"""Metadata key on the last user message: ``"summarize"``, ``"flush"`` or ``"consolidate"``."""
MESSAGES_KEY = "memdir.messages"
"""``summarize``/``flush``: the messages to process, as ``[Msg.to_dict(), ...]``."""
KNOWN_KEY = "memdir.known"
"""``flush``: text already remembered (MEMORY.md + today's ledger), to skip known facts."""
CURRENT_KEY = "memdir.current"
"""``consolidate``: the current MEMORY.md text (may be empty)."""
ENTRIES_KEY = "memdir.entries"
"""``consolidate``: new ledger bullets, oldest first, as a list of strings."""
MAX_CHARS_KEY = "memdir.max_chars"
"""``consolidate``: the size budget of the new MEMORY.md, in characters."""
SOURCES_KEY = "memdir.sources"
"""``consolidate``: the source ids, ``{"entries": [id of each entry], "current": the current
MEMORY.md with a ``[src: m<n>]`` marker after each bullet}``; the answer ends each bullet with
the ids it came from (:mod:`memdir.provenance`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage reported by the provider (``None`` when not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ConfigError(f"Usage.{name} must be a non-negative int or None, not {value!r}")

    @property
    def total_tokens(self) -> int | None:
        """Input plus output tokens, when both are known."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One model answer.

    Attributes:
        message: the assistant message (text, thinking and/or tool calls).
        usage: token usage, when the provider reports it.
        stop_reason: the provider's finish reason (``"stop"``, ``"tool_calls"``,
            ``"end_turn"``, ``"length"``…), unnormalised.
    """

    message: Msg
    usage: Usage | None = None
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.message, Msg) or self.message.role != "assistant":
            raise ConfigError(
                "ModelResponse.message must be an assistant Msg (e.g. Msg.assistant(text)), "
                f"not {self.message!r:.80}"
            )
        if self.usage is not None and not isinstance(self.usage, Usage):
            raise ConfigError(f"ModelResponse.usage must be a Usage, not {self.usage!r:.80}")

    @property
    def text(self) -> str:
        """The answer's text blocks joined by newlines."""
        return self.message.text

    @property
    def tool_calls(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls the model asked for, in order."""
        return self.message.tool_uses


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool offered to the model.

    Attributes:
        name: the function name the model calls.
        description: what the tool does, written for the model.
        parameters: a JSON schema (``{"type": "object", "properties": ...}``).
    """

    name: str
    description: str
    parameters: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"ToolSpec.name must be a non-empty string, not {self.name!r}")
        if not isinstance(self.description, str):
            raise ConfigError(f"ToolSpec {self.name!r}: description must be a string")
        if not isinstance(self.parameters, dict):
            raise ConfigError(
                f"ToolSpec {self.name!r}: parameters must be a JSON schema dict "
                '({"type": "object", "properties": {...}})'
            )


@runtime_checkable
class ChatModel(Protocol):
    """What memdir needs from a language model.

    Attributes:
        name: a display name such as ``"openai:gpt-4o-mini"`` or ``"extractive"``.
        context_window: the model's context size in tokens, or ``None`` when unknown.
    """

    name: str
    context_window: int | None

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        """Answer the conversation ``messages``.

        Args:
            messages: the conversation; system messages in it are sent as system prompts.
            tools: tools the model may call.
            system: an extra system prompt placed before the conversation.
            max_output_tokens: a cap on the answer's length.

        Raises:
            ContextOverflowError: the request does not fit in the context window.
            ModelError: any other provider failure.
        """
        ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A :class:`ChatModel` that can also stream its answer as it is written.

    :meth:`stream` takes the arguments of :meth:`ChatModel.generate` and yields
    :class:`~memdir.models.ModelDelta` pieces, then, last, the whole :class:`ModelResponse`.
    ``HarnessAgent.stream`` passes the pieces on as they come; memdir's own model calls
    (summaries, flush, consolidation) use them as signs of progress, so a slow model that keeps
    writing is never timed out.
    """

    def stream(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[Any]:
        """Yield :class:`~memdir.models.ModelDelta` pieces, then the :class:`ModelResponse`."""
        ...


def request_task(messages: Sequence[Msg]) -> str | None:
    """The task marker (:data:`TASK_KEY`) of the last user message, if any."""
    for msg in reversed(as_list(messages, "request_task", of_msgs=True)):
        if msg.role == "user":
            task = msg.metadata.get(TASK_KEY)
            return task if isinstance(task, str) else None
    return None
