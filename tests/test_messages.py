"""Msg and blocks: construction, validation, lossless JSON round-trip."""

from __future__ import annotations

import dataclasses
import itertools
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import MemdirError
from memdir.messages import (
    MISSING_RESULT_TEXT,
    RAW_ARGUMENTS_KEY,
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
    from_anthropic,
    from_openai,
    msgs_from_json,
    msgs_to_json,
    pair_tool_results,
    repair_tool_pairing,
    stable_ids,
    to_anthropic,
    to_openai,
)
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

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


def test_a_reused_call_id_is_answered_per_turn() -> None:
    # "call_0" every turn: the first call was interrupted, the second answered
    first = ToolUseBlock(id="call_0", name="bash", input={"cmd": "pytest"})
    second = ToolUseBlock(id="call_0", name="read_file", input={"path": "a.py"})
    third = ToolUseBlock(id="call_0", name="read_file", input={"path": "b.py"})
    msgs = [
        Msg.user("go"),
        Msg.assistant(tool_calls=[first]),
        Msg.user("stop that, read a.py"),
        Msg.assistant(tool_calls=[second]),
        Msg.tool_result("call_0", "a body"),
        Msg.assistant(tool_calls=[third]),
    ]
    assert dangling_tool_calls(msgs) == [first, third]
    pairs = pair_tool_results(msgs)
    assert pairs.origin == {(4, 0): 3}
    assert pairs.unanswered == [(1, first), (5, third)]


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


# -- OpenAI format ---------------------------------------------------------------------------


def _carried_openai(msgs: list[Msg]) -> list[tuple[object, ...]]:
    """What survives Msg -> OpenAI -> Msg: one entry per OpenAI message."""
    out: list[tuple[object, ...]] = []
    names: dict[str, str] = {}
    for m in msgs:
        if m.role == "tool":
            for r in m.tool_results:
                output = r.output
                if isinstance(output, list):
                    output = [
                        p
                        if isinstance(p, TextBlock)
                        else TextBlock(text=f"[image: {_describe(p)}]")
                        for p in output
                    ]
                out.append(("tool", None, r.tool_use_id, names.get(r.tool_use_id), output))
            continue
        if m.role == "assistant":
            blocks: tuple[object, ...] = (
                tuple(b for b in m.content if isinstance(b, TextBlock)) + m.tool_uses
            )
            names.update((c.id, c.name) for c in m.tool_uses)
        else:
            blocks = tuple(
                ImageBlock(source=b.source, media_type=_mime(b.source))
                if isinstance(b, ImageBlock)
                else b
                for b in m.content
            )
        out.append((m.role, m.name, blocks))
    return out


def _describe(image: ImageBlock) -> str:
    if image.source.startswith("data:"):
        return image.media_type or str(_mime(image.source))
    return image.source


def _mime(source: str) -> str | None:
    return source[5:].split(";", 1)[0] if source.startswith("data:") else None


def _as_carried(msgs: list[Msg]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for m in msgs:
        if m.role == "tool":
            (r,) = m.tool_results
            assert not r.is_error
            out.append(("tool", None, r.tool_use_id, r.name, r.output))
        else:
            out.append((m.role, m.name, m.content))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(messages(), max_size=6))
def test_openai_round_trip_keeps_what_the_format_carries(msgs: list[Msg]) -> None:
    wire = to_openai(msgs)
    json.dumps(wire)  # the payload is plain JSON
    assert _as_carried(from_openai(wire)) == _carried_openai(msgs)
    assert to_openai(from_openai(wire)) == wire


def test_openai_parallel_calls_and_results() -> None:
    calls = [
        ToolUseBlock(id="call_a", name="get_weather", input={"city": "Paris"}),
        ToolUseBlock(id="call_b", name="get_weather", input={"city": "北京"}),
    ]
    msgs = [
        Msg.system("be brief"),
        Msg.user("weather in Paris and Beijing?", name="alice"),
        Msg.assistant(tool_calls=calls),
        Msg(
            role="tool",
            content=(
                ToolResultBlock(tool_use_id="call_a", name="get_weather", output="18C"),
                ToolResultBlock(tool_use_id="call_b", name="get_weather", output="5C"),
            ),
        ),
        Msg.assistant("Paris 18C, Beijing 5C."),
    ]
    wire = to_openai(msgs)
    assert wire == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in Paris and Beijing?", "name": "alice"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "北京"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_b", "content": "5C"},
        {"role": "assistant", "content": "Paris 18C, Beijing 5C."},
    ]
    back = from_openai(wire)
    assert [m.role for m in back] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert back[2].tool_uses == tuple(calls)
    assert [m.tool_results[0].name for m in back[3:5]] == ["get_weather", "get_weather"]


def test_from_openai_reads_server_variants() -> None:
    wire = [
        {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,AAA", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "look at the picture",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "zoom", "arguments": "{bad json"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "zoomed"}]},
    ]
    msgs = from_openai(wire)
    assert msgs[0] == Msg.system("rules", id=msgs[0].id, created_at=msgs[0].created_at)
    assert msgs[1].content[1] == ImageBlock(
        source="data:image/png;base64,AAA", media_type="image/png"
    )
    assert msgs[2].content[0] == ThinkingBlock(thinking="look at the picture")
    (call,) = msgs[2].tool_uses
    assert call.input == {RAW_ARGUMENTS_KEY: "{bad json"}
    # The model's malformed arguments go back verbatim, and thinking is not sent back.
    out = to_openai(msgs)
    assert out[2]["tool_calls"][0]["function"]["arguments"] == "{bad json"
    assert "reasoning_content" not in out[2]
    assert msgs[3].tool_results[0].name == "zoom"
    assert msgs[3].tool_results[0].output == [TextBlock(text="zoomed")]


@pytest.mark.parametrize(
    ("wire", "error", "match"),
    [
        ([{"role": "robot", "content": "x"}], UnknownRoleError, "#0: unknown role 'robot'"),
        ([{"role": "function", "content": "x"}], UnknownRoleError, "legacy 'function'"),
        ([{"role": "tool", "content": "x"}], MissingToolCallIdError, "tool_call_id"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"type": "function", "function": {"name": "f"}}],
                }
            ],
            MissingToolCallIdError,
            "has no 'id'",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}],
            MessageFormatError,
            "no function name",
        ),
        (
            [{"role": "user", "content": [{"type": "input_audio"}]}],
            MessageFormatError,
            "input_audio",
        ),
        ([{"role": "user", "content": 5}], MessageFormatError, "'content' must be"),
        (["not a message"], MessageFormatError, "JSON object"),
    ],
)
def test_from_openai_rejects_malformed_input(
    wire: list[dict[str, object]], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        from_openai(wire)


# -- Anthropic format ------------------------------------------------------------------------


def _result_text(r: ToolResultBlock) -> object:
    """The result as Anthropic carries it: no blank text parts, no media type for URLs."""
    if isinstance(r.output, str):
        return r.output
    return [
        p if isinstance(p, TextBlock) else (p.source, _mime(p.source))
        for p in r.output
        if not isinstance(p, TextBlock) or p.text.strip()
    ]


def _anthropic_facts(msgs: list[Msg]) -> tuple[object, ...]:
    """What the Anthropic format carries, independent of how turns are grouped."""
    calls = [(c.id, c.name, c.input) for m in msgs for c in m.tool_uses]
    results = [(r.tool_use_id, _result_text(r), r.is_error) for m in msgs for r in m.tool_results]
    texts = sorted(
        (m.role == "assistant", b.text)
        for m in msgs
        if m.role != "system"
        for b in m.content
        if isinstance(b, TextBlock) and b.text.strip()
    )
    signed = [
        ("" if b.redacted else b.thinking, b.signature, b.redacted)  # redacted: no text
        for m in msgs
        for b in m.content
        if isinstance(b, ThinkingBlock) and b.signature is not None
    ]
    return calls, results, texts, signed


@settings(max_examples=150, deadline=None)
@given(st.lists(messages(), max_size=6))
def test_anthropic_round_trip_keeps_what_the_format_carries(msgs: list[Msg]) -> None:
    system, wire = to_anthropic(msgs)
    json.dumps(wire)
    back = from_anthropic(system, wire)
    assert to_anthropic(back) == (system, wire)
    non_system = [m for m in msgs if m.role != "system"]
    assert _anthropic_facts([m for m in back if m.role != "system"]) == _anthropic_facts(non_system)
    expected_system = "\n\n".join(m.text for m in msgs if m.role == "system" and m.text.strip())
    assert system == (expected_system or None)
    roles = [t["role"] for t in wire]
    assert all(a != b for a, b in itertools.pairwise(roles)), "turns alternate"


def test_anthropic_tool_turns_thinking_and_images() -> None:
    calls = [
        ToolUseBlock(id="toolu_1", name="read_file", input={"path": "src/app.py"}),
        ToolUseBlock(id="toolu_2", name="read_file", input={"path": "README.md"}),
    ]
    msgs = [
        Msg.system("You are terse."),
        Msg(
            role="user",
            content=(TextBlock(text="look"), ImageBlock(source="data:image/jpeg;base64,/9j/")),
        ),
        Msg(
            role="assistant",
            content=(ThinkingBlock(thinking="two files", signature="sig=="), *calls),
        ),
        Msg(
            role="tool",
            content=(
                ToolResultBlock(tool_use_id="toolu_1", output="print(1)"),
                ToolResultBlock(tool_use_id="toolu_2", output="no such file", is_error=True),
            ),
        ),
        Msg.user("and now?"),
    ]
    system, wire = to_anthropic(msgs)
    assert system == "You are terse."
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "two files", "signature": "sig=="},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "src/app.py"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "read_file",
                    "input": {"path": "README.md"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    back = from_anthropic(system, wire)
    assert [m.role for m in back] == ["system", "user", "assistant", "tool", "user"]
    assert [r.name for r in back[3].tool_results] == ["read_file", "read_file"]
    assert back[3].tool_results[1].is_error
    assert back[2].content[0] == ThinkingBlock(thinking="two files", signature="sig==")


def test_from_anthropic_reads_redacted_thinking_and_system_blocks() -> None:
    msgs = from_anthropic(
        [
            {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "b"},
        ],
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "hello"},
                ],
            },
        ],
    )
    assert msgs[0].text == "a\n\nb"
    assert msgs[2].content[0] == ThinkingBlock(thinking="", signature="opaque", redacted=True)
    _, wire = to_anthropic(msgs)
    assert wire[1]["content"][0] == {"type": "redacted_thinking", "data": "opaque"}


@pytest.mark.parametrize(
    ("wire", "error", "match"),
    [
        ([{"role": "system", "content": "x"}], UnknownRoleError, "#0: unknown role 'system'"),
        (
            [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
            MissingToolCallIdError,
            "tool_use_id",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
            MissingToolCallIdError,
            "no 'id'",
        ),
        ([{"role": "user", "content": [{"type": "document"}]}], MessageFormatError, "document"),
        ([{"role": "user", "content": None}], MessageFormatError, "'content' must be"),
    ],
)
def test_from_anthropic_rejects_malformed_input(
    wire: list[dict[str, object]], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        from_anthropic(None, wire)


# -- repairing call/result pairing -----------------------------------------------------------


def test_repair_adds_results_for_unanswered_calls_and_keeps_orphans() -> None:
    a = ToolUseBlock(id="c1", name="search", input={"q": "x"})
    b = ToolUseBlock(id="c2", name="search", input={"q": "y"})
    msgs = [
        Msg.tool_result("old", "orphaned output", name="grep"),  # its call was compacted away
        Msg.user("go"),
        Msg.assistant(tool_calls=[a, b]),
        Msg.tool_result("c1", "found x"),
        Msg.user("next"),
        Msg.assistant(tool_calls=[ToolUseBlock(id="c3", name="search", input={})]),
    ]
    fixed = repair_tool_pairing(msgs)
    assert [m.role for m in fixed] == [
        "user",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "tool",
    ]
    assert "orphaned output" in fixed[0].text and "grep" in fixed[0].text
    assert fixed[4].tool_results[0].tool_use_id == "c2"
    assert fixed[4].tool_results[0].is_error
    assert fixed[4].tool_results[0].output == MISSING_RESULT_TEXT
    assert fixed[7].tool_results[0].tool_use_id == "c3"
    assert dangling_tool_calls(fixed) == []
    assert repair_tool_pairing(fixed) == fixed
    assert len(msgs) == 6  # input untouched


def test_repair_leaves_a_well_formed_conversation_alone() -> None:
    call = ToolUseBlock(id="c1", name="t", input={})
    msgs = [Msg.user("go"), Msg.assistant(tool_calls=[call]), Msg.tool_result("c1", "ok")]
    assert repair_tool_pairing(msgs) == msgs


# -- wrong types and hostile input give MessageFormatError, never a bare TypeError -------------


def _nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


_DEEP = "[" * 5_000 + "]" * 5_000


@pytest.mark.parametrize(
    "call",
    [
        lambda: Msg(role=["user"]),  # type: ignore[arg-type]
        lambda: Msg.from_dict({"role": {"r": 1}, "content": []}),
        lambda: Msg.tool_result("c1", "out", name=5),  # type: ignore[arg-type]
        lambda: Msg(role="user", content=[ImageBlock(source="https://x/a.png", media_type=5)]),  # type: ignore[arg-type]
        lambda: to_openai(None),  # type: ignore[arg-type]
        lambda: to_openai(Msg.user("a single message")),  # type: ignore[arg-type]
        lambda: from_openai(None),  # type: ignore[arg-type]
        lambda: from_openai({"role": "user", "content": "hi"}),  # type: ignore[arg-type]
        lambda: to_anthropic(None),  # type: ignore[arg-type]
        lambda: from_anthropic(123, []),  # type: ignore[arg-type]
        lambda: from_anthropic(None, None),  # type: ignore[arg-type]
        lambda: msgs_to_json(None),  # type: ignore[arg-type]
        lambda: msgs_from_json(_DEEP),
        lambda: dangling_tool_calls(None),  # type: ignore[arg-type]
        lambda: repair_tool_pairing("hello"),  # type: ignore[arg-type]
        lambda: Msg.assistant(
            tool_calls=[ToolUseBlock(id="c1", name="f", input={"x": _nested(5_000)})]
        ).to_dict(),
        lambda: from_anthropic(
            None,
            [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}],
        ),
    ],
)
def test_bad_input_is_a_message_format_error(call: object) -> None:
    with pytest.raises(MessageFormatError):
        call()  # type: ignore[operator]


def test_deeply_nested_tool_arguments_are_kept_verbatim() -> None:
    wire = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": _DEEP}}
            ],
        }
    ]
    (msg,) = from_openai(wire)
    assert msg.tool_uses[0].input == {RAW_ARGUMENTS_KEY: _DEEP}


def test_converters_name_the_item_that_is_not_a_message() -> None:
    with pytest.raises(MessageFormatError, match=r"to_openai: item #1 is a dict, not a Msg"):
        to_openai([Msg.user("hi"), {"role": "user", "content": "raw"}])  # type: ignore[list-item]


# -- stable ids ---------------------------------------------------------------------------------

_OPENAI_CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "the deploy is on Friday"},
    {"role": "assistant", "content": "noted"},
]


def test_stable_ids_make_a_conversation_sent_again_the_same(any_ws: Workspace) -> None:
    # OpenAI JSON carries no ids: parsed twice, the same messages get new random ids
    first, again = from_openai(_OPENAI_CHAT), from_openai(_OPENAI_CHAT)
    assert [m.id for m in first] != [m.id for m in again]
    log = SessionLog(any_ws, "s1")
    assert log.append(stable_ids(first, "s1")) is not None
    assert log.append(stable_ids(again, "s1")) is None  # nothing written twice
    longer = from_openai([*_OPENAI_CHAT, {"role": "user", "content": "and Monday?"}])
    span = log.append(stable_ids(longer, "s1"))  # a conversation that goes on: only what's new
    assert span is not None and span.start_line == span.end_line == 4
    assert [r.msg.text for r in log.read().records][1:] == [
        "the deploy is on Friday",
        "noted",
        "and Monday?",
    ]


def test_stable_ids_depend_on_session_position_and_content() -> None:
    msgs = from_openai(_OPENAI_CHAT)
    ids = [m.id for m in stable_ids(msgs, "s1")]
    assert len(set(ids)) == 3 and all(i.startswith("s1:") for i in ids)
    assert [m.id for m in stable_ids(msgs, "s2")] != ids
    edited = from_openai([*_OPENAI_CHAT[:2], {"role": "assistant", "content": "ok"}])
    assert [m.id for m in stable_ids(edited, "s1")][:2] == ids[:2]
    assert stable_ids(edited, "s1")[2].id != ids[2]
    assert [m.text for m in stable_ids(msgs, "s1")] == [m.text for m in msgs]


def test_stable_ids_refuse_bad_input_clearly() -> None:
    with pytest.raises(MessageFormatError, match="session id"):
        stable_ids(from_openai(_OPENAI_CHAT), " ")
    with pytest.raises(MessageFormatError, match="takes a list"):
        stable_ids(Msg.user("one"), "s1")  # type: ignore[arg-type]
