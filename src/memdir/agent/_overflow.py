"""Recovery from "the request is larger than the context window" errors.

Each refused request is made smaller before it is retried, down a ladder of rungs, the least
destructive first, until its estimated size is below a target:

1. forced compaction with the configured tail, then with a quarter of it, then with only the
   latest request (and what tool pairing needs) kept verbatim;
2. oversized messages shrunk: a tool result is evicted to a file, any other message is cut to
   its head and tail with a pointer to its full copy in the session log, written first; then
   the same with a lower bar;
3. the injected memory context (``MEMORY.md``) halved, down to nothing;
4. the last resort: only the latest request kept, with the memory context and a summary of
   the rest, or, when not even a summary is smaller, a note pointing to the session log lines
   that hold it (a history too short to be worth a summary on rung 1 gets one here).

A rung is applied only when it makes the request smaller. The target comes from the error
when the provider states its limit (and the refused size), else from the refused size itself;
either way the limit is remembered (:meth:`ConversationCompactor.learn_context_window`), so
later calls compact before they are refused. Nothing is lost; the same user input is never
appended twice (the history is replaced, not extended). When no rung can make the request
smaller, the error goes to the caller with a note saying why.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Final, Protocol

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.compaction.overflow import overflow_limit
from memdir.eviction import ToolResultEvictor
from memdir.messages import SUMMARY_NAME, Msg, TextBlock
from memdir.models import ToolSpec
from memdir.sessions import SessionLog
from memdir.tokens import TokenCounter

__all__ = [
    "MAX_RECOVERY_ATTEMPTS",
    "MemoryContext",
    "OverflowRecovery",
    "shrink_oversized",
]

logger = logging.getLogger("memdir.agent")

MAX_RECOVERY_ATTEMPTS: Final = 6
"""Retries of one model call after overflow errors (each one smaller than the last)."""
TRUNCATED_KEY: Final = "memdir.truncated"
"""``Msg.metadata`` key of a message cut to fit: ``{"chars", "log_path", "log_line"}``."""
_KEEP_CHARS: Final = 2_000
_MIN_OVERSIZED_TOKENS: Final = 2_000
# The target of a retry, as a share of the limit the provider stated (estimates are not
# exact), or of the refused size when it stated none.
_STATED_MARGIN: Final = 0.85
# A prefix this small is not worth a summary call: four sections and a log pointer are as big.
_MIN_SUMMARY_GAIN: Final = 300
_UNSTATED_SHRINK: Final = 0.7


class MemoryContext(Protocol):
    """The part of the system prompt that recovery may shrink (the workspace context hook)."""

    def render(self, session_id: str | None = None) -> str:
        """The injected text for ``session_id``."""
        ...

    def shrink_memory(self, session_id: str) -> bool:
        """Halve the memory budget of ``session_id``; whether the injected text can shrink."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class _Rung:
    kind: str  # "compact", "shrink" or "context"
    keep_messages: int = 0
    keep_tokens: int = 0
    bar: int = 0  # "shrink": 1 = the usual bar for "oversized", 2 = a lower one
    last_resort: bool = False  # "compact": however small the prefix, down to a log pointer


def _ladder(config: CompactionConfig) -> list[_Rung]:
    keep, tokens = config.keep_messages, config.keep_tokens
    rungs = [_Rung("compact", keep, tokens)]
    quarter = _Rung("compact", max(1, keep // 4), tokens // 4)
    if quarter != rungs[-1]:
        rungs.append(quarter)
    if rungs[-1] != _Rung("compact", 1, 0):
        rungs.append(_Rung("compact", 1, 0))
    last = _Rung("compact", 1, 0, last_resort=True)
    return [*rungs, _Rung("shrink", bar=1), _Rung("shrink", bar=2), _Rung("context"), last]


class OverflowRecovery:
    """The recovery of one model call from context-overflow errors.

    Args:
        compactor: the agent's compactor, or ``None`` when compaction is off (then only
            oversized messages and the memory context can shrink).
        evictor: evicts oversized tool results of the session.
        log: the session log that receives a message before it is cut.
        counter: estimates request sizes.
        context: the workspace context hook, when memory is injected.
        session_id: the session.
    """

    def __init__(
        self,
        *,
        compactor: ConversationCompactor | None,
        evictor: ToolResultEvictor,
        log: SessionLog,
        counter: TokenCounter,
        context: MemoryContext | None,
        session_id: str,
    ) -> None:
        self.compactor = compactor
        self.evictor = evictor
        self.log = log
        self.counter = counter
        self.context = context
        self.session_id = session_id
        self.attempts = 0
        rungs = _ladder(compactor.config) if compactor is not None else _ladder(_NO_COMPACTION)
        self._rungs = [r for r in rungs if compactor is not None or r.kind != "compact"]
        self._next = 0
        self._last_cut: int | None = None
        self.applied: list[str] = []

    async def shrink(
        self,
        history: Sequence[Msg],
        *,
        system: str | None,
        tools: Sequence[ToolSpec] | None,
        error: BaseException,
    ) -> tuple[list[Msg], str | None] | None:
        """A smaller request to retry with (messages and system prompt), or ``None``.

        ``None`` comes with a note on ``error`` saying why nothing could be made smaller.
        """
        self.attempts += 1
        if self.attempts > MAX_RECOVERY_ATTEMPTS:
            error.add_note(
                f"memdir: still too long after {MAX_RECOVERY_ATTEMPTS} smaller retries; lower "
                "CompactionConfig.keep_messages / keep_tokens, or use a model with a larger "
                "context window"
            )
            return None
        msgs, sys_prompt = list(history), system
        refused = self.counter.count_request(msgs, system=system, tools=tools)
        target = self._target(refused, error)
        size, changed = refused, False
        while size > target and self._next < len(self._rungs):
            rung = self._rungs[self._next]
            found = await self._climb(rung, msgs, sys_prompt, tools)
            if found is None:
                self._next += 1
                continue
            smaller, smaller_sys = found
            now = self.counter.count_request(smaller, system=smaller_sys, tools=tools)
            if now >= size:
                self._next += 1
                continue
            msgs, sys_prompt, size, changed = smaller, smaller_sys, now, True
            self.applied.append(rung.kind)
            self._last_cut = None  # cut positions of the old list mean nothing in the new one
            if rung.kind != "context":  # halving the memory can go on; the others are done
                self._next += 1
        if not changed:
            error.add_note(self._why_not(refused, msgs, tools, system))
            return None
        logger.info(
            "session %s: request shrunk from ~%d to ~%d tokens after an overflow (target ~%d)",
            self.session_id,
            refused,
            size,
            target,
        )
        return msgs, sys_prompt

    def _target(self, refused: int, error: BaseException) -> int:
        """The estimated size the retry must stay under; the limit is learned on the way."""
        stated = overflow_limit(error)
        if stated is not None and stated.limit is not None:
            # In the counter's units: scaled by what the provider counted, when it says.
            window = (
                refused * stated.limit // stated.requested
                if stated.requested
                else min(stated.limit, refused)
            )
            target = int(window * _STATED_MARGIN)
        else:
            window = refused
            target = int(refused * _UNSTATED_SHRINK)
        if self.compactor is not None and window > 0:
            self.compactor.learn_context_window(window)
        return max(1, min(target, refused - 1))

    async def _climb(
        self,
        rung: _Rung,
        msgs: list[Msg],
        system: str | None,
        tools: Sequence[ToolSpec] | None,
    ) -> tuple[list[Msg], str | None] | None:
        if rung.kind == "compact":
            assert self.compactor is not None
            plan = self.compactor.plan(
                msgs,
                system=system,
                tools=tools,
                force=True,
                keep_messages=rung.keep_messages,
                keep_tokens=rung.keep_tokens,
            )
            if plan.cut_index is None or plan.cut_index == self._last_cut:
                return None  # nothing to summarise, or the same cut tried by the rung before
            prefix = sum(
                self.counter.count_message(m) for m in msgs[: plan.cut_index] if m.role != "system"
            )
            if prefix < _MIN_SUMMARY_GAIN and not rung.last_resort:
                return None  # a summary would not be smaller than what it replaces
            self._last_cut = plan.cut_index
            result = await self.compactor.compact_if_needed(
                msgs,
                session_id=self.session_id,
                system=system,
                tools=tools,
                force=True,
                keep_messages=rung.keep_messages,
                keep_tokens=rung.keep_tokens,
                last_resort=rung.last_resort,
            )
            return (list(result.messages), system) if result is not None else None
        if rung.kind == "shrink":
            window = self.compactor.context_window if self.compactor is not None else None
            shrunk = shrink_oversized(
                msgs,
                counter=self.counter,
                evictor=self.evictor,
                log=self.log,
                context_window=window,
                strict=rung.bar > 1,
            )
            return (shrunk, system) if shrunk is not None else None
        return self._shrink_context(msgs, system)

    def _shrink_context(
        self, msgs: list[Msg], system: str | None
    ) -> tuple[list[Msg], str | None] | None:
        if self.context is None or not system:
            return None
        before = self.context.render(self.session_id)
        if before not in system or not self.context.shrink_memory(self.session_id):
            return None
        return msgs, system.replace(before, self.context.render(self.session_id))

    def _why_not(
        self,
        refused: int,
        msgs: Sequence[Msg],
        tools: Sequence[ToolSpec] | None,
        system: str | None,
    ) -> str:
        fixed = self.counter.count_request([], system=system, tools=tools)
        if self.compactor is None:
            return (
                "memdir: the conversation no longer fits the model's context window and "
                "compaction is off; pass compaction=CompactionConfig() to HarnessAgent to "
                "compact and retry automatically"
            )
        left = sum(m.role != "system" for m in msgs)
        history = (
            "the conversation is only the latest request, which is not oversized"
            if left <= 1
            else "compacting down to the latest request (the rest kept in the session log) "
            "did not shrink it, no message is oversized"
        )
        return (
            f"memdir: the request (~{refused:,} tokens: ~{fixed:,} system prompt and tool "
            f"schemas, ~{max(0, refused - fixed):,} the conversation's {left} message(s)) "
            f"could not be made smaller: {history}, and the memory context is as small as it "
            "can be; use a model with a larger context window, fewer tools or a shorter "
            "system prompt"
        )


_NO_COMPACTION: Final = CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=1)


def shrink_oversized(
    msgs: Sequence[Msg],
    *,
    counter: TokenCounter,
    evictor: ToolResultEvictor,
    log: SessionLog,
    context_window: int | None,
    strict: bool = False,
) -> list[Msg] | None:
    """Shrink messages too big for the context; ``None`` if none is.

    A message is too big when it takes more than a quarter of the context window, or (window
    unknown) more than half of the conversation, and at least 2,000 tokens. With ``strict``
    the bar is an eighth (a quarter) and 500 tokens, and cut messages keep less of their text.
    """
    sizes = [counter.count_message(m) for m in msgs]
    total = sum(sizes)
    floor = _MIN_OVERSIZED_TOKENS // 4 if strict else _MIN_OVERSIZED_TOKENS
    share = (8 if strict else 4) if context_window else (4 if strict else 2)
    limit = max(floor, (context_window or total) // share)
    keep_chars = _KEEP_CHARS // 4 if strict else _KEEP_CHARS
    out = list(msgs)
    changed = False
    for i, (msg, size) in enumerate(zip(msgs, sizes, strict=True)):
        if size <= limit or msg.role == "system" or msg.name == SUMMARY_NAME:
            continue
        if msg.role == "tool":
            smaller = evictor.evict_message(msg, force=True)
        else:
            smaller = _truncate(msg, log, keep_chars)
        if smaller is not msg:
            out[i] = smaller
            changed = True
    return out if changed else None


def _truncate(msg: Msg, log: SessionLog, keep_chars: int) -> Msg:
    """``msg`` with each long text block cut to head and tail, after logging the original."""
    long_blocks = [
        b for b in msg.content if isinstance(b, TextBlock) and len(b.text) > 4 * keep_chars
    ]
    if not long_blocks:
        return msg
    try:
        span = log.append([msg])
    except Exception as exc:  # without a copy, cutting would lose text: keep the message
        logger.warning("cannot log message %s before cutting it: %s", msg.id, exc)
        return msg
    line = span.start_line if span is not None else _logged_line(log, msg.id)
    where = f"line {line} of {log.rel_path}" if line else log.rel_path
    total = sum(len(b.text) for b in long_blocks)
    content = []
    for block in msg.content:
        if isinstance(block, TextBlock) and len(block.text) > 4 * keep_chars:
            text = block.text
            cut = len(text) - 2 * keep_chars
            block = TextBlock(
                text=(
                    f"{text[:keep_chars]}\n\n[... {cut:,} characters cut to fit the context "
                    f"window; the full message is {where} (read_file can read it) ...]\n\n"
                    f"{text[-keep_chars:]}"
                )
            )
        content.append(block)
    metadata = {
        **msg.metadata,
        TRUNCATED_KEY: {"chars": total, "log_path": log.rel_path, "log_line": line},
    }
    return dataclasses.replace(msg, content=tuple(content), metadata=metadata)


def _logged_line(log: SessionLog, msg_id: str) -> int | None:
    for record in log.read().records:
        if record.msg.id == msg_id:
            return record.line
    return None
