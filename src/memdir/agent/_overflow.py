"""Recovery from "the request is larger than the context window" errors.

Attempt 1 compacts with the user's configuration, forced to trigger. Attempt 2 keeps a quarter
of the tail. When compaction cannot help (a single message is too big, or too few messages to
cut), oversized messages are shrunk: a tool result is evicted to a file, any other message is
cut to its head and tail with a pointer to its full copy in the session log, which is written
first. Nothing is lost; the same user input is never appended twice (the history is replaced,
not extended).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Final

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.eviction import ToolResultEvictor
from memdir.messages import SUMMARY_NAME, Msg, TextBlock
from memdir.models import ToolSpec
from memdir.sessions import SessionLog
from memdir.tokens import TokenCounter

__all__ = [
    "MAX_RECOVERY_ATTEMPTS",
    "recover_from_overflow",
    "recover_or_explain",
    "shrink_oversized",
]

logger = logging.getLogger("memdir.agent")

MAX_RECOVERY_ATTEMPTS: Final = 2
TRUNCATED_KEY: Final = "memdir.truncated"
"""``Msg.metadata`` key of a message cut to fit: ``{"chars", "log_path", "log_line"}``."""
_KEEP_CHARS: Final = 2_000
_MIN_OVERSIZED_TOKENS: Final = 2_000


async def recover_from_overflow(
    compactor: ConversationCompactor,
    evictor: ToolResultEvictor,
    history: Sequence[Msg],
    *,
    session_id: str,
    system: str | None,
    tools: Sequence[ToolSpec] | None,
    attempt: int,
    context_window: int | None,
) -> list[Msg] | None:
    """A smaller conversation to retry with, or ``None`` if nothing could be made smaller."""
    config: CompactionConfig = compactor.config
    keep_messages, keep_tokens = config.keep_messages, config.keep_tokens
    if attempt > 1:
        keep_messages = max(1, keep_messages // 4)
        keep_tokens = keep_tokens // 4
    result = await compactor.compact_if_needed(
        history,
        session_id=session_id,
        system=system,
        tools=tools,
        force=True,
        keep_messages=keep_messages,
        keep_tokens=keep_tokens,
    )
    msgs = result.messages if result is not None else list(history)
    if result is None or attempt > 1:
        shrunk = shrink_oversized(
            msgs,
            counter=compactor.counter,
            evictor=evictor,
            log=compactor.session_log(session_id),
            context_window=context_window,
        )
        if shrunk is not None:
            msgs = shrunk
        elif result is None:
            return None
    return msgs


async def recover_or_explain(
    compactor: ConversationCompactor | None,
    evictor: ToolResultEvictor,
    history: Sequence[Msg],
    *,
    session_id: str,
    system: str | None,
    tools: Sequence[ToolSpec] | None,
    attempt: int,
    context_window: int | None,
    error: BaseException,
) -> list[Msg] | None:
    """:func:`recover_from_overflow`, or ``None`` with a note on ``error`` saying why not."""
    if compactor is None:
        error.add_note(
            "memdir: the conversation no longer fits the model's context window and "
            "compaction is off; pass compaction=CompactionConfig() to HarnessAgent to "
            "compact and retry automatically"
        )
        return None
    if attempt > MAX_RECOVERY_ATTEMPTS:
        error.add_note(
            f"memdir: still too long after {MAX_RECOVERY_ATTEMPTS} forced compactions; "
            "lower CompactionConfig.keep_messages / keep_tokens or use a model with a "
            "larger context window"
        )
        return None
    smaller = await recover_from_overflow(
        compactor,
        evictor,
        history,
        session_id=session_id,
        system=system,
        tools=tools,
        attempt=attempt,
        context_window=context_window,
    )
    if smaller is None:
        error.add_note(
            "memdir: forced compaction could not make the conversation smaller "
            "(nothing left to summarise, and no single message is oversized)"
        )
    return smaller


def shrink_oversized(
    msgs: Sequence[Msg],
    *,
    counter: TokenCounter,
    evictor: ToolResultEvictor,
    log: SessionLog,
    context_window: int | None,
) -> list[Msg] | None:
    """Shrink messages too big for the context; ``None`` if none is.

    A message is too big when it takes more than a quarter of the context window, or (window
    unknown) more than half of the conversation.
    """
    sizes = [counter.count_message(m) for m in msgs]
    total = sum(sizes)
    if context_window:
        limit = max(_MIN_OVERSIZED_TOKENS, context_window // 4)
    else:
        limit = max(_MIN_OVERSIZED_TOKENS, total // 2)
    out = list(msgs)
    changed = False
    for i, (msg, size) in enumerate(zip(msgs, sizes, strict=True)):
        if size <= limit or msg.role == "system" or msg.name == SUMMARY_NAME:
            continue
        if msg.role == "tool":
            smaller = evictor.evict_message(msg, force=True)
        else:
            smaller = _truncate(msg, log)
        if smaller is not msg:
            out[i] = smaller
            changed = True
    return out if changed else None


def _truncate(msg: Msg, log: SessionLog) -> Msg:
    """``msg`` with each long text block cut to head and tail, after logging the original."""
    long_blocks = [
        b for b in msg.content if isinstance(b, TextBlock) and len(b.text) > 4 * _KEEP_CHARS
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
        if isinstance(block, TextBlock) and len(block.text) > 4 * _KEEP_CHARS:
            text = block.text
            cut = len(text) - 2 * _KEEP_CHARS
            block = TextBlock(
                text=(
                    f"{text[:_KEEP_CHARS]}\n\n[... {cut:,} characters cut to fit the context "
                    f"window; the full message is {where} (read_file can read it) ...]\n\n"
                    f"{text[-_KEEP_CHARS:]}"
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
