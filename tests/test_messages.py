"""Msg and blocks: construction, validation, lossless JSON round-trip."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import MemdirError
from memdir.messages import (
    SUMMARY_NAME,
    ImageBlock,
    MessageFormatError,
    MissingToolCallIdError,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownRoleError,
    dangling_tool_calls,
    msgs_from_json,
    msgs_to_json,
)

# -- strategies (shared with the converter tests) ----------------------------------------------

text = st.text(max_size=40)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_object = st.dictionaries(text, json_value, max_size=4)
images = st.builds(
    ImageBlock,
    source=st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo="]),
    media_type=st.none() | st.just("image/png"),
)
text_blocks = st.builds(TextBlock, text=text)
tool_uses = st.builds(ToolUseBlock, id=ident, name=ident, input=json_object)
tool_results = st.builds(
    ToolResultBlock,
    tool_use_id=ident,
    name=st.none() | ident,
    output=text | st.lists(text_blocks | images, max_size=3),
    is_error=st.booleans(),
)
thinking = st.builds(
    ThinkingBlock, thinking=text, signature=st.none() | ident, redacted=st.booleans()
)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001 (Hypothesis wants naive bounds)
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5))]),
)


@st.composite
def messages(draw: st.DrawFn) -> Msg:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    blocks = {
        "system": text_blocks,
        "user": text_blocks | images,
        "assistant": text_blocks | thinking | tool_uses | images,
        "tool": tool_results,
    }[role]
    content = draw(st.lists(blocks, min_size=1 if role == "tool" else 0, max_size=4))
    return Msg(
        role=role,
        content=tuple(content),
        name=draw(st.none() | ident | st.just(SUMMARY_NAME)),
        created_at=draw(instants),
        metadata=draw(json_object),
    )


# -- JSON ------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(messages(), max_size=5))
def test_json_round_trip_is_lossless(msgs: list[Msg]) -> None:
    assert msgs_from_json(msgs_to_json(msgs)) == msgs
    for m in msgs:
        again = Msg.from_dict(json.loads(json.dumps(m.to_dict())))
        assert again == m
        assert again.id == m.id and again.created_at == m.created_at


def test_created_at_is_stored_in_utc() -> None:
    local = datetime(2026, 11, 30, 17, 0, tzinfo=timezone(timedelta(hours=8)))
    m = Msg.user("hi", created_at=local)
    assert m.created_at.tzinfo is UTC
    assert m.created_at == datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    assert m.to_dict()["created_at"] == "2026-11-30T09:00:00+00:00"


def test_json_keeps_chinese_readable() -> None:
    out = msgs_to_json([Msg.user("我喜欢喝乌龙茶")])
    assert "我喜欢喝乌龙茶" in out


# -- construction and views ------------------------------------------------------------------


def test_helpers_and_views() -> None:
    call_a = ToolUseBlock(id="c1", name="read_file", input={"path": "a.py"})
    call_b = ToolUseBlock(id="c2", name="read_file", input={"path": "b.py"})
    asst = Msg.assistant("reading both", tool_calls=[call_a, call_b])
    assert asst.text == "reading both"
    assert asst.tool_uses == (call_a, call_b)
    res = Msg(
        role="tool",
        content=(
            ToolResultBlock(tool_use_id="c1", output="A"),
            ToolResultBlock(tool_use_id="c2", output=[TextBlock(text="B")], is_error=True),
        ),
    )
    assert [r.text for r in res.tool_results] == ["A", "B"]
    assert Msg.user("hi").content == (TextBlock(text="hi"),)
    assert Msg(role="user", content="hi").content == (TextBlock(text="hi"),)  # type: ignore[arg-type]
    assert Msg.system("be brief").role == "system"
    assert Msg.assistant().content == ()


def test_messages_are_immutable_and_ids_unique() -> None:
    m = Msg.user("hi", metadata={"k": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.role = "assistant"  # type: ignore[misc]
    m2 = m.with_content("bye")
    assert m2.id == m.id and m2.text == "bye" and m.text == "hi"
    assert len({Msg.user("x").id for _ in range(50)}) == 50


def test_metadata_is_copied() -> None:
    meta = {"a": 1}
    m = Msg.user("hi", metadata=meta)
    meta["a"] = 2
    assert m.metadata == {"a": 1}


def test_dangling_tool_calls_are_representable_and_found() -> None:
    a = ToolUseBlock(id="c1", name="search", input={"q": "x"})
    b = ToolUseBlock(id="c2", name="search", input={"q": "y"})
    msgs = [
        Msg.user("go"),
        Msg.assistant(tool_calls=[a, b]),
        Msg.tool_result("c1", "found x"),
    ]
    assert dangling_tool_calls(msgs) == [b]
    assert msgs_from_json(msgs_to_json(msgs)) == msgs


# -- validation ------------------------------------------------------------------------------


def test_unknown_role_is_a_clear_error() -> None:
    with pytest.raises(UnknownRoleError, match="unknown message role 'bot'"):
        Msg(role="bot", content=())  # type: ignore[arg-type]
    with pytest.raises(UnknownRoleError):
        Msg.from_dict({"role": "function", "content": []})


@pytest.mark.parametrize(
    ("role", "block"),
    [
        ("user", ToolUseBlock(id="c", name="t", input={})),
        ("assistant", ToolResultBlock(tool_use_id="c", output="x")),
        ("tool", TextBlock(text="x")),
        ("system", ImageBlock(source="https://example.com/a.png")),
        ("user", ThinkingBlock(thinking="hmm")),
    ],
)
def test_blocks_must_fit_the_role(role: str, block: object) -> None:
    with pytest.raises(MessageFormatError, match="cannot hold"):
        Msg(role=role, content=(block,))  # type: ignore[arg-type]


def test_missing_ids_and_bad_fields() -> None:
    with pytest.raises(MissingToolCallIdError):
        Msg.assistant(tool_calls=[ToolUseBlock(id="", name="t", input={})])
    with pytest.raises(MissingToolCallIdError):
        Msg.tool_result("", "x")
    with pytest.raises(MissingToolCallIdError):
        Msg.from_dict({"role": "tool", "content": [{"type": "tool_result", "output": "x"}]})
    with pytest.raises(MessageFormatError, match="input must be a JSON object"):
        Msg.assistant(tool_calls=[ToolUseBlock(id="c", name="t", input=[1])])  # type: ignore[arg-type]
    with pytest.raises(MessageFormatError, match="at least one"):
        Msg(role="tool", content=())
    with pytest.raises(MessageFormatError, match="timezone-aware"):
        Msg.user("x", created_at=datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(MessageFormatError, match="unknown content block type 'audio'"):
        Msg.from_dict({"role": "user", "content": [{"type": "audio"}]})
    with pytest.raises(MessageFormatError, match="not valid JSON"):
        msgs_from_json("[{")
    with pytest.raises(MessageFormatError, match="array"):
        msgs_from_json('{"role": "user"}')
    with pytest.raises(MessageFormatError, match="no 'role'"):
        Msg.from_dict({"content": []})


def test_non_json_metadata_fails_on_serialisation() -> None:
    m = Msg.user("x", metadata={"when": datetime.now(UTC)})
    with pytest.raises(MessageFormatError, match="not JSON-serialisable"):
        m.to_dict()


def test_errors_are_memdir_errors() -> None:
    assert issubclass(MessageFormatError, MemdirError)
    assert issubclass(UnknownRoleError, MessageFormatError)
    assert issubclass(MissingToolCallIdError, MessageFormatError)
