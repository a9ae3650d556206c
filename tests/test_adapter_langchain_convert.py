"""LangChain messages <-> memdir Msg: lossless round trips and tool pairing (Hypothesis)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memdir.adapters.langchain import MESSAGE_KEY, from_langchain, to_langchain
from memdir.messages import (
    SUMMARY_NAME,
    MessageFormatError,
    MissingToolCallIdError,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    dangling_tool_calls,
)

TEXT = st.text(max_size=40)
SHORT = st.text(max_size=7)  # metadata strings: never long enough to look like a block's text
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), SHORT)
JSON = st.recursive(
    JSON_SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
KWARGS = st.dictionaries(st.sampled_from(["refusal", "x_extra", "lc_source"]), JSON, max_size=2)
IDS = st.one_of(st.none(), st.uuids().map(str))
B64 = st.binary(min_size=1, max_size=12).map(lambda b: b.hex())
URL = st.sampled_from(["https://example.com/a.png", "http://x/y.jpg"])

TEXT_PART = st.one_of(
    TEXT,
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(
        lambda t, extra: {"type": "text", "text": t, "cache_control": extra},
        TEXT,
        st.just({"type": "ephemeral"}),
    ),
)
IMAGE_PART = st.one_of(
    st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, URL),
    st.builds(lambda u: {"type": "image_url", "image_url": {"url": u, "detail": "low"}}, URL),
    st.builds(lambda u: {"type": "image_url", "image_url": u}, URL),
    st.builds(lambda u: {"type": "image", "url": u}, URL),
    st.builds(lambda b: {"type": "image", "base64": b, "mime_type": "image/png"}, B64),
    st.builds(
        lambda b: {"type": "image", "source_type": "base64", "data": b, "mime_type": "image/png"},
        B64,
    ),
    st.builds(
        lambda b: {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b},
        },
        B64,
    ),
)
REASONING_PART = st.one_of(
    st.builds(lambda t: {"type": "reasoning", "reasoning": t}, TEXT),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, TEXT, TEXT),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, B64),
)
OTHER_PART = st.builds(lambda v: {"type": "citation", "value": v}, JSON)


def content(*parts: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(TEXT, st.lists(st.one_of(*parts), max_size=4))


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """A conversation of every message type, every AI tool call answered by a ToolMessage."""
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(content(TEXT_PART, OTHER_PART)), id=draw(IDS)))
    calls = 0
    for _ in range(draw(st.integers(1, 4))):
        out.append(
            HumanMessage(
                draw(content(TEXT_PART, IMAGE_PART, OTHER_PART)),
                id=draw(IDS),
                name=draw(st.one_of(st.none(), st.just("bob"))),
                additional_kwargs=draw(KWARGS),
            )
        )
        n_calls = draw(st.integers(0, 3))
        tool_calls = []
        for _ in range(n_calls):
            calls += 1
            tool_calls.append(
                {
                    "name": f"tool{calls % 2}",
                    "args": draw(st.dictionaries(SHORT, JSON, max_size=2)),
                    "id": f"call_{calls}",
                }
            )
        body = draw(content(TEXT_PART, IMAGE_PART, REASONING_PART, OTHER_PART))
        if tool_calls and isinstance(body, list) and draw(st.booleans()):  # Anthropic style
            call = tool_calls[0]
            body = [
                *body,
                {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]},
            ]
        out.append(
            AIMessage(
                body,
                tool_calls=tool_calls,
                id=draw(IDS),
                response_metadata=draw(st.dictionaries(st.just("model_name"), SHORT, max_size=1)),
                usage_metadata=draw(
                    st.one_of(
                        st.none(),
                        st.just({"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}),
                    )
                ),
            )
        )
        for call in tool_calls:
            out.append(
                ToolMessage(
                    draw(content(TEXT_PART, IMAGE_PART)),
                    tool_call_id=call["id"],
                    name=draw(st.one_of(st.none(), st.just(call["name"]))),
                    status=draw(st.sampled_from(["success", "error"])),
                    artifact=draw(st.one_of(st.none(), JSON)),
                    id=draw(IDS),
                )
            )
    if draw(st.booleans()):
        out.append(ChatMessage(role=draw(st.sampled_from(["developer", "critic"])), content="c"))
    return out


def dumped(messages: list[BaseMessage]) -> list[tuple[type, dict[str, Any]]]:
    return [(type(m), m.model_dump()) for m in messages]


SETTINGS = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@SETTINGS
@given(conversations())
def test_round_trip_through_msg_returns_the_same_conversation(messages: list[BaseMessage]) -> None:
    assert dumped(to_langchain(from_langchain(messages))) == dumped(messages)


@SETTINGS
@given(conversations())
def test_round_trip_survives_the_session_log_json(messages: list[BaseMessage]) -> None:
    msgs = from_langchain(messages)
    logged = [Msg.from_dict(json.loads(json.dumps(m.to_dict()))) for m in msgs]
    assert dumped(to_langchain(logged)) == dumped(messages)


@SETTINGS
@given(conversations())
def test_tool_calls_and_results_stay_paired_by_id(messages: list[BaseMessage]) -> None:
    msgs = from_langchain(messages)
    assert dangling_tool_calls(msgs) == []
    calls = [c for m in msgs for c in m.tool_uses]
    results = [r for m in msgs for r in m.tool_results]
    expected = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [(c.id, c.name, c.input) for c in calls] == [
        (c["id"], c["name"], c["args"]) for c in expected
    ]
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    assert [(r.tool_use_id, r.is_error) for r in results] == [
        (m.tool_call_id, m.status == "error") for m in tool_messages
    ]
    for index, msg in enumerate(msgs):  # each result comes after its call
        for result in msg.tool_results:
            assert any(c.id == result.tool_use_id for m in msgs[:index] for c in m.tool_uses)


@SETTINGS
@given(conversations())
def test_the_skeleton_never_repeats_the_text_of_a_block(messages: list[BaseMessage]) -> None:
    # The session log masks secrets in blocks; the skeleton must not hold a second copy.
    for msg in from_langchain(messages):
        skeleton = json.dumps(msg.metadata.get(MESSAGE_KEY, {}), ensure_ascii=False)
        for block in msg.content:
            text = block.text if isinstance(block, TextBlock) else None
            if isinstance(block, ToolResultBlock) and isinstance(block.output, str):
                text = block.output
            if text and len(text) >= 8 and not text.isspace():
                assert json.dumps(text, ensure_ascii=False)[1:-1] not in skeleton


def test_a_changed_tool_output_comes_back_with_the_new_text_in_the_original_message() -> None:
    original = ToolMessage(
        [{"type": "text", "text": "x" * 500}],
        tool_call_id="c1",
        name="grep",
        id="t1",
        status="error",
        artifact={"rows": 3},
    )
    (msg,) = from_langchain([original])
    result = msg.tool_results[0]
    evicted = msg.with_content([dataclasses.replace(result, output="[saved to a file]")])
    (back,) = to_langchain([evicted])
    assert isinstance(back, ToolMessage)
    assert back.content == "[saved to a file]"
    assert (back.tool_call_id, back.name, back.id, back.status, back.artifact) == (
        "c1",
        "grep",
        "t1",
        "error",
        {"rows": 3},
    )


def test_changed_text_keeps_the_shape_of_its_part() -> None:
    original = HumanMessage(
        [{"type": "text", "text": "old", "cache_control": {"type": "ephemeral"}}], id="h"
    )
    (msg,) = from_langchain([original])
    (back,) = to_langchain([msg.with_content([TextBlock(text="new")])])
    assert back.content == [{"type": "text", "text": "new", "cache_control": {"type": "ephemeral"}}]


def test_a_message_memdir_made_comes_back_as_itself() -> None:
    summary = Msg.user(
        "## SESSION INTENT\n- x",
        name=SUMMARY_NAME,
        metadata={"memdir.compaction": {"summarized": 4}},
    )
    synthetic = Msg(
        role="tool",
        content=(
            ToolResultBlock(tool_use_id="a", name="f", output="Error: lost", is_error=True),
            ToolResultBlock(tool_use_id="b", name="f", output="Error: lost", is_error=True),
        ),
        metadata={"memdir.synthetic": True},
    )
    call = Msg.assistant(
        None,
        tool_calls=[
            ToolUseBlock(id="a", name="f", input={}),
            ToolUseBlock(id="b", name="f", input={}),
        ],
    )
    back = to_langchain([summary, call, synthetic])
    assert [type(m) for m in back] == [HumanMessage, AIMessage, ToolMessage, ToolMessage]
    assert back[0].name == SUMMARY_NAME
    assert [m.tool_call_id for m in back[2:]] == ["a", "b"]
    again = from_langchain(back[:2])
    assert again[0] == summary  # id, time, name, text and memdir metadata all survive
    assert again[1].tool_uses == call.tool_uses and again[1].created_at == call.created_at


def test_bad_input_gives_one_line_errors() -> None:
    with pytest.raises(MissingToolCallIdError, match="no id"):
        from_langchain([AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}])])
    with pytest.raises(MessageFormatError, match=r"#0: FunctionMessage"):
        from_langchain([FunctionMessage(content="x", name="f")])
    with pytest.raises(MessageFormatError, match="list of messages"):
        from_langchain(HumanMessage("x"))  # type: ignore[arg-type]
    with pytest.raises(MessageFormatError, match="list of Msg"):
        to_langchain(Msg.user("x"))  # type: ignore[arg-type]
