"""Responses items <-> memdir Msg: lossless round trips and tool pairing (Hypothesis)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir.adapters.openai_agents import item_to_msg, items_to_msgs, msg_to_items, msgs_to_items
from memdir.adapters.openai_agents._convert import mask_skeleton
from memdir.messages import (
    MessageFormatError,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    dangling_tool_calls,
)
from memdir.redact import redact

text = st.text(max_size=40)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ident, inner, max_size=3),
    max_leaves=8,
)
args = st.dictionaries(ident, json_value, max_size=4)


@st.composite
def message_item(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "system", "developer", "assistant"]))
    if draw(st.booleans()):
        item: dict[str, Any] = {"role": role, "content": draw(text)}
    else:
        kind = "output_text" if role == "assistant" else "input_text"
        parts: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(0, 3))):
            choice = draw(st.integers(0, 3))
            if choice == 0:
                parts.append({"type": kind, "text": draw(text)})
            elif choice == 1 and role == "assistant":
                parts.append({"type": "refusal", "refusal": draw(text)})
            elif choice == 2:
                parts.append(
                    {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"}
                )
            else:
                parts.append({"type": "input_file", "file_id": draw(ident)})
        item = {"type": "message", "role": role, "content": parts}
        if role == "assistant":
            item |= {"id": draw(ident), "status": "completed"}
    return item


@st.composite
def call_pair(draw: st.DrawFn) -> list[dict[str, Any]]:
    call_id = draw(ident)
    kind = draw(st.sampled_from(["function", "custom", "shell"]))
    if kind == "function":
        spelled = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
        arguments = (
            json.dumps(draw(args), separators=spelled, ensure_ascii=draw(st.booleans()))
            if draw(st.integers(0, 5))
            else draw(text)  # not JSON at all
        )
        call = {
            "type": "function_call",
            "call_id": call_id,
            "name": draw(ident),
            "arguments": arguments,
        }
        if draw(st.booleans()):
            call["id"] = "fc_" + call_id
        output: Any = (
            draw(text)
            if draw(st.booleans())
            else [
                {"type": "input_text", "text": draw(text)},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ]
        )
        result = {"type": "function_call_output", "call_id": call_id, "output": output}
    elif kind == "custom":
        call = {
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": draw(ident),
            "input": draw(text),
        }
        result = {"type": "custom_tool_call_output", "call_id": call_id, "output": draw(text)}
    else:
        call = {"type": "shell_call", "call_id": call_id, "action": {"commands": [draw(text)]}}
        result = {
            "type": "shell_call_output",
            "call_id": call_id,
            "output": [
                {"stdout": draw(text), "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
        }
    return [call, result]


reasoning = st.builds(
    lambda rid, summary, enc: {
        "type": "reasoning",
        "id": rid,
        "summary": [{"type": "summary_text", "text": s} for s in summary],
        **({"encrypted_content": enc} if enc else {}),
    },
    ident,
    st.lists(text, max_size=2),
    st.none() | ident,
)
other = st.builds(
    lambda i, q: {
        "type": "web_search_call",
        "id": i,
        "status": "completed",
        "action": {"query": q},
    },
    ident,
    text,
)


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        pick = draw(st.integers(0, 3))
        if pick == 0:
            items.append(draw(message_item()))
        elif pick == 1:
            items.extend(draw(call_pair()))
        elif pick == 2:
            items.append(draw(reasoning))
        else:
            items.append(draw(other))
    return items


@given(conversation())
def test_items_round_trip_through_msg(items: list[dict[str, Any]]) -> None:
    msgs = items_to_msgs(items)
    assert len(msgs) == len(items)
    assert msgs_to_items(msgs) == items
    # and through the JSON form a session log stores
    assert (
        msgs_to_items([Msg.from_dict(json.loads(json.dumps(m.to_dict()))) for m in msgs]) == items
    )


@given(conversation())
def test_tool_calls_and_outputs_stay_paired(items: list[dict[str, Any]]) -> None:
    msgs = items_to_msgs(items)
    assert dangling_tool_calls(msgs) == []
    calls = {c.id for m in msgs for c in m.tool_uses}
    results = {r.tool_use_id for m in msgs for r in m.tool_results}
    assert calls == results
    # a conversation missing an output shows the dangling call
    if msgs and any(m.tool_uses for m in msgs):
        last_call = next(i for i in reversed(items) if i.get("call_id") and "output" not in i)
        without = [
            i
            for i in items
            if not (i.get("call_id") == last_call["call_id"] and i is not last_call)
        ]
        assert [c.id for c in dangling_tool_calls(items_to_msgs(without))] == [last_call["call_id"]]


@given(st.lists(st.tuples(ident, ident, args, text), max_size=4), text)
def test_memdir_messages_become_items_and_back(calls: list[Any], answer: str) -> None:
    """memdir's own messages (no skeleton) keep their text, calls and results."""
    msgs: list[Msg] = [Msg.user("question")]
    seen: set[str] = set()
    for call_id, name, arguments, output in calls:
        if call_id in seen:
            continue
        seen.add(call_id)
        msgs.append(
            Msg.assistant(tool_calls=[ToolUseBlock(id=call_id, name=name, input=arguments)])
        )
        msgs.append(Msg.tool_result(call_id, output))
    msgs.append(Msg.assistant(answer))
    back = items_to_msgs(msgs_to_items(msgs))
    assert [m.role for m in back] == [m.role for m in msgs]
    assert [m.text for m in back] == [m.text for m in msgs]
    assert [m.tool_uses for m in back] == [m.tool_uses for m in msgs]
    assert [[(r.tool_use_id, r.text) for r in m.tool_results] for m in back] == [
        [(r.tool_use_id, r.text) for r in m.tool_results] for m in msgs
    ]


def test_text_that_memdir_changed_comes_back_in_the_same_item() -> None:
    item = {"type": "function_call_output", "call_id": "c1", "output": "x" * 1000, "id": "o1"}
    msg = item_to_msg(item)
    shorter = msg.with_content([ToolResultBlock(tool_use_id="c1", output="[cleared]")])
    assert msg_to_items(shorter) == [
        {"type": "function_call_output", "call_id": "c1", "output": "[cleared]", "id": "o1"}
    ]
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    edited = item_to_msg(message).with_content([TextBlock(text="hello")])
    assert msg_to_items(edited) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    ]


def test_secrets_in_kept_items_are_masked_for_the_log() -> None:
    key = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"
    item = {"type": "web_search_call", "id": "ws1", "action": {"query": f"is {key} valid"}}
    masked = msg_to_items(mask_skeleton(item_to_msg(item), redact))[0]
    assert key not in json.dumps(masked) and masked["id"] == "ws1"
    assert "[REDACTED" in masked["action"]["query"]


def test_malformed_items_are_message_format_errors() -> None:
    with pytest.raises(MessageFormatError, match="unknown role"):
        item_to_msg({"role": "robot", "content": "beep"})
    with pytest.raises(MessageFormatError, match="dict"):
        item_to_msg("hello")  # type: ignore[arg-type]
    with pytest.raises(MessageFormatError, match="list"):
        items_to_msgs({"role": "user", "content": "x"})  # type: ignore[arg-type]
    # a call without an id is kept whole, never dropped
    odd = {"type": "function_call", "name": "f", "arguments": "{}"}
    assert msg_to_items(item_to_msg(odd)) == [odd]
