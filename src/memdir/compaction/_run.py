"""One compaction run: the stages of the ladder and the state they share."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir.compaction._offload import Offloaded, OffloadError, offload
from memdir.compaction._pairing import find_orphans, latest_user_index, tail_start
from memdir.compaction._passes import (
    clear_candidates,
    clear_tool_results,
    truncate_args,
    truncate_candidates,
)
from memdir.compaction._plan import SummaryPlan, plan_summary, repair
from memdir.compaction._summarize import SummaryOutcome, input_budget, summarize
from memdir.compaction.events import CompactionEvent, EventKind, emit
from memdir.compaction.summary import (
    DEFAULT_SUMMARY_PROMPT,
    LOG_POINTER_SUMMARY,
    SummaryLog,
    build_summary_message,
    summarized_count,
    summary_log,
    summary_text,
)
from memdir.forget._guard import guard_messages
from memdir.messages import SUMMARY_NAME, Msg
from memdir.models import ChatModel, ToolSpec, resolve_patience
from memdir.sessions import LogSpan

if TYPE_CHECKING:
    from memdir.compaction.compactor import ConversationCompactor

__all__ = ["Outcome", "Run"]

log = logging.getLogger("memdir.compaction")


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a run produced; the compactor turns it into a ``CompactionResult``."""

    messages: list[Msg]
    summary: Msg | None
    log_path: str | None
    log_span: LogSpan | None
    tokens_after: int
    cut_index: int | None
    stages: tuple[str, ...]
    reason: str


class _Failed(Exception):
    """Compaction stopped; ``fault`` is false when nothing was wrong (nothing worth doing)."""

    def __init__(self, reason: str, *, fault: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fault = fault


class Run:
    """One call of ``compact_if_needed`` past its trigger check."""

    def __init__(
        self,
        owner: ConversationCompactor,
        original: list[Msg],
        *,
        session_id: str,
        system: str | None,
        tools: Sequence[ToolSpec] | None,
        count: int,
        tokens: int,
        force: bool,
        last_resort: bool = False,
    ) -> None:
        self.c = owner
        self.cfg = owner.config
        self.original = original
        self.current = list(original)
        self.session_id = session_id
        self.system = system
        self.tools = tools
        self.count = count
        self.tokens_before = tokens
        self.tokens = tokens
        self.force = force
        self.last_resort = last_resort
        self.stages: list[str] = []
        self.spans: list[LogSpan] = []
        self.log_path: str | None = None
        self.lines: dict[str, int] = {}  # session log line of every message offloaded so far
        self.t0 = time.perf_counter()
        self.log = owner.session_log(session_id)

    # -- plumbing ------------------------------------------------------------------------------

    def _span(self) -> LogSpan | None:
        if not self.spans:
            return None
        return LogSpan(
            path=self.spans[-1].path,
            start_line=min(s.start_line for s in self.spans),
            end_line=max(s.end_line for s in self.spans),
        )

    async def _emit(self, kind: EventKind, reason: str, **extra: Any) -> None:
        span = self._span()
        after = kind != "compaction.started"
        event = CompactionEvent(
            kind=kind,
            session_id=self.session_id,
            reason=reason,
            messages_before=len(self.original),
            tokens_before=self.tokens_before,
            messages_after=len(self.current) if after else None,
            tokens_after=self.tokens if after else None,
            stages=tuple(self.stages),
            log_path=self.log_path,
            log_start_line=span.start_line if span else None,
            log_end_line=span.end_line if span else None,
            latency_s=time.perf_counter() - self.t0,
            **extra,
        )
        await emit(self.c.listeners, event)

    def _remeasure(self) -> str | None:
        self.tokens = self.c.counter.count_request(
            self.current, system=self.system, tools=self.tools
        )
        return self.c.trigger_reason(self.count, self.tokens, force=self.force)

    def _offload(self, msgs: Sequence[Msg]) -> Offloaded:
        done = offload(self.log, msgs, self.lines)
        self.lines.update(done.lines)
        self.log_path = done.path
        span = done.span([m.id for m in msgs])
        if span is not None:
            self.spans.append(span)
        return done

    def _outcome(self, started: str, cut: int | None, summary: Msg | None) -> Outcome | None:
        if not self.stages:
            return None
        return Outcome(
            messages=self.current,
            summary=summary,
            log_path=self.log_path,
            log_span=self._span(),
            tokens_after=self.tokens,
            cut_index=cut,
            stages=tuple(self.stages),
            reason=started,
        )

    # -- the ladder ----------------------------------------------------------------------------

    async def go(
        self,
        reason: str | None,
        truncate_at: list[int],
        keep_messages: int,
        keep_tokens: int,
    ) -> Outcome | None:
        """Run the stages; never raises for a model or log failure (events say why)."""
        started = reason or "truncate_args"
        await self._emit("compaction.started", started)
        try:
            if truncate_at:
                self._truncate(truncate_at)
                reason = self._remeasure()
            if reason is not None and self.cfg.clear_tool_results is not None:
                self._clear()
                reason = self._remeasure()
            if reason is None:
                self._repair_passes()
                return await self._done(started, None, None, None)
            plan = plan_summary(
                self.current,
                keep_messages=keep_messages,
                keep_tokens=keep_tokens,
                count_message=self.c.counter.count_message,
                max_tail_tokens=self.c.tail_cap(reason, system=self.system, tools=self.tools),
            )
            if plan is None:
                raise _Failed("nothing before the kept tail can be summarised", fault=False)
            return await self._summary(started, plan)
        except (_Failed, OffloadError) as exc:
            why = exc.reason
            level = logging.WARNING if getattr(exc, "fault", True) else logging.INFO
            log.log(level, "compaction of session %s did not complete: %s", self.session_id, why)
            # Cheap passes that ran have committed (originals logged): keep their result.
            if self.stages:
                try:
                    self._repair_passes()
                except (_Failed, OffloadError):
                    self.stages.clear()  # cannot return a list a provider would reject
            await self._emit("compaction.failed", why)
            return self._outcome(started, None, None)

    def _repair_passes(self) -> None:
        """Make a pass-only result acceptable to providers (logging what the repair changes)."""
        repaired, altered = repair(self.current)
        if altered:
            self._offload([m for m in self.original if m.id in altered])
            self.current = repaired
            self._remeasure()
        self._check(self.current)

    def truncate_candidates(self) -> list[int]:
        """Messages the argument-truncation pass would change (empty when it is off)."""
        ta = self.cfg.truncate_args
        if ta is None:
            return []
        end = tail_start(
            self.current,
            keep_messages=ta.keep_messages,
            keep_tokens=ta.keep_tokens,
            count_message=self.c.counter.count_message,
        )
        return truncate_candidates(self.current, end, ta)

    def _truncate(self, found: list[int]) -> None:
        ta = self.cfg.truncate_args
        assert ta is not None
        done = self._offload(self.original[: found[-1] + 1])
        self.current = truncate_args(self.current, found, ta, done.locate)
        self.stages.append("truncate_args")

    def _clear(self) -> None:
        cfg = self.cfg.clear_tool_results
        assert cfg is not None
        found = clear_candidates(self.current, cfg)
        if not found:
            return
        done = self._offload(self.original[: found[-1][0] + 1])
        self.current = clear_tool_results(self.current, found, cfg, done.locate)
        self.stages.append("clear_tool_results")

    async def _summary(self, started: str, plan: SummaryPlan) -> Outcome | None:
        cfg = self.cfg
        cut = plan.cut
        # The summariser and the flush see the messages as they came in, before any pass.
        to_summarize = [self.original[i] for i in plan.summarize]
        if cfg.flush_before_compact and self.c.on_flush is not None:
            # The pinned user message too: it stays in the context, but after the cut the
            # flush cursor can no longer place it, so it is flushed now or never.
            await self._flush(
                [m for m in self.original[:cut] if m.role != "system" and m.name != SUMMARY_NAME]
            )
        done = None
        if cfg.offload_before_compact:
            # The prefix, and the originals of tail messages the pairing repair changes.
            done = self._offload(
                [
                    m
                    for i, m in enumerate(self.original)
                    if i < cut or self.current[i].id in plan.altered
                ]
            )
        prefix = self.original[:cut]
        span = done.span([m.id for m in prefix]) if done is not None else None
        summarized = sum(summarized_count(m) if m.name == SUMMARY_NAME else 1 for m in to_summarize)
        model = cfg.model or self.c.model
        outcome = await self._summarize(model, to_summarize, fallback=False)
        if (guarded := guard_messages(self.c.workspace, to_summarize)) is not to_summarize:
            # A message was erased while the model summarised it: the summary may restate
            # it in other words, so it is written again from the messages as the forget left.
            log.warning("compaction: a message was erased during the summary; summarising again")
            to_summarize = guarded
            outcome = await self._summarize(model, to_summarize, fallback=False)
        stage = "summary"
        kept, why = self._replace_prefix(outcome, plan, span, summarized)
        fault = outcome.text is None  # the model failed, rather than wrote too much
        hard = cfg.hard_limit(self.c.context_window)
        # Past the hard limit, or forced (the provider already refused the request), leaving
        # the context as it is would only fail again: an extractive summary is better.
        if kept is None and (self.force or (hard is not None and self.tokens >= hard)):
            from memdir.models import ExtractiveModel

            log.log(
                logging.WARNING if fault else logging.INFO,
                "%s; using an extractive summary instead",
                why,
            )
            model = ExtractiveModel()
            outcome = await self._summarize(model, to_summarize, fallback=True)
            stage = "extractive_summary"
            kept, why = self._replace_prefix(outcome, plan, span, summarized)
        if kept is None and self.last_resort and span is not None:
            # Not even a summary fits: the prefix is in the log and a note points to it,
            # carrying the latest earlier summary when that still fits.
            log.info("%s; keeping only a pointer to the session log", why)
            stage = "log_pointer"
            earlier = [summary_text(m) for m in to_summarize if m.name == SUMMARY_NAME]
            for text in [*earlier[-1:], LOG_POINTER_SUMMARY]:
                outcome = SummaryOutcome(text=text, calls=0)
                kept, why = self._replace_prefix(outcome, plan, span, summarized)
                if kept is not None:
                    break
        if kept is None:  # a fault when the last summariser failed, not when it wrote too much
            raise _Failed(why, fault=outcome.text is None)
        self.current = kept
        self.stages.append(stage)
        self._remeasure()
        if span is not None:
            self.spans = [span]
        return await self._done(
            started, cut, kept[len(plan.pinned_system)], getattr(model, "name", None)
        )

    def _replace_prefix(
        self, outcome: SummaryOutcome, plan: SummaryPlan, span: LogSpan | None, summarized: int
    ) -> tuple[list[Msg] | None, str]:
        """The conversation with the summary in place of the prefix, or ``None`` and why not.

        A summary that does not make the conversation smaller is refused: applying it would
        only lose the verbatim messages (and, on an overflow, make the retry larger). This
        holds when compaction was forced or the request is over a token limit; when only the
        message trigger fired, fewer messages is what was asked for.
        """
        if outcome.text is None:
            return None, outcome.reason or "the summary could not be made"
        msg = build_summary_message(
            outcome.text,
            log=_named_log(span, self.original[: plan.cut]),
            summarized=summarized,
            created_at=self.c.workspace.utc_now(),
        )
        kept = [*plan.pinned_system, msg, *plan.body]
        self._check(kept)
        if self.force or self.c.over_token_limit(self.tokens):
            after = self.c.counter.count_request(kept, system=self.system, tools=self.tools)
            if after >= self.tokens:
                return None, (
                    f"the summary would not make the request smaller "
                    f"(~{self.tokens:,} -> ~{after:,} tokens)"
                )
        return kept, ""

    async def _summarize(
        self, model: ChatModel, msgs: list[Msg], *, fallback: bool
    ) -> SummaryOutcome:
        cfg = self.cfg
        return await summarize(
            model,
            msgs,
            template=cfg.summary_prompt or DEFAULT_SUMMARY_PROMPT,
            max_output_tokens=cfg.summary_max_tokens,
            budget=None
            if fallback
            else input_budget(
                cfg.summary_input_tokens,
                # A window learned from the compactor's model's errors holds for its summaries.
                self.c.context_window
                if model is self.c.model
                else getattr(model, "context_window", None),
                cfg.summary_max_tokens,
            ),
            timeout=None if fallback else resolve_patience(cfg.summary_timeout, model),
            retries=0 if fallback else cfg.summary_retries,
            count_text=self.c.counter.count_text,
        )

    async def _flush(self, msgs: list[Msg]) -> None:
        hook = self.c.on_flush
        assert hook is not None
        try:
            result = hook(msgs, session_id=self.session_id)
            if inspect.isawaitable(result):
                await result
        except Exception:
            # Memory extraction is best effort; the conversation itself is offloaded next.
            log.warning("memory flush before compaction failed", exc_info=True)

    def _check(self, kept: list[Msg]) -> None:
        """Refuse to return a list a provider would reject or that lost the user's request."""
        misplaced, unanswered = find_orphans(kept)
        if misplaced or unanswered:
            raise _Failed(
                f"internal check failed: {len(misplaced)} misplaced result(s) and "
                f"{len(unanswered)} unanswered call(s) in the kept messages"
            )
        user = latest_user_index(self.original)
        if user is not None and self.original[user] not in kept:
            raise _Failed("internal check failed: the latest user message would be dropped")

    async def _done(
        self, started: str, cut: int | None, summary: Msg | None, model: str | None
    ) -> Outcome | None:
        outcome = self._outcome(started, cut, summary)
        if outcome is None:
            await self._emit("compaction.failed", "no stage could shorten the conversation")
            return None
        await self._emit(
            "compaction.completed",
            started,
            cut_index=cut,
            summary_chars=len(summary_text(summary)) if summary is not None else None,
            model=model,
        )
        log.info(
            "compacted session %s: %d -> %d messages, %d -> %d tokens (%s)",
            self.session_id,
            len(self.original),
            len(self.current),
            self.tokens_before,
            self.tokens,
            "+".join(self.stages),
        )
        return outcome


def _named_log(span: LogSpan | None, prefix: Sequence[Msg]) -> SummaryLog | None:
    """The lines the new summary stands for: its prefix, and what folded summaries stood for."""
    if span is None:
        return None
    start = span.start_line
    for msg in prefix:
        if msg.name == SUMMARY_NAME:
            earlier = summary_log(msg)
            if earlier is not None and earlier.path == span.path:
                start = min(start, earlier.start_line)
    return SummaryLog(path=span.path, start_line=start, end_line=span.end_line)
