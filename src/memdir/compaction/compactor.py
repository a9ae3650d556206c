"""The conversation compactor: cheap passes, then flush, offload, summary.

:meth:`ConversationCompactor.compact_if_needed` runs a ladder of stages, re-measuring the whole
request after each and stopping as soon as it is under the triggers:

1. **truncate_args** (when configured and its own trigger fires): long arguments of old tool
   calls are shortened;
2. **clear_tool_results**: old, large tool results become a head-and-tail preview;
3. **summary**: the messages before a pair-safe cut are handed to the ``on_flush`` hook, appended
   to the session log, and replaced by one summary message.

Every stage writes the originals of what it changes to ``sessions/<session_id>.log.jsonl``
(secrets masked by ``config.redactor``) *before* the context changes; if that write fails the
stage is not applied. If the summary call
fails, the context is left as the cheap passes made it, unless the request is over the model's
hard limit or compaction was forced, in which case an extractive summary (no model call) is
used. Nothing is ever
replaced by an error message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from memdir.compaction._plan import plan_summary
from memdir.compaction._run import Run
from memdir.compaction.config import CompactionConfig
from memdir.compaction.events import CompactionListener
from memdir.compaction.summary import summary_text
from memdir.errors import ConfigError
from memdir.messages import Msg
from memdir.messages._msg import as_list
from memdir.models import ChatModel, ToolSpec
from memdir.sessions import LogSpan, SessionLog, validate_session_id
from memdir.store.workspace import Workspace
from memdir.tokens import TokenCounter, default_counter

__all__ = ["CompactionPlan", "CompactionResult", "ConversationCompactor", "FlushHook"]

log = logging.getLogger("memdir.compaction")

FlushHook = Callable[..., Awaitable[object] | object]
"""``on_flush(prefix_msgs, session_id=...)``; may be sync or async; its result is ignored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """A compacted conversation.

    Attributes:
        messages: the new conversation: pinned system messages, the summary message, the latest
            user message when it was older than the cut, then the kept tail. Without a summary
            (only cheap passes ran) it has the input's length and order.
        summary: the summary text (``""`` when no summary was made).
        summary_message: the summary message, or ``None``.
        log_path: the session log holding the removed or shortened originals
            (workspace-relative), or ``None`` when nothing was offloaded.
        log_span: the line range of the session log holding the messages this compaction
            summarised (for cheap passes alone: the lines they wrote).
        messages_before: number of input messages.
        messages_after: number of output messages.
        tokens_before: estimated tokens of the whole request before.
        tokens_after: estimated tokens of the whole request after.
        cut_index: index (in the input) of the first message kept after the summary, or
            ``None`` without a summary.
        stages: the stages applied, in order (``"truncate_args"``, ``"clear_tool_results"``,
            ``"summary"``, ``"extractive_summary"`` or ``"log_pointer"``).
        reason: what triggered compaction (``"messages"``, ``"tokens"``, ``"hard_limit"``,
            ``"forced"``, ``"truncate_args"``).
    """

    messages: list[Msg]
    summary: str
    summary_message: Msg | None
    log_path: str | None
    log_span: LogSpan | None
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    cut_index: int | None
    stages: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """What :meth:`ConversationCompactor.compact_if_needed` would do, computed without side
    effects (no model call, nothing written).

    Attributes:
        reason: the trigger that fires, or ``None`` when nothing would run.
        messages: messages in the conversation.
        tokens: estimated tokens of the whole request.
        cut_index: where a summary would cut, or ``None`` when nothing can be summarised.
        summarized: how many messages a summary would replace.
        kept: messages left after a summary (the summary message included).
    """

    reason: str | None
    messages: int
    tokens: int
    cut_index: int | None
    summarized: int
    kept: int


class ConversationCompactor:
    """Keeps a conversation under its triggers without losing what was said.

    Args:
        model: the agent's model; its ``context_window`` sets the hard limit (see
            :attr:`context_window`), and it writes the
            summary unless ``config.model`` names another.
        workspace: the workspace whose ``sessions/`` receives the offloaded messages.
        config: triggers, tail size and passes.
        on_flush: called with the messages before the cut (earlier summaries and system
            messages left out; the latest user message included even when it is kept) and
            ``session_id=``, before they leave the context; a failure is logged and compaction
            goes on.
        token_counter: counts requests; default :func:`memdir.tokens.default_counter`.
    """

    def __init__(
        self,
        model: ChatModel,
        workspace: Workspace | str,
        config: CompactionConfig | None = None,
        *,
        on_flush: FlushHook | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        if not callable(getattr(model, "generate", None)):
            raise ConfigError("ConversationCompactor needs a ChatModel (an object with generate())")
        if config is not None and not isinstance(config, CompactionConfig):
            raise ConfigError("config must be a CompactionConfig")
        if on_flush is not None and not callable(on_flush):
            raise ConfigError("on_flush must be a function taking (messages, session_id=...)")
        if token_counter is not None and not all(
            callable(getattr(token_counter, name, None))
            for name in ("count_text", "count_message", "count_request")
        ):
            raise ConfigError("token_counter must be a memdir.tokens.TokenCounter")
        self.model = model
        self.workspace = Workspace.coerce(workspace)
        self.config = config or CompactionConfig()
        self.on_flush = on_flush
        self.counter: TokenCounter = token_counter or default_counter()
        self.listeners: list[CompactionListener] = []
        self._learned_window: int | None = None

    # -- the context window --------------------------------------------------------------------

    @property
    def context_window(self) -> int | None:
        """The context window compaction plans for: the model's, or less if one was learned.

        :meth:`learn_context_window` lowers it when a provider refused a request as too long
        (a local server started with a small context, a model missing from the table).
        """
        window = getattr(self.model, "context_window", None)
        if self._learned_window is None:
            return window
        return self._learned_window if not window else min(window, self._learned_window)

    def learn_context_window(self, tokens: int) -> bool:
        """Plan for a context window of at most ``tokens`` from now on; whether it shrank.

        Raises:
            ConfigError: ``tokens`` is not a positive integer.
        """
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ConfigError(f"a context window must be a positive integer, not {tokens!r}")
        current = self.context_window
        if current is not None and tokens >= current:
            return False
        self._learned_window = tokens
        log.info("planning for a context window of at most %d tokens from now on", tokens)
        return True

    # -- listeners -----------------------------------------------------------------------------

    def add_listener(self, listener: CompactionListener) -> None:
        """Call ``listener(event)`` for every :class:`CompactionEvent` (sync or async)."""
        if not callable(listener):
            raise ConfigError("a compaction listener must be callable")
        self.listeners.append(listener)

    def remove_listener(self, listener: CompactionListener) -> None:
        """Stop calling ``listener`` (no error if it was not registered)."""
        if listener in self.listeners:
            self.listeners.remove(listener)

    def session_log(self, session_id: str) -> SessionLog:
        """The session log this compactor offloads to, masking secrets as configured.

        Raises:
            SessionLogError: the session id is invalid.
        """
        return SessionLog(self.workspace, session_id, redact=self.config.redactor)

    # -- trigger -------------------------------------------------------------------------------

    def measure(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> tuple[int, int]:
        """``(non-system message count, estimated tokens of the whole request)``.

        Raises:
            MessageFormatError: ``messages`` is not a list of :class:`~memdir.messages.Msg`.
        """
        return self._measure(as_list(messages, "measure", of_msgs=True), system, tools)

    def _measure(
        self, messages: list[Msg], system: str | None, tools: Sequence[ToolSpec] | None
    ) -> tuple[int, int]:
        count = sum(1 for m in messages if m.role != "system")
        return count, self.counter.count_request(messages, system=system, tools=tools)

    def trigger_reason(self, count: int, tokens: int, *, force: bool = False) -> str | None:
        """Why a conversation of this size must be compacted, or ``None`` if it need not."""
        cfg = self.config
        if force:
            return "forced"
        if cfg.trigger_messages and count >= cfg.trigger_messages:
            return "messages"
        hard = cfg.hard_limit(self.context_window)
        if hard is not None and tokens >= hard:
            return "hard_limit"
        if cfg.trigger_tokens and tokens >= cfg.trigger_tokens:
            return "tokens"
        return None

    def over_token_limit(self, tokens: int) -> bool:
        """Whether a request of ``tokens`` is at or over the token trigger or the hard limit."""
        hard = self.config.hard_limit(self.context_window)
        trigger = self.config.trigger_tokens
        return bool((hard is not None and tokens >= hard) or (trigger and tokens >= trigger))

    def tail_cap(
        self,
        reason: str | None,
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> int:
        """The token cap on the kept tail for a compaction started by ``reason`` (0: none).

        Under token pressure a tail of ``keep_messages`` may itself be over the limit, and every
        later call would compact again; in message mode the tail is then also capped at half of
        the token limit left after the system prompt and tools.
        """
        hard = self.config.hard_limit(self.context_window)
        limits = [x for x in (self.config.trigger_tokens, hard) if x]
        if reason not in ("tokens", "hard_limit", "forced") or not limits:
            return 0
        overhead = self.counter.count_request([], system=system, tools=tools)
        return max(1, (min(limits) - overhead) // 2)

    def _truncate_due(self, count: int, tokens: int) -> bool:
        ta = self.config.truncate_args
        if ta is None:
            return False
        return bool(
            (ta.trigger_messages and count >= ta.trigger_messages)
            or (ta.trigger_tokens and tokens >= ta.trigger_tokens)
        )

    def plan(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        force: bool = False,
        keep_messages: int | None = None,
        keep_tokens: int | None = None,
    ) -> CompactionPlan:
        """Where a summary would cut, without calling a model or writing anything.

        The cheap passes are not simulated: they may make the summary unnecessary.

        Raises:
            MemdirError: ``messages`` is not a list of messages, or a keep override is bad.
        """
        _check_keep(keep_messages, keep_tokens)
        msgs = as_list(messages, "plan", of_msgs=True)
        count, tokens = self._measure(msgs, system, tools)
        reason = self.trigger_reason(count, tokens, force=force)
        if reason is None and self._truncate_due(count, tokens):
            reason = "truncate_args"
        split = plan_summary(
            msgs,
            keep_messages=self.config.keep_messages if keep_messages is None else keep_messages,
            keep_tokens=self.config.keep_tokens if keep_tokens is None else keep_tokens,
            count_message=self.counter.count_message,
            max_tail_tokens=self.tail_cap(reason, system=system, tools=tools),
        )
        if split is None:
            return CompactionPlan(
                reason=reason,
                messages=len(msgs),
                tokens=tokens,
                cut_index=None,
                summarized=0,
                kept=len(msgs),
            )
        kept = len(split.pinned_system) + 1 + len(split.body)
        return CompactionPlan(
            reason=reason,
            messages=len(msgs),
            tokens=tokens,
            cut_index=split.cut,
            summarized=len(split.summarize),
            kept=kept,
        )

    # -- the ladder ----------------------------------------------------------------------------

    async def compact_if_needed(
        self,
        messages: Sequence[Msg],
        *,
        session_id: str,
        system: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        force: bool = False,
        keep_messages: int | None = None,
        keep_tokens: int | None = None,
        last_resort: bool = False,
    ) -> CompactionResult | None:
        """Compact ``messages`` if a trigger fires (or ``force``); ``None`` if nothing changed.

        Args:
            messages: the conversation (not modified).
            session_id: names the session log (``[A-Za-z0-9._-]{1,128}``).
            system: the system prompt sent with the request (counted, never compacted).
            tools: the tool schemas sent with the request (counted).
            force: compact regardless of the triggers (context-overflow recovery).
            keep_messages: override ``config.keep_messages`` for this call.
            keep_tokens: override ``config.keep_tokens`` for this call.
            last_resort: when no summary (not even an extractive one) makes the request
                smaller, replace the logged prefix by a note that only points to its log
                lines (stage ``"log_pointer"``); for overflow recovery, after every other way
                to shrink the request has failed.

        Returns:
            The compacted conversation, or ``None`` when no stage was needed or none could be
            applied (a ``compaction.failed`` event then says why).

        Raises:
            MemdirError: for a bad ``session_id``, bad keep overrides, or ``messages`` that is
                not a list of :class:`~memdir.messages.Msg`.
        """
        _check_keep(keep_messages, keep_tokens)
        validate_session_id(session_id)
        original = as_list(messages, "compact_if_needed", of_msgs=True)
        if not original:
            return None
        count, tokens = self._measure(original, system, tools)
        reason = self.trigger_reason(count, tokens, force=force)
        truncate_due = self._truncate_due(count, tokens)
        if reason is None and not truncate_due:
            return None
        run = Run(
            self,
            original,
            session_id=session_id,
            system=system,
            tools=tools,
            count=count,
            tokens=tokens,
            force=force,
            last_resort=last_resort,
        )
        truncate_at = run.truncate_candidates() if truncate_due else []
        if reason is None and not truncate_at:
            return None
        outcome = await run.go(
            reason,
            truncate_at,
            self.config.keep_messages if keep_messages is None else keep_messages,
            self.config.keep_tokens if keep_tokens is None else keep_tokens,
        )
        if outcome is None:
            return None
        return CompactionResult(
            messages=outcome.messages,
            summary=summary_text(outcome.summary) if outcome.summary is not None else "",
            summary_message=outcome.summary,
            log_path=outcome.log_path,
            log_span=outcome.log_span,
            messages_before=len(original),
            messages_after=len(outcome.messages),
            tokens_before=tokens,
            tokens_after=outcome.tokens_after,
            cut_index=outcome.cut_index,
            stages=outcome.stages,
            reason=outcome.reason,
        )


def _check_keep(keep_messages: object, keep_tokens: object) -> None:
    for name, value in (("keep_messages", keep_messages), ("keep_tokens", keep_tokens)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ConfigError(f"{name} must be a non-negative integer, not {value!r}")
