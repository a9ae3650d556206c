"""memdir.adapters.pydantic_ai driven by real Pydantic AI agent runs (FunctionModel, offline)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai import Agent, ModelMessagesTypeAdapter
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memdir.adapters.pydantic_ai import (
    MESSAGE_KEY,
    MemdirCompaction,
    messages_to_msgs,
    msgs_to_messages,
)
from memdir.compaction import SUMMARY_SECTIONS, CompactionConfig
from memdir.errors import ConfigError
from memdir.memory import MaintenanceConfig
from memdir.messages import MessageFormatError, ToolResultBlock, dangling_tool_calls
from memdir.sessions import SessionLog
from memdir.workspace import Workspace


def dump(messages: list[ModelMessage]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def pairing_ok(messages: list[ModelMessage]) -> bool:
    calls = [p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    returns = [p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    return sorted(calls) == sorted(returns)


def lookup_then_answer(seen: list[list[ModelMessage]]) -> Any:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"Done: {returns[0].content}.")])
        n = len(seen)
        return ModelResponse(
            parts=[ToolCallPart("lookup", {"key": f"shelf-{n}"}, tool_call_id=f"call-{n}")]
        )

    return respond


def make_agent(capability: MemdirCompaction, respond: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(respond), capabilities=[capability])

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look up a key in the inventory."""
        return f"{key} has 42 units"

    return agent


async def test_forty_turns_compact_flush_offload_and_a_second_run_remembers(ws: Workspace) -> None:
    memdir = MemdirCompaction(
        ws,
        session_id="chat-1",
        compaction=CompactionConfig(trigger_messages=30, keep_messages=10),
    )
    seen: list[list[ModelMessage]] = []
    agent = make_agent(memdir, lookup_then_answer(seen))
    history: list[ModelMessage] = []
    every: list[Any] = []  # every message any run produced, in Pydantic AI's JSON form
    for turn in range(40):
        result = await agent.run(
            f"Turn {turn}: check the shelf. Remember: the codename of release {turn} is "
            f"Orchid{turn}.",
            message_history=history,
        )
        every += dump(result.new_messages())
        history = result.all_messages()
    await memdir.aclose()

    # compaction fired and replaced the start of the history with a summary
    compaction = memdir.last_compaction
    assert compaction is not None and "summary" in compaction.stages
    for section in SUMMARY_SECTIONS:
        assert section in compaction.summary
    assert len(history) < 40
    assert "<summary>" in str(history[0].parts[0].content)  # type: ignore[union-attr]
    # no request ever separated a call from its return
    assert all(pairing_ok(messages) for messages in seen)
    assert pairing_ok(history)
    # the session log holds every message the runs produced, the final answer too, each once
    logged = [r.msg for r in SessionLog(ws, "chat-1").read().records]
    logged_ids = [m.id for m in logged]
    assert len(logged_ids) == len(set(logged_ids))
    restored = dump(msgs_to_messages([m for m in logged if MESSAGE_KEY in m.metadata]))
    for message in every:
        assert restored.count(message) == 1
    # the summarised turns were flushed to the ledger first
    ledger = "".join(p.read_text() for p in (ws.root / "memory").glob("*.md"))
    assert "Orchid0" in ledger and "Orchid5" in ledger

    # a new conversation finds what the first one said, through memdir's memory tools
    def search(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert "memory_search" in {t.name for t in info.function_tools}
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(str(returns[0].content))])
        return ModelResponse(
            parts=[ToolCallPart("memory_search", {"query": "codename release 3"}, tool_call_id="s")]
        )

    fresh = MemdirCompaction(ws, session_id="chat-2")
    reply = await Agent(FunctionModel(search), capabilities=[fresh]).run("Codename of release 3?")
    assert "Orchid3" in reply.output and "memory/" in reply.output


async def test_instructions_carry_memory_and_big_returns_are_evicted(ws: Workspace) -> None:
    (ws.root / "MEMORY.md").write_text("# Preferences\n- The user prefers metric units.\n")
    big = "row,value\n" + "".join(f"{n},{n * 7}\n" for n in range(20_000))
    seen: list[tuple[str | None, list[ModelMessage]]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.instructions, list(messages)))
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("exported")])
        return ModelResponse(parts=[ToolCallPart("export", {}, tool_call_id="exp")])

    memdir = MemdirCompaction(ws, session_id="big", memory_flush=False)
    agent: Agent[None, str] = Agent(FunctionModel(respond), capabilities=[memdir])

    @agent.tool_plain
    def export() -> str:
        """Export the table."""
        return big

    result = await agent.run("Export it")
    instructions = seen[0][0] or ""
    assert "<memory_context" in instructions and "prefers metric units" in instructions
    sent = next(p for p in seen[1][1][-1].parts if isinstance(p, ToolReturnPart))
    assert isinstance(sent.content, str) and len(sent.content) < 10_000
    assert "large_tool_results/" in sent.content
    files = list((ws.root / "large_tool_results").rglob("*.txt"))
    assert len(files) == 1 and files[0].read_text() == big
    kept = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert kept[0].content == sent.content  # the history keeps the preview too


async def test_every_answer_of_a_session_is_logged_once_however_the_runs_end(
    ws: Workspace,
) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1], ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in messages[-1].parts
        ):
            return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])
        if len(messages) % 4 == 1:  # every other run looks something up first
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": "k"}, tool_call_id="c")])
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield f"streamed answer {len(messages)}"

    memdir = MemdirCompaction(ws, session_id="twelve", compaction=None)
    agent: Agent[None, str] = Agent(
        FunctionModel(respond, stream_function=stream), capabilities=[memdir]
    )

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look up a key."""
        return f"{key} is 42"

    history: list[ModelMessage] = []
    every: list[Any] = []
    for turn in range(12):
        prompt = f"question {turn}"
        if turn == 10:  # a streamed run
            async with agent.run_stream(prompt, message_history=history) as streamed:
                await streamed.get_output()
            new, history = streamed.new_messages(), streamed.all_messages()
        elif turn == 11:  # a run driven node by node
            async with agent.iter(prompt, message_history=history) as run:
                async for _ in run:
                    pass
            assert run.result is not None
            new, history = run.result.new_messages(), run.result.all_messages()
        else:
            result = await agent.run(prompt, message_history=history)
            new, history = result.new_messages(), result.all_messages()
        every += dump(new)
    await memdir.aclose()

    # the log holds the session exactly: every message once, in order, the 12th answer too
    logged = [r.msg for r in SessionLog(ws, "twelve").read().records]
    assert dump(msgs_to_messages(logged)) == every
    answers = [m.text for m in logged if m.role == "assistant" and "answer" in m.text]
    assert len(answers) == 12 and answers[-1].startswith("answer")
    assert answers[10].startswith("streamed answer")


async def test_maintenance_consolidates_the_ledger_into_memory_md(ws: Workspace) -> None:
    fact = "Remember that the staging database moves to Frankfurt."
    memdir = MemdirCompaction(
        ws,
        session_id="ops",
        maintenance=MaintenanceConfig(
            startup_delay=timedelta(0), consolidation_min_gap=timedelta(0)
        ),
    )
    assert memdir.scheduler is not None and not memdir.scheduler.running
    agent: Agent[None, str] = Agent(
        FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Noted.")])),
        capabilities=[memdir],
    )
    await agent.run(fact)
    assert memdir.scheduler.running  # started by the run

    def consolidated() -> bool:
        memory_md = ws.root / "MEMORY.md"
        return memory_md.exists() and "staging database moves to Frankfurt" in (
            memory_md.read_text()
        )

    for _ in range(1_000):  # the flush, then the consolidation it asks for (bounded wait)
        if consolidated():
            break
        await asyncio.sleep(0.02)
    assert consolidated()
    await memdir.aclose()
    assert not memdir.scheduler.running
    # a run after aclose starts it again
    await agent.run("And the backups?")
    assert memdir.scheduler.running
    await memdir.aclose()
    assert not memdir.scheduler.running


def test_bad_settings_are_config_errors(ws: Workspace) -> None:
    with pytest.raises(ConfigError, match="CompactionConfig"):
        MemdirCompaction(ws, compaction=30)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="MaintenanceConfig"):
        MemdirCompaction(ws, maintenance="daily")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ChatModel"):
        MemdirCompaction(ws, model=object())  # type: ignore[arg-type]
    with pytest.raises(MessageFormatError):
        messages_to_msgs([{"kind": "request"}])  # type: ignore[list-item]


# -- conversion ------------------------------------------------------------------------------

text = st.text(max_size=30)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
args = st.dictionaries(ident, st.integers() | text, max_size=3)


@st.composite
def conversation(draw: st.DrawFn) -> list[ModelMessage]:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart(draw(text)), UserPromptPart(draw(text))])
    ]
    for turn in range(draw(st.integers(0, 5))):
        calls = [
            ToolCallPart(draw(ident), draw(args | st.just(None)), tool_call_id=f"c{turn}-{n}")
            for n in range(draw(st.integers(0, 3)))
        ]
        head: list[Any] = [TextPart(draw(text))] if draw(st.booleans()) else []
        if draw(st.booleans()):
            head.insert(0, ThinkingPart(draw(text), signature=draw(st.none() | ident)))
        messages.append(ModelResponse(parts=[*head, *calls] or [TextPart("")]))
        returns: list[Any] = [
            ToolReturnPart(
                c.tool_name,
                draw(text | st.dictionaries(ident, st.integers(), max_size=2)),
                tool_call_id=c.tool_call_id,
                outcome=draw(st.sampled_from(["success", "failed"])),
            )
            for c in calls
        ]
        if draw(st.booleans()) or not returns:
            user: Any = (
                draw(text)
                if draw(st.booleans())
                else [draw(text), ImageUrl("https://x.test/a.png")]
            )
            returns.append(UserPromptPart(user))
        messages.append(ModelRequest(parts=returns))
    return messages


@given(conversation())
def test_messages_round_trip_through_msg(messages: list[ModelMessage]) -> None:
    msgs = messages_to_msgs(messages)
    assert dump(msgs_to_messages(msgs)) == dump(messages)
    assert [m.id for m in messages_to_msgs(messages)] == [m.id for m in msgs]  # stable ids


@given(conversation())
def test_calls_and_returns_stay_paired(messages: list[ModelMessage]) -> None:
    msgs = messages_to_msgs(messages)
    assert dangling_tool_calls(msgs) == []
    assert {c.id for m in msgs for c in m.tool_uses} == {
        r.tool_use_id for m in msgs for r in m.tool_results
    }
    # a tool message holds only the returns; the user's text is its own message
    for m in msgs:
        if m.role == "tool":
            assert all(isinstance(b, ToolResultBlock) for b in m.content)


def test_a_changed_return_comes_back_with_its_new_text() -> None:
    messages: list[ModelMessage] = [
        ModelResponse(parts=[ToolCallPart("f", {}, tool_call_id="c")]),
        ModelRequest(parts=[ToolReturnPart("f", {"rows": list(range(50))}, tool_call_id="c")]),
    ]
    msgs = messages_to_msgs(messages)
    cleared = msgs[1].with_content([ToolResultBlock(tool_use_id="c", name="f", output="[cleared]")])
    back = msgs_to_messages([msgs[0], cleared])
    part = back[1].parts[0]
    assert isinstance(part, ToolReturnPart) and part.content == "[cleared]"
