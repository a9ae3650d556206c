"""memdir inside a real AgentScope 2.x agent: MemdirMiddleware and MemdirOffloader.

A scripted AgentScope chat model (a ``ChatModelBase`` whose replies are computed from the
request, formatted by AgentScope's own OpenAI formatter) drives the real ``Agent`` loop, offline.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent, ContextConfig
from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from agentscope.message import (
    Msg as AsMsg,
)
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from pydantic import BaseModel

from memdir import Workspace
from memdir.adapters.agentscope import (
    MemdirMiddleware,
    MemdirOffloader,
    from_memdir,
    memdir_session_id,
    to_memdir,
)
from memdir.compaction import CompactionConfig
from memdir.messages import dangling_tool_calls
from memdir.sessions import SessionLog
from memdir.tools._core import close_shared_indexes

TURNS = 40
SECRET = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ"
Reply = Callable[[list[dict[str, Any]]], ChatResponse]


class _Credential(CredentialBase):
    pass


class ScriptedModel(ChatModelBase):
    """An AgentScope chat model whose answer is ``reply(wire)``: the request as AgentScope's
    OpenAI formatter renders it (so the context must be a valid request every time)."""

    class Parameters(BaseModel):
        pass

    def __init__(self, reply: Reply, *, context_size: int = 128_000) -> None:
        super().__init__(
            credential=_Credential(),
            model="scripted",
            parameters=self.Parameters(),
            stream=False,
            context_size=context_size,
        )
        self.formatter = OpenAIChatFormatter()
        self.reply = reply
        self.wires: list[list[dict[str, Any]]] = []

    async def _call_api(
        self,
        model_name: str,
        messages: list[AsMsg],
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        wire = await self.formatter.format(messages)
        self.wires.append(wire)
        return self.reply(wire)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _last_user(wire: list[dict[str, Any]]) -> str:
    return next(
        _text(m)
        for m in reversed(wire)
        if m["role"] == "user"
        and "<memory_recall>" not in _text(m)
        and "system-reminder" not in _text(m)
    )


def _answer(text: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=text)], is_last=True)


def _call(call_id: str, name: str, args: dict[str, Any], text: str = "") -> ChatResponse:
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    blocks.append(ToolCallBlock(id=call_id, name=name, input=json.dumps(args)))
    return ChatResponse(content=blocks, is_last=True)


def first_run_reply(wire: list[dict[str, Any]]) -> ChatResponse:
    """Each user turn: one lookup tool call, then an answer quoting the tool's result."""
    last = wire[-1]
    if last["role"] == "tool":
        return _answer(f"Checked: {_text(last)[:60]}")
    n = int(re.search(r"service-(\d+)", _last_user(wire)).group(1))  # type: ignore[union-attr]
    return _call(f"call-{n}", "lookup", {"service": f"service-{n}"}, f"Looking up service-{n}.")


def lookup(service: str) -> str:
    """Look up a service's health.

    Args:
        service: the service name.
    """
    return f"{service} is healthy; token {SECRET}; " + "probe ok " * 150


def allowed(fn: Callable[..., Any]) -> FunctionTool:
    return FunctionTool(
        fn, permission=PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    )


def check_pairing(wire: list[dict[str, Any]]) -> None:
    """Every tool call of the request has its result after it, and every result its call."""
    open_calls: set[str] = set()
    for message in wire:
        if message["role"] == "assistant":
            assert not open_calls, f"results missing before the next assistant turn: {open_calls}"
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a result without its call"
            open_calls.discard(message["tool_call_id"])
    assert not open_calls


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws", tz="UTC")
    yield workspace
    close_shared_indexes()


async def make_agent(
    ws: Workspace, reply: Reply, **kw: Any
) -> tuple[Agent, MemdirMiddleware, ScriptedModel]:
    memory = MemdirMiddleware(ws, **kw)
    model = ScriptedModel(reply)
    toolkit = Toolkit(tools=[allowed(lookup), *await memory.list_tools()])
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        toolkit=toolkit,
        middlewares=[memory],
        offloader=MemdirOffloader(ws),
    )
    return agent, memory, model


async def test_a_forty_turn_run_compacts_losing_nothing_and_a_second_run_remembers(ws: Workspace):
    compaction = CompactionConfig(trigger_messages=30, keep_messages=10)
    agent, memory, model = await make_agent(ws, first_run_reply, compaction=compaction)
    events: list[str] = []
    assert memory.compactor is not None
    memory.compactor.add_listener(lambda event: events.append(event.kind))
    for n in range(1, TURNS + 1):
        reply = await agent.reply(
            UserMsg(name="user", content=f"Remember that service-{n} runs on port {8000 + n}.")
        )
        assert (reply.get_text_content() or "").startswith(f"Checked: service-{n} is healthy")
    assert events.count("compaction.completed") >= 3 and "compaction.failed" not in events

    # The model never saw a split tool pair, and the context it ended with has none either.
    for wire in model.wires:
        check_pairing(wire)
    assert dangling_tool_calls(to_memdir(agent.state.context)) == []

    # The summary has memdir's four sections and names the log lines it stands for.
    summary = agent.state.summary
    for heading in ("## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS"):
        assert heading in summary
    sid = memdir_session_id(agent.state.session_id)
    assert f"sessions/{sid}.log.jsonl, lines 1-" in summary
    assert len(agent.state.context) < 12  # the context stays small

    # The session log holds every message of the run: each request, call, result and answer.
    logged = from_memdir(SessionLog(ws, sid).messages())
    texts = [b.text for m in logged for b in m.content if isinstance(b, TextBlock)]
    calls = {
        b.id: json.loads(b.input) for m in logged for b in m.content if isinstance(b, ToolCallBlock)
    }
    results = {b.id: b for m in logged for b in m.content if isinstance(b, ToolResultBlock)}
    for n in range(1, TURNS + 1):
        assert f"Remember that service-{n} runs on port {8000 + n}." in texts
        assert f"Looking up service-{n}." in texts
        assert calls[f"call-{n}"] == {"service": f"service-{n}"}
        output = results[f"call-{n}"].output
        out_text = output if isinstance(output, str) else "".join(p.text for p in output)
        assert out_text.startswith(f"service-{n} is healthy; token [REDACTED:")
        assert any(t.startswith(f"Checked: service-{n} is healthy") for t in texts)
    assert SECRET not in (ws.root / "sessions" / f"{sid}.log.jsonl").read_text()
    ids = [m.id for m in SessionLog(ws, sid).messages()]
    assert len(ids) == len(set(ids))

    # The ledger got the facts, once each, and no recalled memory was flushed back into it.
    ledger = "".join(p.read_text() for p in (ws.root / "memory").glob("*.md"))
    for n in range(1, TURNS + 1):
        assert ledger.count(f"service-{n} runs on port {8000 + n}.") == 1
    assert "memory_recall" not in ledger

    # A second run (new agent, new session) remembers: recall hints it, memory_search finds it.
    def second_run_reply(wire: list[dict[str, Any]]) -> ChatResponse:
        last = wire[-1]
        if last["role"] == "tool":
            port = re.search(r"service-7 runs on port (\d+)", _text(last))
            return _answer(f"service-7 uses port {port.group(1) if port else 'unknown'}.")
        return _call("search-1", "memory_search", {"query": "service-7 port"})

    agent2, _, model2 = await make_agent(ws, second_run_reply)
    assert agent2.state.session_id != agent.state.session_id
    answer = await agent2.reply(UserMsg(name="user", content="Which port does service-7 use?"))
    assert answer.get_text_content() == "service-7 uses port 8007."
    recalled = [m for m in model2.wires[0] if "<memory_recall>" in _text(m)]
    assert recalled and "service-7 runs on port 8007" in _text(recalled[0])


async def test_memory_md_is_in_the_system_prompt_and_the_tools_are_allowed(ws: Workspace):
    ws.write_text("MEMORY.md", "# Memory\n\n## Decisions\n- Deploys happen on Tuesdays.\n")

    def reply(wire: list[dict[str, Any]]) -> ChatResponse:
        if wire[-1]["role"] == "tool":
            return _answer(_text(wire[-1]))
        return _call("add-1", "memory_add", {"text": "The release manager is Priya."})

    agent, memory, model = await make_agent(ws, reply, recall=False)
    answer = await agent.reply(UserMsg(name="user", content="Note the release manager."))
    system = model.wires[0][0]
    assert system["role"] == "system" and _text(system).startswith("You are Friday.")
    assert "[MEMORY.md#L3-L4]\n## Decisions\n- Deploys happen on Tuesdays." in _text(system)
    assert "memory_search" in _text(system)
    assert (answer.get_text_content() or "").startswith("Saved 1 bullet to memory/")
    assert {t.name for t in await memory.list_tools()} == {
        "memory_search",
        "memory_get",
        "memory_add",
        "read_file",
    }


async def test_a_failed_summary_leaves_the_context_as_it_was(ws: Workspace):
    class Broken:
        context_window = None

        async def generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("summary model down")

    compaction = CompactionConfig(trigger_messages=6, keep_messages=2, model=Broken())  # type: ignore[arg-type]
    agent, memory, _ = await make_agent(
        ws, first_run_reply, compaction=compaction, memory_flush=False
    )
    events: list[str] = []
    assert memory.compactor is not None
    memory.compactor.add_listener(lambda event: events.append(event.kind))
    for n in range(1, 5):
        await agent.reply(
            UserMsg(name="user", content=f"Remember that service-{n} runs on port {8000 + n}.")
        )
    assert "compaction.failed" in events and "compaction.completed" not in events
    assert agent.state.summary == ""
    texts = [b.text for m in agent.state.context for b in m.content if isinstance(b, TextBlock)]
    for n in range(1, 5):
        assert f"Remember that service-{n} runs on port {8000 + n}." in texts


async def test_agentscope_truncation_offloads_the_tool_result_to_large_tool_results(ws: Workspace):
    def reply(wire: list[dict[str, Any]]) -> ChatResponse:
        if wire[-1]["role"] == "tool":
            return _answer("done")
        return _call("big-1", "lookup", {"service": "service-1"})

    memory = MemdirMiddleware(ws, compaction=None)
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=ScriptedModel(reply),
        toolkit=Toolkit(tools=[allowed(lookup)]),
        middlewares=[memory],
        offloader=MemdirOffloader(ws),
        context_config=ContextConfig(tool_result_limit=50),
    )
    await agent.reply(UserMsg(name="user", content="Check service-1."))
    files = list(
        (ws.root / "large_tool_results" / memdir_session_id(agent.state.session_id)).glob(
            "big-1-*.txt"
        )
    )
    assert len(files) == 1
    stored = files[0].read_text()
    assert "probe ok" in stored and SECRET not in stored
    kept = next(b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock))
    assert str(files[0]) in "".join(p.text for p in kept.output if isinstance(p, TextBlock))


async def test_the_offloader_appends_context_once_and_stores_data(ws: Workspace):
    offloader = MemdirOffloader(ws)
    png = base64.b64encode(b"\x89PNG fake image").decode()
    msgs = [
        UserMsg(
            name="user",
            content=[
                TextBlock(text=f"my key is {SECRET}"),
                DataBlock(source=Base64Source(data=png, media_type="image/png")),
            ],
        ),
        AssistantMsg(name="Friday", content="Got it."),
    ]
    path = await offloader.offload_context("s-1", msgs)
    assert path == str(ws.root / "sessions" / "s-1.log.jsonl")
    await offloader.offload_context("s-1", msgs)  # again: nothing is written twice
    log = SessionLog(ws, "s-1").messages()
    assert [m.role for m in log] == ["user", "assistant"]
    raw = Path(path).read_text()
    assert SECRET not in raw and png not in raw
    back = from_memdir(log)
    image = back[0].content[1]
    assert isinstance(image, DataBlock) and isinstance(image.source, URLSource)
    stored = ws.root / str(image.source.url).removeprefix("workspace:///")
    assert stored.read_bytes() == b"\x89PNG fake image"

    block = await offloader.offload_data_block(
        DataBlock(source=Base64Source(data=png, media_type="image/png"))
    )
    assert str(block.source.url).startswith("workspace:///large_tool_results/data/")  # type: ignore[union-attr]
    same = await offloader.offload_tool_result(
        "s-1", ToolResultBlock(id="c/1", name="t", output="x" * 10)
    )
    again = await offloader.offload_tool_result(
        "s-1", ToolResultBlock(id="c/1", name="t", output="x" * 10)
    )
    assert same == again and Path(same).read_text() == "x" * 10
    assert Path(same).parent == ws.root / "large_tool_results" / "s-1"


def test_session_ids_map_to_valid_memdir_ids():
    assert memdir_session_id("a1b2c3") == "a1b2c3"
    mapped = memdir_session_id("user 42/../x")
    assert mapped.startswith("agentscope-") and mapped == memdir_session_id("user 42/../x")
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,128}", mapped)


def test_converted_times_are_aware():
    msg = UserMsg(name="user", content="hi")
    (segment,) = to_memdir([msg])
    assert segment.created_at.tzinfo is not None
    assert segment.created_at == datetime.fromisoformat(msg.created_at).astimezone().astimezone(UTC)


async def test_the_compression_tool_compacts_without_losing_its_own_call(ws: Workspace):
    """AgentScope's CompressContext tool compresses from inside its own call: memdir compacts
    what came before and the call still gets its result."""

    def reply(wire: list[dict[str, Any]]) -> ChatResponse:
        results = [m for m in wire if m["role"] == "tool"]
        if results and _text(results[-1]) == "Context compressed successfully.":
            return _answer("Result: Context compressed successfully.")  # (a reminder may follow)
        if wire[-1]["role"] == "tool":
            return _answer(f"Result: {_text(wire[-1])[:40]}")
        n = int(re.search(r"service-(\d+)", _last_user(wire)).group(1))  # type: ignore[union-attr]
        if n == 6:
            return _call("compress-1", "CompressContext", {})
        return _call(f"call-{n}", "lookup", {"service": f"service-{n}"})

    memory = MemdirMiddleware(
        ws, compaction=CompactionConfig(trigger_messages=500, keep_messages=4)
    )
    model = ScriptedModel(reply)
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        toolkit=Toolkit(tools=[allowed(lookup)]),
        middlewares=[memory],
        context_config=ContextConfig(compression_tool_enabled=True),
    )
    for n in range(1, 7):
        last = await agent.reply(
            UserMsg(name="user", content=f"Remember that service-{n} runs on port {8000 + n}.")
        )
    assert last.get_text_content() == "Result: Context compressed successfully."
    assert "## SESSION INTENT" in agent.state.summary
    for wire in model.wires:
        check_pairing(wire)
    assert dangling_tool_calls(to_memdir(agent.state.context)) == []
