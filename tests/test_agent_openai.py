"""HarnessAgent over the real OpenAI adapter against a hand-written server (MockTransport)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from memdir.agent import ContextOverflowEvent, HarnessAgent
from memdir.compaction import CompactionConfig
from memdir.models import OpenAIChatModel
from memdir.workspace import Workspace

SUMMARY = (
    "## SESSION INTENT\nChat.\n## SUMMARY\nEarlier turns.\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
)


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764493200,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def _tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }


def _model(handler: Any) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel(
        "gpt-4o-mini", base_url="http://llm.test/v1", api_key="sk-test", client=client
    )


async def test_tool_calls_through_the_openai_adapter(ws: Workspace) -> None:
    ws.write_text("MEMORY.md", "## Decisions\n- 2026-11-02: we chose PostgreSQL for the ledger.\n")
    requests: list[dict[str, Any]] = []

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"{city}: 12°C, rain"

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        if len(requests) == 1:
            calls = [
                _tool_call("call_mem", "memory_search", {"query": "PostgreSQL"}),
                _tool_call("call_wx", "get_weather", {"city": "北京"}),
            ]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            return httpx.Response(200, json=_completion(message, "tool_calls"))
        answer = "We chose PostgreSQL (Source: MEMORY.md#L2). 北京 is rainy."
        return httpx.Response(
            200, json=_completion({"role": "assistant", "content": answer}, "stop")
        )

    agent = HarnessAgent(
        name="Ops",
        model=_model(handler),
        workspace=ws,
        tools=[get_weather],
        memory_flush=False,
        maintenance=None,
    )
    reply = await agent.call("Which database did we pick, and how is the weather in 北京?")
    await agent.close()

    assert reply.text.startswith("We chose PostgreSQL")
    first, second = requests
    names = [t["function"]["name"] for t in first["tools"]]
    assert {"memory_search", "memory_get", "memory_add", "read_file", "get_weather"} <= set(names)
    system = first["messages"][0]
    assert system["role"] == "system" and "<memory_context" in system["content"]
    assert "we chose PostgreSQL" in system["content"]
    tool_msgs = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert set(tool_msgs) == {"call_mem", "call_wx"}
    assert "MEMORY.md#L2" in str(tool_msgs["call_mem"])
    assert "北京: 12°C, rain" in str(tool_msgs["call_wx"])
    assert [m.role for m in agent.history()] == ["user", "assistant", "tool", "assistant"]


async def test_provider_overflow_error_is_recovered(ws: Workspace) -> None:
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        turns = [m for m in body["messages"] if m["role"] != "system"]
        if "You are compacting the history" in json.dumps(body["messages"]):
            return httpx.Response(
                200, json=_completion({"role": "assistant", "content": SUMMARY}, "stop")
            )
        seen.append(len(turns))
        if sum(len(str(m.get("content"))) for m in turns) > 3_000:
            error = {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            }
            return httpx.Response(400, json=error)
        return httpx.Response(200, json=_completion({"role": "assistant", "content": "ok"}, "stop"))

    overflows: list[ContextOverflowEvent] = []
    agent = HarnessAgent(
        model=_model(handler),
        workspace=ws,
        compaction=CompactionConfig(trigger_messages=0, trigger_tokens=0, keep_messages=2),
        memory_flush=False,
        maintenance=None,
        workspace_context=False,
    )
    agent.add_hook(overflows.append, events=(ContextOverflowEvent,))
    for i in range(4):
        assert (await agent.call(f"turn {i}: " + "a long question. " * 50)).text == "ok"
    assert [(e.attempt, e.recovered) for e in overflows] == [(1, True)]
    assert seen[-2] == 7 and seen[-1] < 7
