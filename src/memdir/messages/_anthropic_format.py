"""Conversion between :class:`~memdir.messages.Msg` and the Anthropic Messages format.

The Messages API keeps the system prompt apart and has only user and assistant turns: tool
calls are ``tool_use`` blocks in assistant turns, results are ``tool_result`` blocks at the head
of the next user turn. On the way out, every system message is hoisted into the system prompt
(in order, joined by blank lines), consecutive turns of one role are merged, blank text blocks,
unsigned thinking blocks (which the API rejects) and images in assistant turns are dropped, and
names, ids and metadata are lost. On the way in, a user turn is split into a ``tool`` message
(its results) and a ``user`` message (everything else), in their original order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
from memdir.messages._openai_format import media_type_of

__all__ = ["from_anthropic", "to_anthropic"]


def to_anthropic(msgs: Iterable[Msg]) -> tuple[str | None, list[dict[str, Any]]]:
    """Messages as ``(system, messages)`` for the Anthropic Messages API."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for msg in as_list(msgs, "to_anthropic", of_msgs=True):
        if msg.role == "system":
            if msg.text.strip():
                system.append(msg.text)
            continue
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = [d for b in msg.content if (d := _block_out(b, role)) is not None]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # The API wants tool results before any other block of the turn.
            turn["content"].sort(key=lambda d: d["type"] != "tool_result")
    return ("\n\n".join(system) or None), turns


def _block_out(block: Block, role: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ThinkingBlock):
        if block.signature is None:
            return None
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ImageBlock):
        return _image_out(block) if role == "user" else None
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    if isinstance(block.output, str):
        if block.output:
            out["content"] = block.output
    else:
        parts = [_block_out(p, "user") for p in block.output]
        out["content"] = [p for p in parts if p is not None]
    if block.is_error:
        out["is_error"] = True
    return out


def _image_out(image: ImageBlock) -> dict[str, Any]:
    if image.source.startswith("data:"):
        head, _, data = image.source[5:].partition(",")
        media_type = image.media_type or head.split(";", 1)[0]
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": image.source}}


def from_anthropic(
    system: str | Sequence[Mapping[str, Any]] | None, messages: Iterable[Mapping[str, Any]]
) -> list[Msg]:
    """Anthropic ``system`` and ``messages`` as :class:`Msg` values.

    Raises:
        UnknownRoleError: for a turn whose role is not user or assistant.
        MissingToolCallIdError: for a tool_use or tool_result block without an id.
        MessageFormatError: for an unsupported block type or other malformed input.
    """
    out: list[Msg] = []
    turns = as_list(messages, "from_anthropic")
    if system is not None and not isinstance(system, str):
        system = as_list(system, "the system prompt")
    if system:
        text = system if isinstance(system, str) else "\n\n".join(_texts(system))
        if text:
            out.append(Msg.system(text))
    call_names: dict[str, str] = {}
    for index, turn in enumerate(turns):
        try:
            msgs = _turn_in(turn, call_names)
        except MessageFormatError as exc:
            raise type(exc)(f"Anthropic message #{index}: {exc}") from None
        out.extend(msgs)
    return out


def _texts(blocks: Sequence[Mapping[str, Any]]) -> list[str]:
    texts = []
    for block in blocks:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise MessageFormatError("the system prompt must be a string or a list of text blocks")
        texts.append(str(block.get("text", "")))
    return texts


def _turn_in(turn: Mapping[str, Any], call_names: dict[str, str]) -> list[Msg]:
    if not isinstance(turn, Mapping):
        raise MessageFormatError(f"expected a JSON object, got {type(turn).__name__}")
    role = turn.get("role")
    if role not in ("user", "assistant"):
        raise UnknownRoleError(f"unknown role {role!r}: expected user or assistant")
    content = turn.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MessageFormatError("'content' must be a string or a list of blocks")
    if role == "assistant":
        blocks = [_assistant_block(b) for b in content]
        call_names.update((b.id, b.name) for b in blocks if isinstance(b, ToolUseBlock))
        return [Msg(role="assistant", content=tuple(blocks))]
    # Split a user turn into runs of tool results and of other blocks, keeping their order.
    runs: list[tuple[str, list[Block]]] = []
    for raw in content:
        block = _user_block(raw, call_names)
        kind = "tool" if isinstance(block, ToolResultBlock) else "user"
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(block)
        else:
            runs.append((kind, [block]))
    if not runs:
        return [Msg(role="user", content=())]
    return [Msg(role=kind, content=tuple(blocks)) for kind, blocks in runs]  # type: ignore[arg-type]


def _assistant_block(raw: object) -> Block:
    if not isinstance(raw, Mapping):
        raise MessageFormatError("a content block must be a JSON object")
    kind = raw.get("type")
    if kind == "text":
        return TextBlock(text=raw.get("text", ""))
    if kind == "thinking":
        return ThinkingBlock(thinking=raw.get("thinking", ""), signature=raw.get("signature"))
    if kind == "redacted_thinking":
        return ThinkingBlock(thinking="", signature=raw.get("data", ""), redacted=True)
    if kind == "tool_use":
        call_id = raw.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise MissingToolCallIdError("tool_use block has no 'id'")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise MessageFormatError(f"tool_use block {call_id!r} has no 'name'")
        return ToolUseBlock(id=call_id, name=name, input=raw.get("input", {}))
    raise MessageFormatError(f"unsupported assistant content block {kind!r}")


def _user_block(raw: object, call_names: Mapping[str, str]) -> Block:
    if not isinstance(raw, Mapping):
        raise MessageFormatError("a content block must be a JSON object")
    kind = raw.get("type")
    if kind == "text":
        return TextBlock(text=raw.get("text", ""))
    if kind == "image":
        return _image_in(raw)
    if kind == "tool_result":
        call_id = raw.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise MissingToolCallIdError("tool_result block has no 'tool_use_id'")
        content = raw.get("content", "")
        output: str | list[TextBlock | ImageBlock]
        if content is None or isinstance(content, str):
            output = content or ""
        elif isinstance(content, list):
            output = []
            for part in content:
                block = _user_block(part, call_names)
                if not isinstance(block, TextBlock | ImageBlock):
                    raise MessageFormatError("tool_result content must be text or image blocks")
                output.append(block)
        else:
            raise MessageFormatError("tool_result 'content' must be a string or a list")
        return ToolResultBlock(
            tool_use_id=call_id,
            name=call_names.get(call_id),
            output=output,
            is_error=bool(raw.get("is_error", False)),
        )
    raise MessageFormatError(f"unsupported user content block {kind!r}")


def _image_in(raw: Mapping[str, Any]) -> ImageBlock:
    source = raw.get("source")
    if not isinstance(source, Mapping):
        raise MessageFormatError("image block has no 'source'")
    if source.get("type") == "base64":
        media_type = source.get("media_type")
        if not isinstance(media_type, str) or not media_type:
            raise MessageFormatError("base64 image source has no 'media_type'")
        uri = f"data:{media_type};base64,{source.get('data', '')}"
        return ImageBlock(source=uri, media_type=media_type)
    if source.get("type") == "url" and source.get("url"):
        url = str(source["url"])
        return ImageBlock(source=url, media_type=media_type_of(url))
    raise MessageFormatError(f"unsupported image source type {source.get('type')!r}")
