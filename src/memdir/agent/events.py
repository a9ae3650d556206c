"""Events of the agent loop, passed to hooks and yielded by :meth:`HarnessAgent.stream`.

One ``call()`` produces, in order::

    PreCallEvent
    ┌ PreReasoningEvent      before every model call (also inside tool loops)
    │ [ContextOverflowEvent] the model refused the request as too long; compacted and retried
    │ [ModelDeltaEvent ×n]   pieces of the answer as they are written (stream() only)
    │ PostReasoningEvent     the model's answer
    │ PreActingEvent ×n      before each tool call (parallel calls run concurrently)
    └ PostActingEvent ×n     after each tool call
    PostCallEvent            the final reply

and :class:`HookErrorEvent` whenever a hook raised. Hooks may change the fields that feed their
stage (marked *replaceable*): what a hook writes there is what the loop uses next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdir.messages import Msg, ToolResultBlock, ToolUseBlock
from memdir.models import ModelDelta, ModelResponse, ToolSpec

if TYPE_CHECKING:
    from memdir.agent._agent import HarnessAgent

__all__ = [
    "AgentEvent",
    "ContextOverflowEvent",
    "HookErrorEvent",
    "ModelDeltaEvent",
    "PostActingEvent",
    "PostCallEvent",
    "PostReasoningEvent",
    "PreActingEvent",
    "PreCallEvent",
    "PreReasoningEvent",
]


@dataclass(kw_only=True, eq=False)
class AgentEvent:
    """Base of every event.

    Attributes:
        agent: the agent that emitted it.
        session_id: the session the call runs in.
    """

    agent: HarnessAgent = field(repr=False)
    session_id: str


@dataclass(kw_only=True, eq=False)
class PreCallEvent(AgentEvent):
    """A call starts.

    Attributes:
        inputs: the new messages of this call (*replaceable* before they enter the history).
    """

    inputs: list[Msg]


@dataclass(kw_only=True, eq=False)
class PreReasoningEvent(AgentEvent):
    """The model is about to be called.

    Attributes:
        messages: the conversation sent to the model (*replaceable*; a copy of the history).
        system: the system prompt (*replaceable*; context hooks append to it).
        tools: the tools offered (*replaceable*).
        iteration: 0 for the first model call of the call, then 1, 2, ...
        forced_compaction: set when the agent is recovering from a context overflow.
    """

    messages: list[Msg]
    system: str | None
    tools: list[ToolSpec]
    iteration: int
    forced_compaction: int = 0
    _commit: Callable[[list[Msg]], None] | None = field(default=None, repr=False)

    @property
    def history(self) -> list[Msg]:
        """The session's stored conversation (read-only copy)."""
        return list(self.agent.history(self.session_id))

    def replace_history(self, messages: Sequence[Msg]) -> None:
        """Replace the session's stored conversation (and :attr:`messages`) with ``messages``.

        Used by hooks that shrink the context for good (compaction, eviction). The new
        history is persisted before the model is called.
        """
        new = list(messages)
        if self._commit is not None:
            self._commit(new)
        self.messages = list(new)


@dataclass(kw_only=True, eq=False)
class ModelDeltaEvent(AgentEvent):
    """A piece of the model's answer, as the model writes it.

    Emitted by :meth:`HarnessAgent.stream` when the model can stream
    (:class:`~memdir.models.StreamingChatModel`); :class:`PostReasoningEvent` still carries the
    whole answer. Pieces of an answer that is then refused or retried (an empty answer) are
    not taken back.

    Attributes:
        delta: the piece (``delta.kind`` is ``"text"``, ``"thinking"`` or ``"tool_call"``).
        iteration: as in :class:`PreReasoningEvent`.
    """

    delta: ModelDelta
    iteration: int


@dataclass(kw_only=True, eq=False)
class PostReasoningEvent(AgentEvent):
    """The model answered.

    Attributes:
        response: the answer (*replaceable*: its message is what enters the history).
        iteration: as in :class:`PreReasoningEvent`.
    """

    response: ModelResponse
    iteration: int


@dataclass(kw_only=True, eq=False)
class PreActingEvent(AgentEvent):
    """A tool is about to run.

    Attributes:
        tool_call: the call (*replaceable*, e.g. to fix its arguments).
    """

    tool_call: ToolUseBlock


@dataclass(kw_only=True, eq=False)
class PostActingEvent(AgentEvent):
    """A tool finished.

    Attributes:
        tool_call: the call that ran.
        result: its result (*replaceable*; eviction swaps in a placeholder here).
        metadata: merged into the metadata of the tool message that carries the result.
    """

    tool_call: ToolUseBlock
    result: ToolResultBlock
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, eq=False)
class PostCallEvent(AgentEvent):
    """The call produced its reply.

    Attributes:
        reply: the final assistant message.
        new_messages: every message this call added to the history, inputs included.
    """

    reply: Msg
    new_messages: list[Msg]


@dataclass(kw_only=True, eq=False)
class ContextOverflowEvent(AgentEvent):
    """The model rejected the request as larger than its context window.

    Attributes:
        error: the provider's error.
        attempt: 1 for the first recovery attempt, 2 for the second.
        recovered: whether the context was compacted and the call will be retried.
    """

    error: BaseException
    attempt: int
    recovered: bool


@dataclass(kw_only=True, eq=False)
class HookErrorEvent(AgentEvent):
    """A hook raised; the loop went on without its change.

    Attributes:
        hook: the hook's name.
        event: the name of the event it was handling.
        error: the exception.
    """

    hook: str
    event: str
    error: BaseException
