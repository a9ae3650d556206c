"""AgentScope 2.x ``Msg`` <-> memdir ``Msg``: property tests (Hypothesis) and the edge cases."""

from __future__ import annotations

import json
from typing import Any

from agentscope.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)
from agentscope.message import (
    Msg as AsMsg,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.adapters.agentscope import META_KEY, from_memdir, to_memdir
from memdir.messages import Msg, ToolUseBlock, dangling_tool_calls
from memdir.messages import ToolResultBlock as MemdirResult

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ids = st.text("abcdef0123456789", min_size=6, max_size=12)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
base64_source = st.builds(
    Base64Source,
    data=st.sampled_from(["QUJD", "aGVsbG8=", ""]),
    media_type=st.sampled_from(["image/png", "audio/wav"]),
)
url_source = st.builds(
    URLSource,
    url=st.sampled_from(["https://example.com/a.png", "file:///tmp/b.jpg"]),
    media_type=st.just("image/jpeg"),
)
data_block = st.builds(DataBlock, source=base64_source | url_source, name=st.none() | text)
text_block = st.builds(TextBlock, text=text)
part = text_block | data_block


@st.composite
def tool_round(draw: st.DrawFn) -> list[Any]:
    """Thinking, text or hints, some tool calls, then their results (in any order)."""
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(
            HintBlock(hint=draw(text | st.lists(part, max_size=2)), source=draw(st.none() | text))
        )
    if draw(st.booleans()):
        extra = draw(
            st.sampled_from([{}, {"signature": "sig-1"}, {"redacted_thinking_data": "opaque"}])
        )
        blocks.append(ThinkingBlock(thinking=draw(text), **extra))
    if draw(st.booleans()):
        blocks.append(draw(text_block))
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        call_id = draw(ids)
        if any(c.id == call_id for c in calls):
            continue
        raw = draw(
            st.builds(json.dumps, st.dictionaries(text, json_value, max_size=3))
            | st.sampled_from(['{"a": 1}', '{"a":1}', "not json", "", "[1, 2]"])
        )
        calls.append(
            ToolCallBlock(
                id=call_id,
                name=draw(st.sampled_from(["lookup", "Bash"])),
                input=raw,
                state=draw(st.sampled_from(["pending", "allowed", "finished"])),
            )
        )
    blocks.extend(calls)
    for call in draw(st.permutations(calls)):
        blocks.append(
            ToolResultBlock(
                id=call.id,
                name=call.name,
                output=draw(text | st.lists(part, max_size=3)),
                state=draw(
                    st.sampled_from(["success", "error", "interrupted", "denied", "running"])
                ),
                metadata=draw(st.dictionaries(text, json_value, max_size=2)),
            )
        )
    return blocks


@st.composite
def assistant_msg(draw: st.DrawFn) -> AsMsg:
    blocks = [b for _ in range(draw(st.integers(0, 3))) for b in draw(tool_round())]
    if draw(st.booleans()):
        blocks.append(draw(text_block))
    return AsMsg(
        name=draw(st.sampled_from(["Friday", "helper"])),
        role="assistant",
        content=blocks,
        metadata=draw(st.dictionaries(text, json_value, max_size=2)),
        finished_reason=draw(
            st.none() | st.sampled_from(["error", "interrupted", "exceed_max_iters"])
        ),
    )


user_msg = st.builds(
    lambda name, content: AsMsg(name=name, role="user", content=content),
    st.sampled_from(["user", "alice"]),
    st.lists(part, max_size=3),
)
system_msg = st.builds(
    lambda t: AsMsg(name="system", role="system", content=[TextBlock(text=t)]), text
)
conversation = st.lists(user_msg | assistant_msg() | system_msg, max_size=6)


@settings(max_examples=150, deadline=None)
@given(conversation)
def test_a_round_trip_through_memdir_returns_the_same_conversation(msgs: list[AsMsg]):
    assert from_memdir(to_memdir(msgs)) == msgs


@settings(max_examples=150, deadline=None)
@given(conversation)
def test_the_round_trip_survives_the_session_log_json(msgs: list[AsMsg]):
    stored = [Msg.from_dict(json.loads(json.dumps(m.to_dict()))) for m in to_memdir(msgs)]
    assert from_memdir(stored) == msgs


@settings(max_examples=150, deadline=None)
@given(conversation)
def test_tool_calls_and_results_stay_paired(msgs: list[AsMsg]):
    converted = to_memdir(msgs)
    assert dangling_tool_calls(converted) == []
    seen: set[str] = set()
    for m in converted:
        for block in m.content:
            if isinstance(block, ToolUseBlock):
                seen.add(block.id)
            elif isinstance(block, MemdirResult):
                assert block.tool_use_id in seen  # every result comes after its call
        if m.role == "tool":
            assert all(isinstance(b, MemdirResult) for b in m.content)
    back = from_memdir(converted)
    pairs = [
        (b.id, b.type) for m in back for b in m.content if b.type in ("tool_call", "tool_result")
    ]
    assert pairs == [
        (b.id, b.type) for m in msgs for b in m.content if b.type in ("tool_call", "tool_result")
    ]


@settings(max_examples=100, deadline=None)
@given(conversation, st.data())
def test_any_cut_between_segments_keeps_every_block_and_unique_ids(
    msgs: list[AsMsg], data: st.DataObject
):
    converted = to_memdir(msgs)
    assert len({m.id for m in converted}) == len(converted)
    cut = data.draw(st.integers(0, len(converted)))
    head, tail = from_memdir(converted[:cut]), from_memdir(converted[cut:])
    blocks = [b for m in [*head, *tail] for b in m.content]
    assert blocks == [b for m in msgs for b in m.content]


def test_a_reply_becomes_assistant_and_tool_segments():
    reply = AsMsg(
        name="Friday",
        role="assistant",
        content=[
            HintBlock(hint="<system-reminder>now</system-reminder>"),
            TextBlock(text="Checking."),
            ToolCallBlock(id="c1", name="lookup", input='{"service": "db"}'),
            ToolResultBlock(id="c1", name="lookup", output="up", state="success"),
            TextBlock(text="It is up."),
        ],
    )
    segments = to_memdir([reply])
    assert [m.role for m in segments] == ["assistant", "tool", "assistant"]
    assert segments[0].content[2] == ToolUseBlock(id="c1", name="lookup", input={"service": "db"})
    assert segments[1].content[0].output == "up" and not segments[1].content[0].is_error
    assert all(m.metadata[META_KEY]["msg"]["id"] == reply.id for m in segments)
    result = reply.content[3]
    assert segments[1].id == f"{reply.id}/c1@{result.created_at}/result"


def test_a_memdir_change_to_a_tool_result_is_kept_on_the_way_back():
    reply = AsMsg(
        name="Friday",
        role="assistant",
        content=[
            ToolCallBlock(id="c1", name="lookup", input="{}"),
            ToolResultBlock(
                id="c1", name="lookup", output=[TextBlock(text="x" * 5000)], state="error"
            ),
        ],
    )
    call, result = to_memdir([reply])
    shortened = result.with_content(
        [MemdirResult(tool_use_id="c1", name="lookup", output="[cleared]", is_error=True)]
    )
    (back,) = from_memdir([call, shortened])
    block = back.content[1]
    assert isinstance(block, ToolResultBlock)
    assert (block.output, block.state) == ("[cleared]", "error")


def test_messages_from_elsewhere_convert_too():
    msgs = [
        Msg.user("hi"),
        Msg.assistant("calling", tool_calls=[ToolUseBlock(id="t1", name="f", input={"a": 1})]),
        Msg.tool_result("t1", "result", name="f"),
    ]
    user, assistant = from_memdir(msgs)
    assert user.role == "user" and user.get_text_content() == "hi"
    assert [b.type for b in assistant.content] == ["text", "tool_call", "tool_result"]
    assert json.loads(assistant.content[1].input) == {"a": 1}
