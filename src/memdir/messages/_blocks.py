"""Content blocks (text, thinking, image, tool call, tool result), their checks and JSON form.

Public names are re-exported by :mod:`memdir.messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from memdir.errors import MemdirError

__all__ = [
    "BLOCK_TYPES",
    "Block",
    "ImageBlock",
    "MessageFormatError",
    "MissingToolCallIdError",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UnknownRoleError",
    "block_from_dict",
    "block_to_dict",
    "check_block",
]


class MessageFormatError(MemdirError, ValueError):
    """A message or content block is malformed (wrong type, missing field, bad JSON)."""


class UnknownRoleError(MessageFormatError):
    """A message has a role memdir does not know."""


class MissingToolCallIdError(MessageFormatError):
    """A tool call or tool result has no id, so calls and results cannot be paired."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    """Plain text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingBlock:
    """Model reasoning. ``signature`` is the provider's integrity token (Anthropic).

    ``redacted`` marks Anthropic ``redacted_thinking`` blocks, whose opaque payload is kept in
    ``signature`` and whose ``thinking`` is empty.
    """

    thinking: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageBlock:
    """An image given by URL or ``data:`` URI."""

    source: str
    media_type: str | None = None
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUseBlock:
    """A tool call made by the assistant. ``input`` holds the parsed JSON arguments."""

    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultBlock:
    """The result of the tool call ``tool_use_id``."""

    tool_use_id: str
    name: str | None = None
    output: str | list[TextBlock | ImageBlock] = ""
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        """The output as text (text parts joined by newlines; images left out)."""
        if isinstance(self.output, str):
            return self.output
        return "\n".join(p.text for p in self.output if isinstance(p, TextBlock))


Block: TypeAlias = TextBlock | ThinkingBlock | ImageBlock | ToolUseBlock | ToolResultBlock
BLOCK_TYPES = (TextBlock, ThinkingBlock, ImageBlock, ToolUseBlock, ToolResultBlock)


def check_block(block: Block) -> None:
    """Check the field types of ``block`` (dataclasses do not).

    Raises:
        MessageFormatError: a field has the wrong type or a required one is empty.
    """
    if isinstance(block, TextBlock):
        _need_str(block.text, "text block 'text'")
    elif isinstance(block, ThinkingBlock):
        _need_str(block.thinking, "thinking block 'thinking'")
        if block.signature is not None:
            _need_str(block.signature, "thinking block 'signature'")
    elif isinstance(block, ImageBlock):
        _need_str(block.source, "image block 'source'")
        if not block.source:
            raise MessageFormatError("an image block needs a URL or data: URI source")
        if block.media_type is not None:
            _need_str(block.media_type, "image block 'media_type'")
    elif isinstance(block, ToolUseBlock):
        if not isinstance(block.id, str) or not block.id:
            raise MissingToolCallIdError(f"tool call {block.name!r} has no id")
        if not isinstance(block.name, str) or not block.name:
            raise MessageFormatError(f"tool call {block.id!r} has no tool name")
        if not isinstance(block.input, dict):
            raise MessageFormatError(f"tool call {block.id!r}: input must be a JSON object")
    else:
        if not isinstance(block.tool_use_id, str) or not block.tool_use_id:
            raise MissingToolCallIdError("a tool result has no tool_use_id")
        if block.name is not None:
            _need_str(block.name, "tool result 'name'")
        if isinstance(block.output, list):
            for part in block.output:
                if not isinstance(part, TextBlock | ImageBlock):
                    raise MessageFormatError(
                        f"tool result {block.tool_use_id!r}: output parts must be text or images"
                    )
                check_block(part)
        else:
            _need_str(block.output, "tool result 'output'")


def _need_str(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise MessageFormatError(f"{what} must be a string, not {type(value).__name__}")


def block_to_dict(block: Block) -> dict[str, Any]:
    """The JSON form of a block (``type`` first; optional fields omitted when unset)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        d: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            d["signature"] = block.signature
        if block.redacted:
            d["redacted"] = True
        return d
    if isinstance(block, ImageBlock):
        d = {"type": "image", "source": block.source}
        if block.media_type is not None:
            d["media_type"] = block.media_type
        return d
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    output: Any = (
        block.output if isinstance(block.output, str) else [block_to_dict(p) for p in block.output]
    )
    d = {"type": "tool_result", "tool_use_id": block.tool_use_id, "output": output}
    if block.name is not None:
        d["name"] = block.name
    if block.is_error:
        d["is_error"] = True
    return d


def block_from_dict(data: Mapping[str, Any]) -> Block:
    """Rebuild a block from :func:`block_to_dict` output.

    Raises:
        MessageFormatError: for an unknown ``type`` or a missing field.
    """
    if not isinstance(data, Mapping):
        raise MessageFormatError(f"a content block must be a JSON object, not {data!r}")
    kind = data.get("type")
    try:
        if kind == "text":
            block: Block = TextBlock(text=data["text"])
        elif kind == "thinking":
            block = ThinkingBlock(
                thinking=data["thinking"],
                signature=data.get("signature"),
                redacted=bool(data.get("redacted", False)),
            )
        elif kind == "image":
            block = ImageBlock(source=data["source"], media_type=data.get("media_type"))
        elif kind == "tool_use":
            block = ToolUseBlock(id=data["id"], name=data["name"], input=data.get("input", {}))
        elif kind == "tool_result":
            raw = data.get("output", "")
            output: str | list[TextBlock | ImageBlock]
            if isinstance(raw, list):
                output = []
                for part in raw:
                    parsed = block_from_dict(part)
                    if not isinstance(parsed, TextBlock | ImageBlock):
                        raise MessageFormatError("tool result output parts must be text or images")
                    output.append(parsed)
            else:
                output = raw
            block = ToolResultBlock(
                tool_use_id=data["tool_use_id"],
                name=data.get("name"),
                output=output,
                is_error=bool(data.get("is_error", False)),
            )
        else:
            raise MessageFormatError(f"unknown content block type {kind!r}")
    except KeyError as exc:
        if exc.args[0] in ("id", "tool_use_id"):
            raise MissingToolCallIdError(f"{kind} block has no {exc.args[0]!r}") from None
        raise MessageFormatError(f"{kind} block has no {exc.args[0]!r}") from None
    check_block(block)
    return block
