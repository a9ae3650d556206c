"""ConversationCompactor: triggers, cut, pinning, summary message, chaining, flush, events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from memdir.compaction import (
    SUMMARY_SECTIONS,
    CompactionConfig,
    CompactionEvent,
    ConversationCompactor,
    build_summary_message,
    summary_log,
    summary_text,
)
from memdir.compaction._pairing import find_orphans
from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock
from memdir.models import MESSAGES_KEY, TASK_KEY
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace

# -- helpers -------------------------------------------------------------------------------------


def call(cid: str, name: str = "read_file", **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=cid, name=name, input=args)


def result(cid: str, out: str = "ok", name: str = "read_file", err: bool = False) -> Msg:
    return Msg.tool_result(cid, out, name=name, is_error=err)


def summary_answer(tag: str) -> str:
    return "\n\n".join(f"{h}\n{tag}" for h in SUMMARY_SECTIONS)


class Rounds:
    """A summary model answering ROUND_1, ROUND_2, ... and recording prompts."""

    def __init__(self, context_window: int | None = None) -> None:
        self.n = 0
        self.model = FunctionModel(self.answer, context_window=context_window, name="rounds")

    def answer(self, call: ModelCall) -> str:
        self.n += 1
        return summary_answer(f"ROUND_{self.n}")

    @property
    def prompts(self) -> list[str]:
        return [c.last_user_text for c in self.model.calls]


FILLER = "about the deployment pipeline and the flaky integration tests " * 4


def chat(n: int, prefix: str = "M") -> list[Msg]:
    out: list[Msg] = []
    for i in range(n):
        if i % 2 == 0:
            out.append(Msg.user(f"{prefix}{i} question {FILLER}"))
        else:
            out.append(Msg.assistant(f"{prefix}{i} answer {FILLER}"))
    return out


def logged_ids(ws: Workspace, sid: str = "s1") -> list[str]:
    return [r.msg.id for r in SessionLog(ws, sid).read().records]


def cfg(**kw: Any) -> CompactionConfig:
    base: dict[str, Any] = {"trigger_messages": 10, "trigger_tokens": 0, "keep_messages": 4}
    base.update(kw)
    return CompactionConfig(**base)


# -- trigger -------------------------------------------------------------------------------------


async def test_below_the_triggers_nothing_happens(ws: Workspace) -> None:
    rounds = Rounds()
    comp = ConversationCompactor(rounds.model, ws, cfg())
    events: list[CompactionEvent] = []
    comp.add_listener(events.append)
    assert await comp.compact_if_needed(chat(9), session_id="s1") is None
    assert rounds.model.calls == [] and events == []
    assert not (ws.root / "sessions" / "s1.log.jsonl").exists()


async def test_message_trigger_summarises_the_prefix_and_keeps_the_tail(ws: Workspace) -> None:
    rounds = Rounds()
    msgs = chat(12)
    comp = ConversationCompactor(rounds.model, ws, cfg())
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    assert res.cut_index == 8 and res.stages == ("summary",)
    head = res.messages[0]
    assert head.name == SUMMARY_NAME and head.role == "user"
    assert head.id.startswith(SUMMARY_NAME + ":")
    assert res.messages[1:] == msgs[8:]
    assert res.summary.startswith("## SESSION INTENT") and "ROUND_1" in res.summary
    assert (res.messages_before, res.messages_after) == (12, 5)
    assert res.tokens_after < res.tokens_before
    # the prefix is in the session log, in order, and the summary names exactly those lines
    assert logged_ids(ws) == [m.id for m in msgs[:8]]
    assert res.log_path == "sessions/s1.log.jsonl"
    assert res.log_span is not None and (res.log_span.start_line, res.log_span.end_line) == (1, 8)
    named = summary_log(head)
    assert named is not None and (named.path, named.start_line, named.end_line) == (
        "sessions/s1.log.jsonl",
        1,
        8,
    )
    assert "sessions/s1.log.jsonl, lines 1-8" in head.text
    read_back = SessionLog(ws, "s1").messages(named.start_line, named.end_line)
    assert read_back == msgs[:8]


async def test_summary_id_is_stable_for_the_same_content(ws: Workspace, tmp_path: Any) -> None:
    msgs = chat(12)
    a = await ConversationCompactor(Rounds().model, ws, cfg()).compact_if_needed(
        msgs, session_id="s1"
    )
    other = Workspace(tmp_path / "other", tz="UTC", clock=ws.now)
    b = await ConversationCompactor(Rounds().model, other, cfg()).compact_if_needed(
        msgs, session_id="s1"
    )
    assert a is not None and b is not None
    assert a.messages[0].id == b.messages[0].id


async def test_token_trigger_counts_the_whole_request(ws: Workspace) -> None:
    rounds = Rounds()
    comp = ConversationCompactor(
        rounds.model,
        ws,
        CompactionConfig(trigger_messages=0, trigger_tokens=2_000, keep_messages=4),
    )
    msgs = chat(12)
    assert await comp.compact_if_needed(msgs, session_id="s1") is None
    # the same messages with a large system prompt and tool schemas: over the trigger
    big_system = "Standing instructions. " * 800
    res = await comp.compact_if_needed(msgs, session_id="s1", system=big_system)
    assert res is not None and res.reason == "tokens"
    assert res.tokens_before >= 2_000


async def test_hard_limit_triggers_even_with_triggers_off(ws: Workspace) -> None:
    rounds = Rounds(context_window=3_000)
    config = CompactionConfig(
        trigger_messages=0, trigger_tokens=0, keep_messages=2, reserve_tokens=1_000
    )
    comp = ConversationCompactor(rounds.model, ws, config)
    msgs = [
        Msg.user("x " * 1500),
        Msg.assistant("y " * 1500),
        Msg.user("z " * 1500),
        Msg.assistant("ok"),
    ]
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.reason == "hard_limit"


async def test_keep_tokens_budget_scans_from_the_end(ws: Workspace) -> None:
    rounds = Rounds()
    config = CompactionConfig(trigger_messages=10, trigger_tokens=0, keep_tokens=60)
    comp = ConversationCompactor(rounds.model, ws, config)
    msgs = chat(11)
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.cut_index is not None
    tail = msgs[res.cut_index :]
    assert comp.counter.count_messages(tail) <= 60
    assert comp.counter.count_messages(msgs[res.cut_index - 1 :]) > 60


async def test_force_compacts_regardless_and_accepts_a_smaller_keep(ws: Workspace) -> None:
    rounds = Rounds()
    comp = ConversationCompactor(rounds.model, ws, cfg(trigger_messages=100))
    msgs = chat(8)
    assert await comp.compact_if_needed(msgs, session_id="s1") is None
    res = await comp.compact_if_needed(msgs, session_id="s1", force=True, keep_messages=2)
    assert res is not None and res.reason == "forced" and res.messages[1:] == msgs[6:]


# -- cut and pairing -----------------------------------------------------------------------------


async def test_cut_never_separates_parallel_calls_from_their_results(ws: Workspace) -> None:
    msgs = [
        *chat(6),
        Msg.user("read three files"),
        Msg.assistant(
            "reading",
            tool_calls=[call("a", path="a.py"), call("b", path="b.py"), call("c", path="c.py")],
        ),
        Msg(role="tool", content=(result("a").content[0], result("b").content[0])),
        result("c", "c body"),
        Msg.assistant("done"),
    ]
    # keep 2 would cut between the two tool messages: the whole call group stays
    comp = ConversationCompactor(Rounds().model, ws, cfg(keep_messages=2))
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.cut_index == 7
    assert res.messages[-4:] == msgs[7:]
    assert find_orphans(res.messages) == ([], [])


async def test_reused_call_ids_do_not_tie_the_conversation_together(ws: Workspace) -> None:
    # Models that number their calls per answer reuse "call_0" every turn: each result answers
    # the nearest earlier call of its id, so the conversation can still be cut.
    msgs = [Msg.user("refactor the payment module")]
    for i in range(12):
        msgs.append(Msg.assistant(tool_calls=[call("call_0", path=f"src/m{i}.py")]))
        msgs.append(result("call_0", f"module {i}"))
    msgs.append(Msg.assistant("all twelve modules read"))
    comp = ConversationCompactor(Rounds().model, ws, cfg(keep_messages=4))
    res = await comp.compact_if_needed(msgs, session_id="s1")
    # keep 4 would cut between a call and its result: the cut moves one message earlier
    assert res is not None and res.cut_index == len(msgs) - 5
    assert res.messages[2:] == msgs[-5:]  # summary, pinned request, then the tail
    assert find_orphans(res.messages) == ([], [])
    assert logged_ids(ws) == [m.id for m in msgs[:-5]]


async def test_a_reused_id_pairs_with_the_nearest_unanswered_call(ws: Workspace) -> None:
    # the first "c0" was interrupted (never answered); the later result answers the later call,
    # so a cut between the two turns is safe and the old call gets an error result in the tail
    msgs = [
        *chat(6),
        Msg.assistant(tool_calls=[call("c0", "bash", cmd="pytest")]),
        Msg.user("never mind, read the config"),
        Msg.assistant(tool_calls=[call("c0", path="config.toml")]),
        result("c0", "[db]"),
        Msg.assistant("the config has a db section"),
    ]
    comp = ConversationCompactor(Rounds().model, ws, cfg(keep_messages=4))
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.cut_index == 7
    assert res.messages[-4:] == msgs[7:]
    assert find_orphans(res.messages) == ([], [])


async def test_latest_user_request_survives_a_long_tool_loop(ws: Workspace) -> None:
    request = Msg.user("Please rename FooService to BarService in every module")
    msgs = [*chat(4), request]
    for i in range(12):
        msgs.append(Msg.assistant(tool_calls=[call(f"c{i}", path=f"src/m{i}.py")]))
        msgs.append(result(f"c{i}", f"module {i}"))
    comp = ConversationCompactor(Rounds().model, ws, cfg(keep_messages=4))
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    assert res.messages[1] is request  # verbatim, right after the summary
    assert res.messages[2:] == msgs[-4:]
    assert find_orphans(res.messages) == ([], [])
    # it is still logged with the prefix, so the log span is contiguous
    assert request.id in logged_ids(ws)


async def test_interrupted_call_in_the_tail_gets_an_error_result(ws: Workspace) -> None:
    msgs = [
        *chat(8),
        Msg.user("run the tests"),
        Msg.assistant(tool_calls=[call("t1", "bash", cmd="pytest")]),
        Msg.user("stop, do something else"),
        Msg.assistant("ok"),
    ]
    comp = ConversationCompactor(Rounds().model, ws, cfg(keep_messages=4))
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    assert find_orphans(res.messages) == ([], [])
    stub = next(m for m in res.messages if m.role == "tool")
    assert stub.tool_results[0].tool_use_id == "t1" and stub.tool_results[0].is_error


async def test_system_messages_in_the_middle_are_kept_once(ws: Workspace) -> None:
    reminder = "Reminder: never push to main."
    msgs = [Msg.system("You are a coding agent."), *chat(4)]
    msgs += [Msg.system(reminder), *chat(4, "N"), Msg.system(reminder), *chat(6, "O")]
    comp = ConversationCompactor(Rounds().model, ws, cfg(keep_messages=4))
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    systems = [m.text for m in res.messages if m.role == "system"]
    assert systems == ["You are a coding agent.", reminder]
    assert res.messages[2].name == SUMMARY_NAME


# -- the summariser request ----------------------------------------------------------------------


async def test_summariser_sees_arguments_errors_and_carries_the_task_marker(ws: Workspace) -> None:
    rounds = Rounds()
    msgs = [
        Msg.user("fix the build"),
        Msg.assistant(tool_calls=[call("b1", "bash", cmd="make -C build/release all")]),
        result("b1", "error: undefined reference to `zlib_inflate'", name="bash", err=True),
        *chat(9),
    ]
    comp = ConversationCompactor(rounds.model, ws, cfg())
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None
    sent = rounds.model.calls[0]
    assert sent.task == "summarize"
    prompt = sent.last_user_text
    assert "make -C build/release all" in prompt
    assert "undefined reference to `zlib_inflate'" in prompt and "ERROR" in prompt
    structured = sent.messages[-1].metadata[MESSAGES_KEY]
    assert [Msg.from_dict(d).id for d in structured] == [
        msgs[i].id for i in range(res.cut_index or 0)
    ]
    assert sent.messages[-1].metadata[TASK_KEY] == "summarize"


async def test_large_prefix_is_summarised_in_slices_with_a_running_summary(ws: Workspace) -> None:
    rounds = Rounds()
    config = cfg(trigger_messages=30, keep_messages=2, summary_input_tokens=1_500)
    msgs = [Msg.user(f"note {i}: " + "lorem ipsum dolor " * 40) for i in range(40)]
    comp = ConversationCompactor(rounds.model, ws, config)
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and len(rounds.model.calls) > 1
    for i, prompt in enumerate(rounds.prompts[1:], start=1):
        assert f"ROUND_{i}" in prompt  # each slice folds the summary so far
    assert f"ROUND_{len(rounds.model.calls)}" in res.summary
    summarised = [
        Msg.from_dict(d).id
        for c in rounds.model.calls
        for d in c.messages[-1].metadata[MESSAGES_KEY]
        if d.get("name") != SUMMARY_NAME
    ]
    assert summarised == [m.id for m in msgs[:38]]


# -- chaining (the reference's compactor tests) --------------------------------------------------


def old_summary(tag: str) -> Msg:
    return Msg.user(f"<summary>\n{tag}\n</summary>", name=SUMMARY_NAME, id=f"{SUMMARY_NAME}:{tag}")


async def test_prior_summary_goes_to_the_summary_but_not_to_flush_or_tail(ws: Workspace) -> None:
    rounds = Rounds()
    flushed: list[list[Msg]] = []

    async def on_flush(msgs: list[Msg], *, session_id: str) -> None:
        flushed.append(msgs)

    s1, m2, t1, t2 = old_summary("S1"), Msg.user("M2"), Msg.assistant("T1"), Msg.user("T2")
    comp = ConversationCompactor(
        rounds.model, ws, cfg(trigger_messages=3, keep_messages=2), on_flush=on_flush
    )
    res = await comp.compact_if_needed([s1, m2, t1, t2], session_id="s1")
    assert res is not None
    assert "S1" in rounds.prompts[0] and "M2" in rounds.prompts[0]
    assert flushed == [[m2]]
    assert len(res.messages) == 3 and res.messages[1:] == [t1, t2]
    assert res.messages[0].name == SUMMARY_NAME


async def test_several_prior_summaries_merge_into_one(ws: Workspace) -> None:
    rounds = Rounds()
    flushed: list[list[Msg]] = []
    s0, m1, s1, m2 = old_summary("S0"), Msg.user("M1"), old_summary("S1"), Msg.assistant("M2")
    tail = [Msg.user("T1"), Msg.assistant("T2")]
    comp = ConversationCompactor(
        rounds.model,
        ws,
        cfg(trigger_messages=3, keep_messages=2),
        on_flush=lambda m, session_id: flushed.append(m),
    )
    res = await comp.compact_if_needed([s0, m1, s1, m2, *tail], session_id="s1")
    assert res is not None
    assert "S0" in rounds.prompts[0] and "S1" in rounds.prompts[0]
    assert flushed == [[m1, m2]]
    assert sum(m.name == SUMMARY_NAME for m in res.messages) == 1


async def test_summary_only_prefix_does_not_become_empty_history(ws: Workspace) -> None:
    rounds = Rounds()
    flushed: list[list[Msg]] = []
    comp = ConversationCompactor(
        rounds.model,
        ws,
        cfg(trigger_messages=3, keep_messages=2),
        on_flush=lambda m, session_id: flushed.append(m),
    )
    res = await comp.compact_if_needed(
        [old_summary("OLD"), Msg.user("T1"), Msg.assistant("T2")], session_id="s1"
    )
    assert res is not None
    assert "OLD" in rounds.prompts[0]
    assert flushed == [[]]
    assert "ROUND_1" in res.summary and "No previous conversation" not in res.summary


async def test_chained_compaction_folds_the_previous_summary(ws: Workspace) -> None:
    rounds = Rounds()
    flushed: list[list[Msg]] = []
    comp = ConversationCompactor(
        rounds.model,
        ws,
        cfg(trigger_messages=3, keep_messages=2),
        on_flush=lambda m, session_id: flushed.append(m),
    )
    m1, m2, t1, t2 = Msg.user("M1"), Msg.assistant("M2"), Msg.user("T1"), Msg.assistant("T2")
    first = await comp.compact_if_needed([m1, m2, t1, t2], session_id="s1")
    assert first is not None and "ROUND_1" in first.summary
    m3 = Msg.user("M3")
    second = await comp.compact_if_needed([*first.messages, m3], session_id="s1")
    assert second is not None
    assert "ROUND_1" in rounds.prompts[1]
    assert "ROUND_2" in second.summary and "ROUND_1" not in second.summary
    assert flushed[1] == [t1]  # the summary is never flushed again
    # the new summary stands for everything logged so far, from line 1
    named = summary_log(second.messages[0])
    assert named is not None and named.start_line == 1
    ids = logged_ids(ws)
    assert ids == [m1.id, m2.id, first.messages[0].id, t1.id]


async def test_flush_disabled_still_uses_prior_summary(ws: Workspace) -> None:
    rounds = Rounds()
    flushed: list[Any] = []
    comp = ConversationCompactor(
        rounds.model,
        ws,
        cfg(trigger_messages=3, keep_messages=2, flush_before_compact=False),
        on_flush=lambda m, session_id: flushed.append(m),
    )
    res = await comp.compact_if_needed(
        [old_summary("S1"), Msg.user("M2"), Msg.user("T1"), Msg.assistant("T2")], session_id="s1"
    )
    assert res is not None and flushed == [] and "S1" in rounds.prompts[0]


async def test_flush_runs_before_offload_and_its_failure_does_not_stop_compaction(
    ws: Workspace,
) -> None:
    seen: list[bool] = []

    async def failing_flush(msgs: list[Msg], *, session_id: str) -> None:
        seen.append((ws.root / "sessions" / f"{session_id}.log.jsonl").exists())
        raise RuntimeError("memory model down")

    comp = ConversationCompactor(Rounds().model, ws, cfg(), on_flush=failing_flush)
    res = await comp.compact_if_needed(chat(12), session_id="s1")
    assert res is not None and seen == [False]


# -- events --------------------------------------------------------------------------------------


async def test_events_report_counts_span_and_survive_failing_listeners(ws: Workspace) -> None:
    got: list[CompactionEvent] = []

    def broken(event: CompactionEvent) -> None:
        raise ValueError("listener bug")

    async def async_listener(event: CompactionEvent) -> None:
        got.append(event)

    comp = ConversationCompactor(Rounds().model, ws, cfg())
    comp.add_listener(broken)
    comp.add_listener(async_listener)
    res = await comp.compact_if_needed(chat(12), session_id="s1")
    assert res is not None
    assert [e.kind for e in got] == ["compaction.started", "compaction.completed"]
    done = got[1]
    assert (done.messages_before, done.messages_after) == (12, 5)
    assert done.tokens_after is not None and done.tokens_after < done.tokens_before
    assert (done.cut_index, done.log_start_line, done.log_end_line) == (8, 1, 8)
    assert done.reason == "messages" and done.model == "rounds" and done.latency_s >= 0
    # events never carry message text
    assert "question" not in json.dumps([str(e) for e in got])


async def test_token_pressure_also_caps_a_tail_that_is_itself_too_big(ws: Workspace) -> None:
    # keep_messages=4, but the last four messages alone are over the token trigger
    msgs = [*chat(6), *(Msg.user(f"log {i}: " + "error trace line " * 300) for i in range(4))]
    config = CompactionConfig(trigger_messages=0, trigger_tokens=3_000, keep_messages=4)
    comp = ConversationCompactor(Rounds().model, ws, config)
    assert comp.counter.count_messages(msgs[-4:]) > 3_000
    res = await comp.compact_if_needed(msgs, session_id="s1")
    assert res is not None and res.tokens_after < 3_000
    assert res.messages[-1] == msgs[-1]
    assert await comp.compact_if_needed(res.messages, session_id="s1") is None


def test_summary_text_survives_wrapper_tags_inside_the_summary() -> None:
    # A summary may quote the markup (e.g. a template the user was editing).
    text = "## SESSION INTENT\nedit <summary>\nblock</summary> in page.html\n## SUMMARY\nok"
    msg = build_summary_message(text, log=None, summarized=3, created_at=datetime.now(UTC))
    assert summary_text(msg) == text
