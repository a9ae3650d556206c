"""Tool calls that a model wrote into its text instead of the structured ``tool_calls`` field.

Small and local models behind OpenAI-compatible servers (the llama.cpp server, some vLLM and
Ollama set-ups) often answer a tool call as text, in the markup their chat template taught
them. :func:`extract_text_tool_calls` reads these formats:

- Hermes / Qwen 2.5: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one or
  several. The last tag may be unclosed (the model stopped at its stop token), the JSON may sit
  in a ```` ```json ```` fence inside the tag or be a list of calls, the arguments may be
  called ``"parameters"`` and be given as an object or as a JSON string.
- Mistral: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`` and the newer
  ``[TOOL_CALLS]name[ARGS]{...}``.
- Llama 3.x: ``<|python_tag|>{"name": ..., "parameters": {...}}`` (several joined by ``;``),
  and, without the tag, a text that is exactly one JSON object ``{"name": ..., "parameters":
  {...}}`` (or ``"arguments"``) naming an offered tool.

Guards against reading a call where there is none:

- a marker counts only at the start of a line (up to three spaces in) or right after the end
  of a call: prose and inline code (`` `<tool_call>` ``) do not start lines with it;
- fenced code blocks (```` ``` ```` or ``~~~``) outside a call are not scanned, nor is
  reasoning: a leading ``<think>…</think>`` or, when the text does not open one, the text
  before a ``</think>`` that comes before any marker (servers that strip the opening tag);
- the markup must hold a JSON object (or a list of them) with a ``"name"``; when tool names are
  given, a name outside them leaves the whole markup as text;
- bare JSON counts only when it is the whole text (after reasoning; alone in a ```` ```json ````
  fence or a ``<tools>`` tag counts too), has no keys besides name / arguments / parameters /
  type, and names one of the given tools.

Text that is not a call is returned exactly as it came. The function is pure (no I/O, no
state), so it serves a complete answer and the text accumulated from a finished stream alike;
:func:`with_text_tool_calls` applies it to the text blocks of an assistant :class:`Msg`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from memdir.errors import ConfigError
from memdir.messages._msg import Block, Msg, TextBlock, ToolUseBlock, _new_id
from memdir.messages._openai_format import RAW_ARGUMENTS_KEY, parse_arguments

__all__ = ["extract_text_tool_calls", "with_text_tool_calls"]

_DECODER = json.JSONDecoder(strict=False)  # small models put raw newlines inside strings

_HERMES_OPEN, _HERMES_CLOSE = "<tool_call>", "</tool_call>"
_MISTRAL, _PYTHON_TAG = "[TOOL_CALLS]", "<|python_tag|>"

_MARKER = r"(?P<marker><tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>)"
_LINE_START = re.compile(rf"^[ \t]{{0,3}}(?:(?P<fence>`{{3,}}|~{{3,}})|{_MARKER})", re.MULTILINE)
_CHAINED = re.compile(rf"[ \t]*{_MARKER}")
_INNER_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})[^\n`]*\n")
_INNER_FENCE_CLOSE = re.compile(r"`{3,}|~{3,}")
_MISTRAL_NAMED = re.compile(r"([A-Za-z_][\w.-]*)(?:\[CALL_ID\][A-Za-z0-9_-]*)?\[ARGS\]")
_END_TOKENS = re.compile(r"[ \t]*(?:<\|eom_id\|>|<\|eot_id\|>)")
_NAME_IN_BROKEN = re.compile(r'^\{\s*"name"\s*:\s*"([^"\\]+)"')
_ARGUMENTS_KEY = re.compile(r'\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_STRAY = " \t\r\n}`"  # what may follow a call's JSON before its closing tag
_BARE_KEYS = frozenset({"name", "arguments", "parameters", "type"})

# Mistral's chat templates reject tool-call ids that are not 9 alphanumeric characters.
_MISTRAL_ID_LENGTH = 9


def extract_text_tool_calls(
    text: str, tool_names: Collection[str] | None
) -> tuple[str, list[ToolUseBlock]]:
    """Find the tool calls a model wrote as text; return the remaining text and the calls.

    Args:
        text: the model's answer text. For a stream, pass all of its text once it has
            ended: a call cut off mid-stream would be read as one with broken JSON.
        tool_names: the names of the tools offered in the request. Only these names count;
            an empty collection finds nothing. ``None`` (names unknown) accepts any name in
            the tagged formats and disables the two that rely on the names: bare JSON and
            calls whose JSON is broken.

    Returns:
        ``(remaining, calls)``. With no call found, ``remaining`` is ``text`` unchanged.
        Otherwise the call markup is removed and the text around it joined by a blank line,
        stripped. Each call gets a fresh id (9 alphanumeric characters for the Mistral
        format, whose templates insist on it); arguments that are not a JSON object (broken
        JSON, a list) are kept verbatim under ``input["_raw_arguments"]``, and a tag whose
        JSON is broken but opens with ``{"name": "<offered tool>"`` becomes a call with the
        tag's whole body kept there, so nothing the model wrote is lost.

    Raises:
        ConfigError: ``text`` is not a string, or ``tool_names`` is not a collection of
            strings (or ``None``).
    """
    if not isinstance(text, str):
        raise ConfigError(f"text must be a string, not {type(text).__name__}")
    names = _names(tool_names)
    if names is not None and not names:
        return text, []
    start = _reasoning_end(text)
    spans: list[tuple[int, int]] = []
    calls: list[ToolUseBlock] = []
    pos = start
    chained: re.Match[str] | None = None
    while True:
        found = chained or _LINE_START.search(text, pos)
        if found is None:
            break
        marker = found.group("marker")
        if marker is None:  # a fenced code block: skip to its closing fence
            pos = _fence_end(text, found.end(), found.group("fence"))
            continue
        parsed = _parse_marker(text, marker, found.end(), names)
        chained = None
        if parsed is None:
            pos = found.end()
            continue
        end, found_calls = parsed
        spans.append((found.start("marker"), end))
        calls.extend(found_calls)
        pos = end
        chained = _CHAINED.match(text, end)
    if not calls and names is not None:
        bare = _bare_call(text[start:], names)
        if bare is not None:
            spans.append((start, len(text)))
            calls.append(bare)
    if not calls:
        return text, []
    return _remaining(text, spans), calls


def with_text_tool_calls(message: Msg, tool_names: Collection[str] | None) -> Msg:
    """``message`` with the tool calls written in its text blocks turned into tool calls.

    Each text block is read by :func:`extract_text_tool_calls`; a block left empty is
    dropped, the calls follow the other blocks. Returns ``message`` itself when no call is
    found (and when it already holds structured calls: those are not mixed with text ones).
    """
    if message.tool_uses:
        return message
    kept: list[Block] = []
    calls: list[ToolUseBlock] = []
    for block in message.content:
        if not isinstance(block, TextBlock):
            kept.append(block)
            continue
        remaining, found = extract_text_tool_calls(block.text, tool_names)
        if not found:
            kept.append(block)
            continue
        calls.extend(found)
        if remaining:
            kept.append(TextBlock(text=remaining))
    if not calls:
        return message
    return message.with_content([*kept, *calls])


def _names(tool_names: Collection[str] | None) -> frozenset[str] | None:
    if tool_names is None:
        return None
    if isinstance(tool_names, str) or not isinstance(tool_names, Collection):
        raise ConfigError(
            f"tool_names must be a collection of tool names or None, not {tool_names!r:.60}"
        )
    for name in tool_names:
        if not isinstance(name, str):
            raise ConfigError(f"tool names must be strings, not {type(name).__name__}")
    return frozenset(tool_names)


def _reasoning_end(text: str) -> int:
    """Where the reasoning at the head of ``text`` ends (0 when there is none)."""
    head = len(text) - len(text.lstrip())
    if text.startswith("<think>", head):
        close = text.find("</think>", head)
        return len(text) if close < 0 else close + len("</think>")
    close = text.find("</think>")
    if close < 0:
        return 0
    for found in _LINE_START.finditer(text, 0, close):
        if found.group("marker"):  # a call comes first: this </think> is not a reasoning end
            return 0
    return close + len("</think>")


def _fence_end(text: str, after_open: int, fence: str) -> int:
    closing = re.compile(
        rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE
    )
    line_end = text.find("\n", after_open)
    if line_end < 0:
        return len(text)
    found = closing.search(text, line_end + 1)
    return len(text) if found is None else found.end()


def _parse_marker(
    text: str, marker: str, at: int, names: frozenset[str] | None
) -> tuple[int, list[ToolUseBlock]] | None:
    if marker == _HERMES_OPEN:
        return _hermes(text, at, names)
    if marker == _MISTRAL:
        return _mistral(text, at, names)
    return _python_tag(text, at, names)


def _hermes(
    text: str, at: int, names: frozenset[str] | None
) -> tuple[int, list[ToolUseBlock]] | None:
    pos = _skip_space(text, at)
    fence = _INNER_FENCE_OPEN.match(text, pos)
    if fence:
        pos = _skip_space(text, fence.end())
    decoded = _decode(text, pos)
    if decoded is None:
        return _hermes_broken(text, at, names)
    value, pos = decoded
    calls = _calls_of(value, names)
    if calls is None:
        return None
    pos = _skip_space(text, pos)
    if fence and (closing := _INNER_FENCE_CLOSE.match(text, pos)):
        pos = _skip_space(text, closing.end())
    if text.startswith(_HERMES_CLOSE, pos):
        return pos + len(_HERMES_CLOSE), calls
    if pos == len(text) or text.startswith(_HERMES_OPEN, pos):  # unclosed: stopped early
        return pos, calls
    close = text.find(_HERMES_CLOSE, pos)
    if close >= 0 and not text[pos:close].strip(_STRAY):  # a stray brace after the JSON
        return close + len(_HERMES_CLOSE), calls
    return None


def _hermes_broken(
    text: str, at: int, names: frozenset[str] | None
) -> tuple[int, list[ToolUseBlock]] | None:
    if names is None:
        return None
    close = text.find(_HERMES_CLOSE, at)
    end = len(text) if close < 0 else close
    body = text[at:end].strip()
    fence = _INNER_FENCE_OPEN.match(body)
    inner = body[fence.end() :].strip() if fence else body
    named = _NAME_IN_BROKEN.match(inner)
    if named is None or named.group(1) not in names:
        return None
    arguments: dict[str, Any] = {RAW_ARGUMENTS_KEY: body}
    key = _ARGUMENTS_KEY.match(inner, named.end())
    decoded = _decode(inner, key.end()) if key else None
    if decoded and isinstance(decoded[0], dict) and not inner[decoded[1] :].strip(_STRAY):
        arguments = decoded[0]  # only the outer braces were wrong
    call = ToolUseBlock(id=_new_id(), name=named.group(1), input=arguments)
    return (end if close < 0 else close + len(_HERMES_CLOSE)), [call]


def _mistral(
    text: str, at: int, names: frozenset[str] | None
) -> tuple[int, list[ToolUseBlock]] | None:
    pos = _skip_space(text, at)
    named = _MISTRAL_NAMED.match(text, pos)
    if named:  # [TOOL_CALLS]name[ARGS]{...}
        decoded = _decode(text, named.end())
        if decoded is None:
            return None
        value: Any = {"name": named.group(1), "arguments": decoded[0]}
        pos = decoded[1]
    else:
        decoded = _decode(text, pos)
        if decoded is None:
            return None
        value, pos = decoded
    calls = _calls_of(value, names, id_length=_MISTRAL_ID_LENGTH)
    if calls is None or not _line_ends(text, pos):
        return None
    return pos, calls


def _python_tag(
    text: str, at: int, names: frozenset[str] | None
) -> tuple[int, list[ToolUseBlock]] | None:
    calls: list[ToolUseBlock] = []
    pos = at
    while True:
        decoded = _decode(text, _skip_space(text, pos))
        if decoded is None or not isinstance(decoded[0], dict):
            return None
        found = _calls_of(decoded[0], names)
        if found is None:
            return None
        calls.extend(found)
        pos = _skip_space(text, decoded[1], newlines=False)
        if not text.startswith(";", pos):
            break
        pos += 1
    if ending := _END_TOKENS.match(text, pos):
        pos = ending.end()
    return (pos, calls) if _line_ends(text, pos) else None


# Whole-answer wrappers small models put around a bare call: a ```json fence (Qwen2.5-Coder
# does this under memdir's prompt more often than it writes <tool_call>), or the <tools> tag
# its chat template lists the tools in.
_WHOLE_WRAPPER = re.compile(
    r"\A(?:(?P<fence>`{3,}|~{3,})[ \t]*(?:json)?[ \t]*\n(?P<fenced>.*)\n[ \t]*(?P=fence)"
    r"|<tools>(?P<tagged>.*)</tools>)\Z",
    re.DOTALL | re.IGNORECASE,
)


def _bare_call(text: str, names: frozenset[str]) -> ToolUseBlock | None:
    body = text.strip()
    wrapped = _WHOLE_WRAPPER.match(body)
    if wrapped is not None:
        body = (wrapped.group("fenced") or wrapped.group("tagged") or "").strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    decoded = _decode(body, 0)
    if decoded is None or decoded[1] != len(body) or not isinstance(decoded[0], dict):
        return None
    value = decoded[0]
    arguments = value.get("arguments", value.get("parameters"))
    if (
        not set(value) <= _BARE_KEYS
        or value.get("type", "function") != "function"
        or not isinstance(arguments, dict)
    ):
        return None
    calls = _calls_of(value, names)
    return calls[0] if calls else None


def _calls_of(
    value: object, names: frozenset[str] | None, *, id_length: int | None = None
) -> list[ToolUseBlock] | None:
    """The calls in a decoded JSON value, or ``None`` if any item is not a call."""
    items = value if isinstance(value, list) else [value]
    calls: list[ToolUseBlock] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        function = item.get("function")
        if "name" not in item and isinstance(function, dict):  # {"function": {"name": ...}}
            item = function
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            return None
        if names is not None and name not in names:
            return None
        arguments = item["arguments"] if "arguments" in item else item.get("parameters")
        call_id = _new_id()[:id_length] if id_length else _new_id()
        calls.append(ToolUseBlock(id=call_id, name=name, input=_arguments(arguments)))
    return calls or None


def _arguments(arguments: object) -> dict[str, Any]:
    if arguments is None or isinstance(arguments, str | dict):
        return parse_arguments(arguments)
    return {RAW_ARGUMENTS_KEY: json.dumps(arguments, ensure_ascii=False)}


def _decode(text: str, pos: int) -> tuple[Any, int] | None:
    if pos >= len(text) or text[pos] not in "{[":
        return None
    try:
        return _DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None


def _skip_space(text: str, pos: int, *, newlines: bool = True) -> int:
    blank = " \t\r\n" if newlines else " \t"
    while pos < len(text) and text[pos] in blank:
        pos += 1
    return pos


def _line_ends(text: str, pos: int) -> bool:
    """Whether nothing but spaces follows ``pos`` on its line, or another marker does."""
    rest = _skip_space(text, pos, newlines=False)
    return rest == len(text) or text[rest] in "\r\n" or _CHAINED.match(text, pos) is not None


def _remaining(text: str, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    pos = 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return "\n\n".join(p for p in (piece.strip() for piece in pieces) if p)
