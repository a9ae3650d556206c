"""Tool calls written as text (Hermes/Qwen, Mistral, Llama) become real tool calls."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir import HarnessAgent
from memdir.errors import ConfigError
from memdir.messages import RAW_ARGUMENTS_KEY, Msg, TextBlock, ThinkingBlock, ToolUseBlock
from memdir.models import OpenAIChatModel, ToolSpec
from memdir.models._text_tools import extract_text_tool_calls, with_text_tool_calls
from memdir.workspace import Workspace

TOOLS = {"get_weather", "write_file"}
PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
HEX_ID = re.compile(r"[0-9a-f]{32}")


def calls_of(text: str, names: Any = TOOLS) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.input) for c in extract_text_tool_calls(text, names)[1]]


def unchanged(text: str, names: Any = TOOLS) -> bool:
    return extract_text_tool_calls(text, names) == (text, [])


# -- Hermes / Qwen 2.5 --------------------------------------------------------------------------


def test_hermes_call_is_extracted_and_its_markup_removed() -> None:
    text = f"Let me look that up.\n<tool_call>\n{PARIS}\n</tool_call>"
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == "Let me look that up."
    [call] = calls
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    assert HEX_ID.fullmatch(call.id)


def test_several_calls_keep_their_order_and_get_distinct_ids() -> None:
    text = (
        f"<tool_call>\n{PARIS}\n</tool_call>\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n'
        '<tool_call>{"name": "write_file", "arguments": {"path": "a.txt"}}</tool_call>'
        '<tool_call>{"name": "write_file", "arguments": {"path": "b.txt"}}</tool_call>'
    )
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == ""
    assert [c.input for c in calls] == [
        {"city": "Paris"},
        {"city": "Rome"},
        {"path": "a.txt"},
        {"path": "b.txt"},
    ]
    assert len({c.id for c in calls}) == 4
    # each call is new: the same text read twice gives new ids
    again = extract_text_tool_calls(text, TOOLS)[1]
    assert not {c.id for c in calls} & {c.id for c in again}


def test_text_between_calls_is_kept() -> None:
    text = f"First Paris.\n<tool_call>\n{PARIS}\n</tool_call>\n\nThen a file.\n\n"
    assert extract_text_tool_calls(text, TOOLS)[0] == "First Paris.\n\nThen a file."


def test_unclosed_last_tag_at_the_end_of_the_text() -> None:
    text = (
        f"<tool_call>\n{PARIS}\n</tool_call>\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n'
    )
    assert calls_of(text) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    # unclosed and directly followed by the next tag
    text = f"<tool_call>{PARIS}\n<tool_call>{PARIS}</tool_call>"
    assert len(calls_of(text)) == 2


def test_parameters_key_and_arguments_as_a_json_string() -> None:
    text = (
        '<tool_call>{"name": "get_weather", "parameters": {"city": "Oslo"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Lima\\"}"}</tool_call>\n'
        '<tool_call>{"name": "write_file"}</tool_call>'
    )
    assert calls_of(text) == [
        ("get_weather", {"city": "Oslo"}),
        ("get_weather", {"city": "Lima"}),
        ("write_file", {}),
    ]


def test_arguments_that_are_not_a_json_object_are_kept_verbatim() -> None:
    text = (
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Lima"}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": ["Lima", 3]}</tool_call>'
    )
    assert calls_of(text) == [
        ("get_weather", {RAW_ARGUMENTS_KEY: '{"city": "Lima'}),
        ("get_weather", {RAW_ARGUMENTS_KEY: '["Lima", 3]'}),
    ]


def test_broken_json_of_an_offered_tool_is_kept_verbatim() -> None:
    broken = '{"name": "get_weather", "arguments": {"city": "Par'
    remaining, calls = extract_text_tool_calls(
        f"Checking.\n<tool_call>\n{broken}\n</tool_call>", TOOLS
    )
    assert remaining == "Checking."
    assert [(c.name, c.input) for c in calls] == [("get_weather", {RAW_ARGUMENTS_KEY: broken})]
    # only an outer brace wrong: the arguments are still read
    stray = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}}\n</tool_call>'
    assert calls_of(stray) == [("get_weather", {"city": "Paris"})]
    # broken JSON naming no offered tool, or with the names unknown, stays text
    assert unchanged('<tool_call>\n{"name": "rm_rf", "arguments": {"path": "/\n</tool_call>')
    assert unchanged(f"<tool_call>\n{broken}\n</tool_call>", None)


def test_json_in_a_fence_inside_the_tag() -> None:
    text = f"<tool_call>\n```json\n{PARIS}\n```\n</tool_call>"
    assert extract_text_tool_calls(text, TOOLS)[0] == ""
    assert calls_of(text) == [("get_weather", {"city": "Paris"})]


def test_a_list_of_calls_in_one_tag_and_the_openai_shape() -> None:
    text = (
        f"<tool_call>[{PARIS}, "
        '{"type": "function", "function": {"name": "write_file", "arguments": "{}"}}]</tool_call>'
    )
    assert calls_of(text) == [("get_weather", {"city": "Paris"}), ("write_file", {})]


def test_nested_braces_and_closing_tags_inside_argument_strings() -> None:
    args = {
        "path": "notes.md",
        "text": 'a </tool_call> b <tool_call> {"x": [1, {"y": "}"}]} \\ "quoted"',
        "meta": {"deep": {"deeper": [{"k": "v"}]}},
    }
    text = f"<tool_call>\n{json.dumps({'name': 'write_file', 'arguments': args})}\n</tool_call>"
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == ""
    assert [(c.name, c.input) for c in calls] == [("write_file", args)]


def test_cjk_arguments_and_raw_newlines_in_strings() -> None:
    text = (
        "我来查一下天气。\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "北京", "note": "第一行\n第二行"}}\n'
        "</tool_call>"
    )
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == "我来查一下天气。"
    assert calls[0].input == {"city": "北京", "note": "第一行\n第二行"}


# -- Mistral and Llama -------------------------------------------------------------------------


def test_mistral_tool_calls_list_with_nine_character_ids() -> None:
    text = (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123XYZ"}, '
        '{"name": "get_weather", "arguments": {"city": "東京"}}]'
    )
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == ""
    assert [c.input for c in calls] == [{"city": "Paris"}, {"city": "東京"}]
    # Mistral's chat templates reject ids that are not 9 alphanumeric characters
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", c.id) for c in calls)
    assert calls[0].id != calls[1].id


def test_mistral_name_args_form() -> None:
    text = 'Sure.\n[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]write_file[ARGS]{}'
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == "Sure."
    assert [(c.name, c.input) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("write_file", {}),
    ]


def test_llama_python_tag() -> None:
    one = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert calls_of(one) == [("get_weather", {"city": "Paris"})]
    two = (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "get_weather", "parameters": {"city": "Rome"}}<|eom_id|>'
    )
    assert calls_of(two) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    # built-in tool syntax is not JSON: left alone
    assert unchanged('<|python_tag|>brave_search.call(query="weather in Paris")')


def test_bare_json_naming_an_offered_tool() -> None:
    text = '\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n'
    assert extract_text_tool_calls(text, TOOLS)[0] == ""
    assert calls_of(text) == [("get_weather", {"city": "Paris"})]
    typed = '{"type": "function", "name": "get_weather", "arguments": {"city": "Paris"}}'
    assert calls_of(typed) == [("get_weather", {"city": "Paris"})]


def test_a_call_alone_in_a_json_fence_or_tools_tag_is_a_call() -> None:
    # What Qwen2.5-Coder-1.5B wrote under memdir's prompt in 9 of 13 runs, and the <tools>
    # wrapper it wrote in others.
    fenced = f"```json\n{PARIS}\n```"
    assert extract_text_tool_calls(fenced, TOOLS)[0] == ""
    assert calls_of(fenced) == [("get_weather", {"city": "Paris"})]
    assert calls_of(f"\n```\n{PARIS}\n```\n") == [("get_weather", {"city": "Paris"})]
    assert calls_of(f"<tools>{PARIS}</tools>") == [("get_weather", {"city": "Paris"})]
    # Not the whole answer, not an offered tool, or not a call: left as text.
    assert unchanged(f"Here is the call:\n```json\n{PARIS}\n```")
    assert unchanged(f"```json\n{PARIS}\n```\nThat would work.")
    assert unchanged('```json\n{"name": "rm_rf", "arguments": {"path": "/"}}\n```')
    assert unchanged('```json\n{"name": "Alice", "age": 7}\n```')
    assert unchanged(f"```python\n{PARIS}\n```")


def test_plain_json_answers_are_not_calls() -> None:
    assert unchanged('{"name": "Alice", "age": 7}')  # no arguments
    assert unchanged('{"name": "delete_everything", "parameters": {"path": "/"}}')  # not offered
    assert unchanged('{"name": "get_weather", "parameters": {"city": "Paris"}, "score": 3}')
    assert unchanged('{"name": "get_weather", "arguments": "Paris"}')  # arguments not an object
    assert unchanged(f"The call would be {PARIS}")  # not the whole text
    assert unchanged(f"{PARIS}\n{PARIS}")  # not one object
    assert unchanged(PARIS, None)  # the names are unknown


# -- false positives ---------------------------------------------------------------------------


def test_prose_and_inline_code_mentioning_the_tag_are_not_calls() -> None:
    prose = [
        f"Qwen wraps calls like <tool_call>{PARIS}</tool_call> in its answer.",
        f"`<tool_call>{PARIS}</tool_call>` is how Hermes models call tools.",
        "Use the `<tool_call>` tag, then JSON, then `</tool_call>`.",
        "<tool_call> is the tag Qwen uses; the JSON follows it.",
        f"> <tool_call>{PARIS}</tool_call>",
        f"Mistral answers [TOOL_CALLS] [{PARIS}]",
        f"[TOOL_CALLS] [{PARIS}] is what Mistral prints.",
        f"Llama writes <|python_tag|>{PARIS}",
        f"<|python_tag|>{PARIS} is what Llama prints.",
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>',
        f"<tool_call>\n{PARIS}\nis the shape; the model answers with it.",
    ]
    for text in prose:
        assert unchanged(text), text


def test_code_blocks_are_not_scanned() -> None:
    for fence in ("```", "```xml", "~~~", "````"):
        close = fence.rstrip("xml")
        text = (
            f"The format:\n\n{fence}\n<tool_call>\n{PARIS}\n</tool_call>\n{close}\n\nThat is all."
        )
        assert unchanged(text), fence
    # an unclosed fence runs to the end of the text
    assert unchanged(f"```\n<tool_call>\n{PARIS}\n</tool_call>")
    # a call after a closed fence still counts
    text = f"```\n<tool_call>\n{PARIS}\n</tool_call>\n```\n<tool_call>\n{PARIS}\n</tool_call>"
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert len(calls) == 1 and remaining == f"```\n<tool_call>\n{PARIS}\n</tool_call>\n```"


def test_a_name_not_among_the_tools_leaves_the_markup_as_text() -> None:
    unknown = '<tool_call>\n{"name": "shell", "arguments": {"cmd": "rm -rf /"}}\n</tool_call>'
    assert unchanged(unknown)
    assert unchanged(f"[TOOL_CALLS] [{unknown[12:-13]}]")
    # one unknown name spoils its tag but not the others
    text = f"{unknown}\n<tool_call>\n{PARIS}\n</tool_call>"
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert remaining == unknown and [c.name for c in calls] == ["get_weather"]
    mixed = f'<tool_call>[{PARIS}, {{"name": "shell", "arguments": {{}}}}]</tool_call>'
    assert unchanged(mixed)
    # no tools offered: nothing counts; names unknown: any name in a tag counts
    assert unchanged(f"<tool_call>{PARIS}</tool_call>", set())
    assert [c.name for c in extract_text_tool_calls(unknown, None)[1]] == ["shell"]


def test_reasoning_is_not_scanned_and_is_kept() -> None:
    inside = f"<think>\nMaybe:\n<tool_call>\n{PARIS}\n</tool_call>\nNo.\n</think>\n\nIt rains."
    assert unchanged(inside)
    assert unchanged(f"<think>\nstill thinking\n<tool_call>\n{PARIS}\n</tool_call>")  # unclosed
    after = f"<think>\nI need the weather.\n</think>\n\n<tool_call>\n{PARIS}\n</tool_call>"
    remaining, calls = extract_text_tool_calls(after, TOOLS)
    assert remaining == "<think>\nI need the weather.\n</think>" and len(calls) == 1
    # servers that put <think> in the prompt send only its end
    reasoning = f"I could write\n    <tool_call>{PARIS}</tool_call>\nbut first...\n</think>"
    remaining, calls = extract_text_tool_calls(f"{reasoning}\n\n<tool_call>{PARIS}", TOOLS)
    assert remaining == reasoning and len(calls) == 1
    assert unchanged(f"{reasoning}\n\nIt rains.")
    bare = f"I could call it {PARIS}.\n</think>\n\n{PARIS}"
    assert extract_text_tool_calls(bare, TOOLS)[0] == f"I could call it {PARIS}.\n</think>"


def test_bad_arguments_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="text must be a string"):
        extract_text_tool_calls(None, TOOLS)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool_names must be a collection"):
        extract_text_tool_calls("hi", "get_weather")
    with pytest.raises(ConfigError, match="tool names must be strings"):
        extract_text_tool_calls("hi", [1])  # type: ignore[list-item]


_FRAGMENTS = st.sampled_from(
    [
        "<tool_call", "tool_call>", "</tool_call>", "<tool_call >", "[TOOL_CALLS", "TOOL_CALLS]",
        "<|python_tag", "python_tag|>", "<think>", "</think>", "```", "~~~", "\n", " ", "`",
        "{", "}", "[", "]", '"', ":", ",", PARIS, '"name"', '"arguments"', "get_weather",
        "北京", "[ARGS]",
    ]
)  # fmt: skip
_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")
_TEXTS = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=8)), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS.filter(lambda t: not any(m in t for m in _MARKERS)))
def test_text_without_markers_comes_back_unchanged(text: str) -> None:
    assert extract_text_tool_calls(text, None) == (text, [])
    # with known names, a whole text (or what follows reasoning) that is one JSON object can
    # be a bare call: those texts are left to the bare-JSON tests
    tails = (text.strip(), text.partition("</think>")[2].strip())
    if not any(t.startswith("{") and t.endswith("}") for t in tails):
        assert extract_text_tool_calls(text, TOOLS) == (text, [])


# -- messages and the OpenAI adapter -----------------------------------------------------------


def test_a_message_keeps_its_thinking_and_other_text() -> None:
    message = Msg(
        role="assistant",
        content=(
            ThinkingBlock(thinking="weather?"),
            TextBlock(text=f"<tool_call>{PARIS}</tool_call>"),
        ),
    )
    out = with_text_tool_calls(message, TOOLS)
    assert out.id == message.id
    assert isinstance(out.content[0], ThinkingBlock) and len(out.content) == 2
    assert [(c.name, c.input) for c in out.tool_uses] == [("get_weather", {"city": "Paris"})]
    plain = Msg.assistant("It rains.")
    assert with_text_tool_calls(plain, TOOLS) is plain
    structured = Msg.assistant(
        f"<tool_call>{PARIS}</tool_call>",
        tool_calls=[ToolUseBlock(id="call_1", name="get_weather", input={"city": "Rome"})],
    )
    assert with_text_tool_calls(structured, TOOLS) is structured


WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def llama_cpp_answer(content: str, *, finish: str = "stop", **message: Any) -> dict[str, Any]:
    """A chat completion as llama.cpp's server sends it when it leaves tool calls in text."""
    return {
        "choices": [
            {
                "finish_reason": finish,
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
            }
        ],
        "created": 1764493200,
        "model": "qwen2.5-7b-instruct-q4_k_m.gguf",
        "system_fingerprint": "b4719-8a8c4ceb",
        "object": "chat.completion",
        "usage": {"completion_tokens": 31, "prompt_tokens": 212, "total_tokens": 243},
        "id": "chatcmpl-oMUGZuOqhT1ghzGiXGsYSsBFnMpDhk3V",
        "timings": {"prompt_n": 212, "predicted_n": 31},
    }


def llama_cpp_model(handler: Any) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel(
        "qwen2.5-7b-instruct", base_url="http://127.0.0.1:8080/v1", client=client
    )


async def test_openai_adapter_reads_text_calls_only_when_tools_were_offered() -> None:
    content = f"Let me check.\n<tool_call>\n{PARIS}\n</tool_call>"
    model = llama_cpp_model(lambda request: httpx.Response(200, json=llama_cpp_answer(content)))

    with_tools = await model.generate([Msg.user("Weather in Paris?")], tools=[WEATHER])
    assert [(c.name, c.input) for c in with_tools.message.tool_uses] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert with_tools.text == "Let me check."
    assert with_tools.stop_reason == "tool_calls"

    without = await model.generate([Msg.user("Weather in Paris?")])
    assert without.text == content and not without.message.tool_uses
    assert without.stop_reason == "stop"


async def test_structured_tool_calls_win_over_text() -> None:
    content = f"<tool_call>\n{PARIS}\n</tool_call>"
    structured = {
        "id": "call_rome",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
    }
    answer = llama_cpp_answer(content, finish="tool_calls", tool_calls=[structured])
    model = llama_cpp_model(lambda request: httpx.Response(200, json=answer))
    resp = await model.generate([Msg.user("Weather?")], tools=[WEATHER])
    assert [c.id for c in resp.message.tool_uses] == ["call_rome"]
    assert resp.text == content


async def test_agent_runs_a_tool_called_in_text_by_a_llama_cpp_server(ws: Workspace) -> None:
    requests: list[dict[str, Any]] = []
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"{city}: 12°C, rain"

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        if len(requests) == 1:
            call = '{"name": "get_weather", "arguments": {"city": "北京"}}'
            return httpx.Response(200, json=llama_cpp_answer(f"<tool_call>\n{call}\n</tool_call>"))
        return httpx.Response(200, json=llama_cpp_answer("北京 is rainy, 12°C."))

    agent = HarnessAgent(
        model=llama_cpp_model(handler),
        workspace=ws,
        tools=[get_weather],
        memory_flush=False,
        maintenance=None,
    )
    reply = await agent.call("How is the weather in 北京?")
    await agent.close()

    assert ran == ["北京"]
    assert reply.text == "北京 is rainy, 12°C."
    assert [m.role for m in agent.history()] == ["user", "assistant", "tool", "assistant"]
    # the call goes back to the server as a structured call, answered by its result
    second = requests[1]["messages"]
    [assistant] = [m for m in second if m["role"] == "assistant"]
    [call] = assistant["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "北京"}
    [result] = [m for m in second if m["role"] == "tool"]
    assert result["tool_call_id"] == call["id"]
    assert "北京: 12°C, rain" in str(result["content"])


_ANY_TEXTS = st.lists(
    st.one_of(_FRAGMENTS, st.sampled_from(_MARKERS), st.text(max_size=8)), max_size=30
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_ANY_TEXTS)
def test_any_text_gives_offered_calls_or_comes_back_unchanged(text: str) -> None:
    remaining, calls = extract_text_tool_calls(text, TOOLS)
    assert all(c.name in TOOLS for c in calls)
    if not calls:
        assert remaining == text
    else:
        assert len(remaining) < len(text)
