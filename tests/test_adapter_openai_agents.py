"""memdir.adapters.openai_agents driven by real Agents SDK runs (its ScriptedModel, offline)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from memdir.adapters.openai_agents import (
    ITEM_KEY,
    MARKER_KEY,
    MemdirSession,
    memdir_function_tools,
    memdir_input_filter,
    msg_to_items,
)
from memdir.compaction import SUMMARY_SECTIONS, CompactionConfig
from memdir.errors import ConfigError
from memdir.eviction import ToolResultEvictionConfig
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

set_tracing_disabled(True)

CODENAMES = [f"Orchid{n}" for n in range(40)]


@function_tool
def lookup(key: str) -> str:
    """Look up a key in the inventory."""
    return f"inventory says {key} has 4{len(key)} units"


def pairing_ok(items: list[Any]) -> bool:
    """Every function call has its output in ``items`` and every output its call."""
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    return sorted(calls) == sorted(outputs)


def tool_then_answer() -> Callable[[Any], list[Any]]:
    """A responder: one lookup per user turn, then an answer naming its result."""
    turns = iter(range(1_000))

    def respond(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(f"Done: {last['output']}.", item_id=f"m-{last['call_id']}")]
        turn = next(turns)
        return [function_call("lookup", {"key": f"shelf-{turn}"}, call_id=f"call-{turn}")]

    return respond


def recording(session: MemdirSession) -> list[Any]:
    """Record every item the SDK adds to ``session``."""
    added: list[Any] = []
    original = session.add_items

    async def add_items(items: list[Any]) -> None:
        added.extend(json.loads(json.dumps(items)))
        await original(items)

    session.add_items = add_items  # type: ignore[method-assign]
    return added


def logged_items(ws: Workspace, session_id: str) -> list[Any]:
    """The items the session log holds (markers and memdir's own records left out)."""
    msgs = [r.msg for r in SessionLog(ws, session_id).read().records]
    return [i for m in msgs if ITEM_KEY in m.metadata for i in msg_to_items(m)]


def steps(responder: Callable[[Any], list[Any]], n: int, **kw: Any) -> list[ModelStep]:
    return [ModelStep(responder=responder, **kw) for _ in range(n)]


async def test_forty_turns_compact_flush_offload_and_a_second_run_remembers(ws: Workspace) -> None:
    session = MemdirSession(
        "chat-1", ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10)
    )
    added = recording(session)
    # response_id=None: a chat-completions-style model, for which the SDK never calls
    # run_compaction; the session compacts by itself.
    model = ScriptedModel(steps(tool_then_answer(), 80, response_id=None))
    agent = Agent(name="clerk", model=model, tools=[lookup])
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    for turn in range(40):
        await Runner.run(
            agent,
            f"Turn {turn}: check shelf-{turn}. Remember: the codename of release {turn} is "
            f"{CODENAMES[turn]}.",
            session=session,
            run_config=config,
        )
    await session.aclose()
    model.assert_complete()

    # every item the SDK added is in the log, in order, whatever compaction did
    assert len(added) == 160
    assert logged_items(ws, "chat-1") == added
    # compaction fired, with the four sections, and the window stayed small
    result = session.last_compaction
    assert result is not None and "summary" in result.stages
    for section in SUMMARY_SECTIONS:
        assert section in result.summary
    window = await session.get_items()
    assert len(window) < 40
    assert window[0]["role"] == "user" and "<summary>" in window[0]["content"]
    # no model call saw a call without its output or an output without its call
    assert all(pairing_ok(call.input) for call in model.calls)
    assert pairing_ok(window)
    # the summarised turns were flushed to the ledger first
    ledger = "".join(p.read_text() for p in (ws.root / "memory").glob("*.md"))
    assert "Orchid0" in ledger and "Orchid5" in ledger
    # the session reopened from its log holds the same window
    again = MemdirSession("chat-1", ws)
    assert await again.get_items() == window

    # a second conversation finds what the first one said, with memdir's tools
    def search_then_answer(call: Any) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(last["output"])]
        return [function_call("memory_search", {"query": "codename release 3"}, call_id="s1")]

    second = MemdirSession("chat-2", ws)
    model2 = ScriptedModel(steps(search_then_answer, 2))
    agent2 = Agent(name="clerk", model=model2, tools=memdir_function_tools(ws))
    reply = await Runner.run(agent2, "What was the codename of release 3?", session=second)
    assert "Orchid3" in reply.final_output
    assert "memory/" in reply.final_output  # a citable location


async def test_a_long_run_is_compacted_between_its_model_calls(ws: Workspace) -> None:
    session = MemdirSession(
        "long", ws, compaction=CompactionConfig(trigger_messages=30, keep_messages=10)
    )
    sizes: list[int] = []

    def keep_calling(call: Any) -> list[Any]:
        sizes.append(len(call.input))
        if len(sizes) == 45:
            return [assistant_message("All 44 shelves checked.")]
        return [function_call("lookup", {"key": f"shelf-{len(sizes)}"}, call_id=f"c{len(sizes)}")]

    model = ScriptedModel(steps(keep_calling, 45))
    agent = Agent(name="clerk", model=model, tools=[lookup])
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    result = await Runner.run(
        agent, "Check every shelf.", session=session, run_config=config, max_turns=60
    )
    assert result.final_output == "All 44 shelves checked."
    # without the window the 45th call would carry 89 items
    assert max(sizes) <= 31 and sizes[-1] < 31
    assert all(pairing_ok(call.input) for call in model.calls)
    assert any("<summary>" in str(call.input[0]) for call in model.calls[-5:])
    assert len(logged_items(ws, "long")) == 1 + 44 * 2 + 1


async def test_pop_and_clear_are_markers_and_survive_a_reopen(ws: Workspace) -> None:
    session = MemdirSession("pc", ws, compaction=None, memory_flush=False)
    items = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "second"},
        {"role": "user", "content": "third"},
    ]
    await session.add_items(items)
    before = session.log.path.read_bytes()
    assert await session.pop_item() == items[2]
    after = session.log.path.read_bytes()
    assert after.startswith(before)  # nothing deleted or rewritten
    assert await session.get_items() == items[:2]
    assert await MemdirSession("pc", ws).get_items() == items[:2]
    assert await session.get_items(limit=1) == items[1:2]

    await session.clear_session()
    assert await session.get_items() == []
    assert await MemdirSession("pc", ws).get_items() == []
    assert session.log.path.read_bytes().startswith(after)
    ops = [
        r.msg.metadata[MARKER_KEY]["op"]
        for r in session.log.read().records
        if MARKER_KEY in r.msg.metadata
    ]
    assert ops == ["pop", "clear"]
    assert logged_items(ws, "pc") == items
    assert await session.pop_item() is None
    await session.add_items([{"role": "user", "content": "fresh start"}])
    assert await MemdirSession("pc", ws).get_items() == [{"role": "user", "content": "fresh start"}]


async def test_no_compaction_while_a_tool_call_waits_for_its_output(ws: Workspace) -> None:
    session = MemdirSession(
        "wait", ws, compaction=CompactionConfig(trigger_messages=4, keep_messages=2)
    )
    history: list[Any] = []
    for n in range(3):
        history += [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    call = {"type": "function_call", "call_id": "pending", "name": "lookup", "arguments": "{}"}
    await session.add_items([*history, call])
    assert session.last_compaction is None  # the call has no output yet
    output = {"type": "function_call_output", "call_id": "pending", "output": "42"}
    await session.add_items([output])
    assert session.last_compaction is not None
    window = await session.get_items()
    assert window[-2:] == [call, output]


async def test_run_compaction_forced_by_the_sdk(ws: Workspace) -> None:
    session = MemdirSession("force", ws, memory_flush=False)
    items = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"m{n}: " + "detail " * 40}
        for n in range(30)
    ]
    await session.add_items(items)
    assert session.last_compaction is None  # under memdir's default triggers
    await session.run_compaction({"response_id": "resp-1", "force": True})
    assert session.last_compaction is not None
    window = await session.get_items()
    assert "<summary>" in window[0]["content"]
    assert logged_items(ws, "force") == items


async def test_huge_tool_output_goes_to_a_file_and_the_model_sees_a_preview(
    ws: Workspace,
) -> None:
    big = "row,value\n" + "".join(f"{n},{n * 7}\n" for n in range(20_000))

    @function_tool
    def export() -> str:
        """Export the table."""
        return big

    seen: list[Any] = []

    def export_then_answer(call: Any) -> list[Any]:
        seen.append(call.input)
        if call.input[-1].get("type") == "function_call_output":
            return [assistant_message("exported")]
        return [function_call("export", {}, call_id="exp-1")]

    session = MemdirSession("big", ws, memory_flush=False)
    model = ScriptedModel(steps(export_then_answer, 2))
    agent = Agent(name="clerk", model=model, tools=[export, *memdir_function_tools(ws)])
    config = RunConfig(call_model_input_filter=memdir_input_filter(session=session))
    await Runner.run(agent, "Export it", session=session, run_config=config)
    sent = seen[1][-1]["output"]
    assert len(sent) < 10_000 and "large_tool_results/" in sent
    files = list((ws.root / "large_tool_results").rglob("*.txt"))
    assert len(files) == 1 and files[0].read_text() == big
    stored = [i for i in await session.get_items() if i.get("type") == "function_call_output"]
    assert stored[0]["output"] == sent


async def test_filter_puts_memory_in_the_instructions(ws: Workspace) -> None:
    (ws.root / "MEMORY.md").write_text("# Preferences\n- The user prefers metric units.\n")
    model = ScriptedModel([[assistant_message("ok")]])
    agent = Agent(name="clerk", instructions="Be brief.", model=model)
    config = RunConfig(call_model_input_filter=memdir_input_filter(ws))
    await Runner.run(agent, "hello", run_config=config)
    instructions = model.calls[0].system_instructions or ""
    assert instructions.startswith("Be brief.")
    assert "<memory_context" in instructions and "prefers metric units" in instructions
    assert "memory_search" in instructions


async def test_tools_report_errors_to_the_model(ws: Workspace) -> None:
    tools = {t.name: t for t in memdir_function_tools(ws)}
    assert set(tools) == {"memory_search", "memory_get", "memory_add", "read_file"}
    assert "memory_add" not in {t.name for t in memdir_function_tools(ws, memory_add=False)}

    def add_then_get(call: Any) -> list[Any]:
        outputs = [i for i in call.input if i.get("type") == "function_call_output"]
        if len(outputs) == 2:
            return [assistant_message(outputs[0]["output"] + " | " + outputs[1]["output"])]
        if outputs:
            return [function_call("memory_get", {"path": "../etc/passwd"}, call_id="g")]
        return [function_call("memory_add", {"text": "The office moved to Lyon."}, call_id="a")]

    model = ScriptedModel(steps(add_then_get, 3))
    reply = await Runner.run(Agent(name="c", model=model, tools=list(tools.values())), "go")
    assert "Saved 1 bullet to memory/" in reply.final_output
    assert "Error:" in reply.final_output
    assert "Lyon" in "".join(p.read_text() for p in (ws.root / "memory").glob("*.md"))


def test_bad_settings_are_config_errors(ws: Workspace) -> None:
    with pytest.raises(ConfigError, match="CompactionConfig"):
        MemdirSession("s", ws, compaction={"trigger_messages": 5})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ToolResultEvictionConfig"):
        MemdirSession("s", ws, tool_result_eviction=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ChatModel"):
        MemdirSession("s", ws, model=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="workspace or a MemdirSession"):
        memdir_input_filter()
    with pytest.raises(ConfigError):
        ToolResultEvictionConfig(max_result_chars=0)
