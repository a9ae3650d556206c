"""Compaction invariants over random conversations (Hypothesis).

Whatever the conversation (parallel calls with results spread over several messages,
interrupted calls, results out of place, system messages in the middle, huge messages) and
whatever the settings, after one or two compactions:

* no tool result lacks its call and no call lacks its result, in the provider's sense (when
  the conversation was compacted; otherwise it is returned as given);
* the latest user message is present, unchanged;
* every message that left the context, or was shortened by a cheap pass, is in the session
  log exactly once, as it was first seen;
* at most one summary is in the context.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir.compaction import (
    ClearToolResultsConfig,
    CompactionConfig,
    ConversationCompactor,
    TruncateArgsConfig,
)
from memdir.compaction._pairing import find_orphans, latest_user_index
from memdir.messages import SUMMARY_NAME, Msg, ToolResultBlock, ToolUseBlock
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

SUMMARY = "## SESSION INTENT\nwork\n## SUMMARY\ndone\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"

op = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 400)),
    st.tuples(st.just("assistant"), st.integers(1, 400)),
    st.tuples(st.just("system"), st.sampled_from(["rule A", "rule B"])),
    st.tuples(
        st.just("tools"),
        st.integers(1, 4),  # parallel calls
        st.integers(1, 3),  # tool messages the results are spread over
        st.integers(0, 2),  # results that never came
        st.booleans(),  # a user message interrupts before the results
        st.integers(1, 6_000),  # result size
    ),
    st.tuples(st.just("huge"), st.sampled_from(["user", "tool"])),
    st.just(("orphan",)),
)


class Builder:
    def __init__(self) -> None:
        self.n = 0

    def _id(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def build(self, ops: list[tuple[Any, ...]]) -> list[Msg]:
        out: list[Msg] = []
        for item in ops:
            out.extend(self._one(item))
        return out

    def _one(self, item: tuple[Any, ...]) -> list[Msg]:
        kind = item[0]
        if kind == "user":
            return [Msg.user(f"{self._id('u')} " + "ask " * item[1])]
        if kind == "assistant":
            return [Msg.assistant(f"{self._id('a')} " + "say " * item[1])]
        if kind == "system":
            return [Msg.system(item[1])]
        if kind == "huge":
            text = "payload " * 5_000
            if item[1] == "user":
                return [Msg.user(text)]
            cid = self._id("h")
            call = ToolUseBlock(id=cid, name="bash", input={"cmd": "cat big"})
            return [Msg.assistant(tool_calls=[call]), Msg.tool_result(cid, text, name="bash")]
        if kind == "orphan":
            return [Msg.tool_result(self._id("ghost"), "stray result", name="bash")]
        _, k, spread, missing, interrupt, size = item
        calls = [
            ToolUseBlock(id=self._id("c"), name="read_file", input={"path": "p" * (size // 2)})
            for _ in range(k)
        ]
        out = [Msg.assistant("using tools", tool_calls=calls)]
        if interrupt:
            out.append(Msg.user("wait"))
        answered = calls[: max(0, k - missing)]
        groups = [answered[i::spread] for i in range(spread)]
        for group in groups:
            if group:
                blocks = tuple(
                    ToolResultBlock(tool_use_id=c.id, name=c.name, output="r" * size) for c in group
                )
                out.append(Msg(role="tool", content=blocks))
        return out


def check(
    result: list[Msg], compacted: bool, seen: dict[str, Msg], log: SessionLog, latest: Msg | None
) -> None:
    if compacted:  # an uncompacted conversation is the caller's, as it was given
        assert find_orphans(result) == ([], [])
    if latest is not None:
        assert latest in result
    assert sum(m.name == SUMMARY_NAME for m in result) <= 1
    records = log.read().records if log.path.exists() else []
    counts = Counter(r.msg.id for r in records)
    assert all(c == 1 for c in counts.values())
    logged = {r.msg.id: r.msg for r in records}
    present = {m.id: m for m in result}
    for mid, original in seen.items():
        if mid not in present or present[mid] != original:
            assert logged.get(mid) == original, f"message {mid} was lost"


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    first=st.lists(op, min_size=1, max_size=30),
    more=st.lists(op, max_size=12),
    trigger=st.integers(2, 12),
    keep=st.integers(0, 8),
    keep_tokens=st.sampled_from([0, 0, 300, 3_000]),
    clearing=st.booleans(),
    truncating=st.booleans(),
    force=st.booleans(),
)
def test_compaction_invariants(
    first: list[tuple[Any, ...]],
    more: list[tuple[Any, ...]],
    trigger: int,
    keep: int,
    keep_tokens: int,
    clearing: bool,
    truncating: bool,
    force: bool,
) -> None:
    keep = min(keep, trigger - 1)
    config = CompactionConfig(
        trigger_messages=trigger,
        trigger_tokens=0 if keep_tokens == 0 else keep_tokens + 1_000,
        keep_messages=keep,
        keep_tokens=keep_tokens,
        clear_tool_results=ClearToolResultsConfig(keep_results=1, min_chars=500, preview_chars=100)
        if clearing
        else None,
        truncate_args=TruncateArgsConfig(trigger_messages=3, keep_messages=1, max_arg_length=600)
        if truncating
        else None,
        summary_retries=0,
    )
    builder = Builder()
    with tempfile.TemporaryDirectory() as tmp:
        clock = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        ws = Workspace(tmp, tz="UTC", clock=lambda: clock)
        comp = ConversationCompactor(FunctionModel(lambda call: SUMMARY), ws, config)
        log = SessionLog(ws, "prop")
        seen: dict[str, Msg] = {}

        def run(msgs: list[Msg]) -> list[Msg]:
            for m in msgs:
                seen.setdefault(m.id, m)
            res = asyncio.run(comp.compact_if_needed(msgs, session_id="prop", force=force))
            out = msgs if res is None else res.messages
            user = latest_user_index(msgs)
            check(out, res is not None, seen, log, msgs[user] if user is not None else None)
            return out

        context = run(builder.build(first))
        run(context + builder.build(more))
