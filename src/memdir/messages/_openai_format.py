"""Conversion between :class:`~memdir.messages.Msg` and the OpenAI chat-completions format.

What the format cannot carry is dropped on the way out: thinking blocks (servers that return
``reasoning_content`` reject it in requests), images in assistant turns, a tool result's
``is_error`` flag, and message ids and metadata. Each tool result becomes its own ``tool``
message; on the way in, a result's tool name is recovered from the call it answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memdir.messages._msg import (
    Block,
    ImageBlock,
    MessageFormatError,
    MissingToolCallIdError,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownRoleError,
    as_list,
)

__all__ = ["RAW_ARGUMENTS_KEY", "from_openai", "media_type_of", "parse_arguments", "to_openai"]

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Key under which tool-call arguments that are not a JSON object are kept verbatim."""


def to_openai(msgs: Iterable[Msg]) -> list[dict[str, Any]]:
    """Messages in the OpenAI chat format (``messages=`` of ``/chat/completions``)."""
    out: list[dict[str, Any]] = []
    for msg in as_list(msgs, "to_openai", of_msgs=True):
        if msg.role == "tool":
            out.extend(
                {"role": "tool", "tool_call_id": r.tool_use_id, "content": _result_content(r)}
                for r in msg.tool_results
            )
            continue
        item: dict[str, Any] = {"role": msg.role}
        if msg.role == "assistant":
            texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
            if not texts:
                item["content"] = None
            elif len(texts) == 1:
                item["content"] = texts[0]
            else:
                item["content"] = [{"type": "text", "text": t} for t in texts]
            if msg.tool_uses:
                item["tool_calls"] = [_call_to_openai(c) for c in msg.tool_uses]
        else:
            blocks = msg.content
            if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
                item["content"] = blocks[0].text
            else:
                item["content"] = [_part_to_openai(b) for b in blocks]
        if msg.name is not None:
            item["name"] = msg.name
        out.append(item)
    return out


def _call_to_openai(call: ToolUseBlock) -> dict[str, Any]:
    raw = call.input.get(RAW_ARGUMENTS_KEY)
    if set(call.input) == {RAW_ARGUMENTS_KEY} and isinstance(raw, str):
        arguments = raw  # give the model back exactly what it wrote
    else:
        arguments = json.dumps(call.input, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _part_to_openai(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image_url", "image_url": {"url": block.source}}
    raise MessageFormatError(f"a {block.type!r} block cannot be sent as an OpenAI content part")


def _result_content(result: ToolResultBlock) -> str | list[dict[str, Any]]:
    if isinstance(result.output, str):
        return result.output
    # Tool messages accept text parts only: an image is named so the model knows one was there.
    return [
        {"type": "text", "text": p.text}
        if isinstance(p, TextBlock)
        else {"type": "text", "text": f"[image: {_describe_image(p)}]"}
        for p in result.output
    ]


def _describe_image(image: ImageBlock) -> str:
    if image.source.startswith("data:"):
        return image.media_type or image.source[5:].split(";", 1)[0] or "inline data"
    return image.source


def media_type_of(source: str) -> str | None:
    """The media type of a ``data:`` URI (``None`` for URLs)."""
    if source.startswith("data:"):
        head = source[5:].split(",", 1)[0]
        return head.split(";", 1)[0] or None
    return None


def parse_arguments(arguments: object) -> dict[str, Any]:
    """Tool-call arguments as a dict; anything but a JSON object is kept under
    :data:`RAW_ARGUMENTS_KEY` so that nothing the model wrote is lost."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        return {RAW_ARGUMENTS_KEY: arguments}
    raise MessageFormatError(f"tool-call arguments must be a JSON string, not {arguments!r}")


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[Msg]:
    """Messages in the OpenAI chat format as :class:`Msg` (one per OpenAI message).

    ``developer`` messages become system messages; ``reasoning_content`` (DeepSeek, vLLM,
    Qwen) becomes a :class:`ThinkingBlock`.

    Raises:
        UnknownRoleError: for a role other than system/developer/user/assistant/tool.
        MissingToolCallIdError: for a tool call or tool message without an id.
        MessageFormatError: for any other malformed message.
    """
    out: list[Msg] = []
    call_names: dict[str, str] = {}
    for index, item in enumerate(as_list(messages, "from_openai")):
        try:
            msg = _msg_from_openai(item, call_names)
        except MessageFormatError as exc:
            raise type(exc)(f"OpenAI message #{index}: {exc}") from None
        call_names.update((c.id, c.name) for c in msg.tool_uses)
        out.append(msg)
    return out


def _msg_from_openai(item: Mapping[str, Any], call_names: Mapping[str, str]) -> Msg:
    if not isinstance(item, Mapping):
        raise MessageFormatError(f"expected a JSON object, got {type(item).__name__}")
    role = item.get("role")
    name = item.get("name")
    content = item.get("content")
    if role in ("system", "developer"):
        return Msg(role="system", content=_parts_from_openai(content), name=name)
    if role == "user":
        return Msg(role="user", content=_parts_from_openai(content), name=name)
    if role == "assistant":
        blocks: list[Block] = []
        reasoning = item.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            blocks.append(ThinkingBlock(thinking=reasoning))
        blocks.extend(_parts_from_openai(content))
        if item.get("function_call") is not None:
            raise MessageFormatError("legacy 'function_call' is not supported: use 'tool_calls'")
        for call in item.get("tool_calls") or ():
            blocks.append(_call_from_openai(call))
        return Msg(role="assistant", content=tuple(blocks), name=name)
    if role == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise MissingToolCallIdError("tool message has no 'tool_call_id'")
        output: str | list[TextBlock | ImageBlock]
        if content is None or isinstance(content, str):
            output = content or ""
        else:
            output = [b for b in _parts_from_openai(content) if isinstance(b, TextBlock)]
        result = ToolResultBlock(
            tool_use_id=call_id, name=name or call_names.get(call_id), output=output
        )
        return Msg(role="tool", content=(result,))
    if role == "function":
        raise UnknownRoleError("legacy 'function' role is not supported: use 'tool' messages")
    raise UnknownRoleError(f"unknown role {role!r}: expected system, user, assistant or tool")


def _parts_from_openai(content: object) -> tuple[TextBlock | ImageBlock, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextBlock(text=content),)
    if not isinstance(content, list):
        raise MessageFormatError("'content' must be a string, a list of parts or null")
    blocks: list[TextBlock | ImageBlock] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            blocks.append(TextBlock(text=part.get("text", "")))
        elif kind == "refusal":
            blocks.append(TextBlock(text=part.get("refusal", "")))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str) or not url:
                raise MessageFormatError("image_url part has no url")
            blocks.append(ImageBlock(source=url, media_type=media_type_of(url)))
        else:
            raise MessageFormatError(f"unsupported content part type {kind!r}")
    return tuple(blocks)


def _call_from_openai(call: object) -> ToolUseBlock:
    if not isinstance(call, Mapping):
        raise MessageFormatError("a tool call must be a JSON object")
    if call.get("type", "function") != "function":
        raise MessageFormatError(f"unsupported tool call type {call.get('type')!r}")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise MissingToolCallIdError("tool call has no 'id'")
    function = call.get("function")
    if not isinstance(function, Mapping) or not function.get("name"):
        raise MessageFormatError(f"tool call {call_id!r} has no function name")
    return ToolUseBlock(
        id=call_id, name=function["name"], input=parse_arguments(function.get("arguments"))
    )
