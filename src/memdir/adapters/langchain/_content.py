"""Content parts of LangChain messages and memdir blocks, and the template of a content list.

A part a block can hold (text, image, reasoning) becomes that block; the template of a message's
content records, in order, which block each part came from (and the part's other keys), the parts
no block holds (kept verbatim) and the tool-call parts that repeat one of the message's tool
calls. :func:`fill` rebuilds the content from the template and the current blocks, or says that
they no longer fit it. No text of a block is ever in a template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from memdir.messages import (
    Block,
    ImageBlock,
    MessageFormatError,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

__all__ = ["content_in", "content_out", "default_content", "plain"]

# Content parts each role's blocks can hold (the rest of a part list is kept verbatim).
_HOLDS: Final[dict[str, tuple[type, ...]]] = {
    "user": (TextBlock, ImageBlock),
    "assistant": (TextBlock, ImageBlock, ThinkingBlock),
    "system": (TextBlock,),
    "tool": (TextBlock, ImageBlock),
}


def _data_uri(media_type: str | None, data: str) -> str:
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def _split_data_uri(source: str) -> tuple[str | None, str] | None:
    if not source.startswith("data:") or ";base64," not in source:
        return None
    head, data = source[5:].split(";base64,", 1)
    return head or None, data


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _part_to_block(part: Mapping[str, Any]) -> tuple[str, Block, dict[str, Any]] | None:
    """``(shape, block, rest)`` for a part a block can hold, else ``None``.

    ``rest`` is the part without what the block holds; ``_block_to_part`` puts it back.
    """
    kind = part.get("type")
    rest = dict(part)
    if kind == "text" and _str(part.get("text")) is not None:
        del rest["text"]
        return "text", TextBlock(text=part["text"]), rest
    if kind == "reasoning" and _str(part.get("reasoning")) is not None:
        del rest["reasoning"]
        return "reasoning", ThinkingBlock(thinking=part["reasoning"]), rest
    if kind == "thinking" and _str(part.get("thinking")) is not None:
        signature = part.get("signature")
        if signature is not None and not isinstance(signature, str):
            return None
        rest.pop("thinking")
        rest.pop("signature", None)
        shape = "thinking_signed" if "signature" in part else "thinking"
        return shape, ThinkingBlock(thinking=part["thinking"], signature=signature), rest
    if kind == "redacted_thinking" and _str(part.get("data")):
        del rest["data"]
        block = ThinkingBlock(thinking="", signature=part["data"], redacted=True)
        return "redacted_thinking", block, rest
    if kind == "image_url":
        inner = part.get("image_url")
        if isinstance(inner, str):
            del rest["image_url"]
            return "image_url_str", _image(inner), rest
        if isinstance(inner, Mapping) and _str(inner.get("url")):
            rest["image_url"] = {k: v for k, v in inner.items() if k != "url"}
            return "image_url", _image(inner["url"]), rest
        return None
    if kind == "image":
        return _image_part(part, rest)
    return None


def _image(url: str, media_type: str | None = None) -> ImageBlock:
    if media_type is None and (split := _split_data_uri(url)) is not None:
        media_type = split[0]
    return ImageBlock(source=url, media_type=media_type)


def _image_part(
    part: Mapping[str, Any], rest: dict[str, Any]
) -> tuple[str, Block, dict[str, Any]] | None:
    mime = part.get("mime_type")
    if mime is not None and not isinstance(mime, str):
        return None
    if "source_type" not in part and "source" not in part:  # LangChain v1 standard blocks
        if _str(part.get("url")) and "base64" not in part:
            del rest["url"]
            return "image_v1_url", _image(part["url"], mime), rest
        if _str(part.get("base64")) and "url" not in part:
            del rest["base64"]
            rest.pop("mime_type", None)
            return (
                "image_v1_base64",
                ImageBlock(source=_data_uri(mime, part["base64"]), media_type=mime),
                rest,
            )
        return None
    source = part.get("source")
    if isinstance(source, Mapping):  # Anthropic
        media = source.get("media_type")
        if source.get("type") == "base64" and _str(source.get("data")) and _str(media):
            rest["source"] = {k: v for k, v in source.items() if k not in ("data", "media_type")}
            return (
                "image_anthropic_base64",
                ImageBlock(source=_data_uri(media, source["data"]), media_type=media),
                rest,
            )
        if source.get("type") == "url" and _str(source.get("url")):
            rest["source"] = {k: v for k, v in source.items() if k != "url"}
            return "image_anthropic_url", _image(source["url"]), rest
        return None
    source_type = part.get("source_type")
    if source_type == "url" and _str(part.get("url")):
        del rest["url"]
        return "image_source_url", _image(part["url"], mime), rest
    if source_type == "base64" and _str(part.get("data")) and mime:
        del rest["data"]
        rest.pop("mime_type")
        return (
            "image_source_base64",
            ImageBlock(source=_data_uri(mime, part["data"]), media_type=mime),
            rest,
        )
    return None


def _block_to_part(shape: str, block: Block, rest: Mapping[str, Any]) -> Any:
    """The part of ``shape`` holding ``block``, or ``None`` if the block no longer fits it."""
    part = dict(rest)
    if isinstance(block, TextBlock):
        if shape == "str":
            return block.text
        if shape == "text":
            part["text"] = block.text
            return part
        return None
    if isinstance(block, ThinkingBlock):
        if shape == "redacted_thinking" and block.redacted and block.signature:
            part["data"] = block.signature
        elif block.redacted:
            return None
        elif shape == "reasoning" and block.signature is None:
            part["reasoning"] = block.thinking
        elif shape == "thinking" and block.signature is None:
            part["thinking"] = block.thinking
        elif shape == "thinking_signed" and block.signature is not None:
            part["thinking"], part["signature"] = block.thinking, block.signature
        else:
            return None
        return part
    if not isinstance(block, ImageBlock):
        return None
    return _image_to_part(shape, block, part)


def _image_to_part(shape: str, block: ImageBlock, part: dict[str, Any]) -> Any:
    split = _split_data_uri(block.source)
    if shape == "image_url_str":
        part["image_url"] = block.source
    elif shape == "image_url":
        part["image_url"] = {**part.get("image_url", {}), "url": block.source}
    elif shape in ("image_v1_url", "image_source_url"):
        part["url"] = block.source
    elif shape == "image_anthropic_url":
        part["source"] = {**part.get("source", {}), "url": block.source}
    elif split is None:
        return None
    elif shape == "image_v1_base64":
        part["base64"] = split[1]
        if block.media_type is not None:
            part["mime_type"] = block.media_type
    elif shape == "image_source_base64":
        part["data"], part["mime_type"] = split[1], block.media_type or split[0]
    elif shape == "image_anthropic_base64":
        part["source"] = {
            **part.get("source", {}),
            "media_type": block.media_type or split[0],
            "data": split[1],
        }
    else:
        return None
    return part


def _default_part(block: Block) -> dict[str, Any]:
    """LangChain's plain shape for a block (a message memdir made, or changed beyond its own)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image_url", "image_url": {"url": block.source}}
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature or ""}
        if block.signature is not None:
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        return {"type": "reasoning", "reasoning": block.thinking}
    raise MessageFormatError(f"a {block.type!r} block is not message content")


def default_content(blocks: Sequence[Block]) -> str | list[Any]:
    if not blocks:
        return ""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock) and blocks[0].text:
        return blocks[0].text
    return [_default_part(b) for b in blocks]


def content_in(
    content: object, role: str, calls: Mapping[str, ToolUseBlock]
) -> tuple[list[Block], list[dict[str, Any]] | None]:
    """Blocks of a message's content, and its template (``None`` when the plain shape fits)."""
    if isinstance(content, str):
        return ([TextBlock(text=content)] if content else []), None
    if not isinstance(content, list):
        raise MessageFormatError(f"message content must be a string or a list, not {content!r:.60}")
    holds = _HOLDS[role]
    blocks: list[Block] = []
    template: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            template.append({"b": len(blocks), "k": "str"})
            blocks.append(TextBlock(text=part))
            continue
        if not isinstance(part, Mapping):
            raise MessageFormatError(f"a content part must be a string or a dict, not {part!r:.60}")
        call = _tool_call_part(part, calls)
        if call is not None:
            template.append(call)
            continue
        found = _part_to_block(part)
        if found is None or not isinstance(found[1], holds):
            template.append({"v": plain(dict(part))})
            continue
        shape, block, rest = found
        template.append({"b": len(blocks), "k": shape, "r": plain(rest)})
        blocks.append(block)
    if default_content(blocks) == content:
        return blocks, None
    return blocks, template


def _tool_call_part(
    part: Mapping[str, Any], calls: Mapping[str, ToolUseBlock]
) -> dict[str, Any] | None:
    """A template entry for a tool-call part that repeats one of the message's tool calls."""
    kind = part.get("type")
    args_key = (
        {"tool_use": "input", "tool_call": "args"}.get(kind) if isinstance(kind, str) else None
    )
    if args_key is None:
        return None
    part_id = part.get("id")
    call = calls.get(part_id) if isinstance(part_id, str) else None
    if call is None or part.get("name") != call.name or part.get(args_key) != call.input:
        return None
    rest = {k: v for k, v in part.items() if k not in ("id", "name", args_key)}
    return {"t": call.id, "a": args_key, "r": plain(rest)}


def _fill(
    template: list[dict[str, Any]], blocks: Sequence[Block], calls: Mapping[str, ToolUseBlock]
) -> list[Any] | None:
    """The content a template describes, with the current blocks; ``None`` if they no longer fit."""
    out: list[Any] = []
    used: set[int] = set()
    for entry in template:
        if "v" in entry:
            out.append(entry["v"])
        elif "t" in entry:
            call = calls.get(entry["t"])
            if call is None:
                return None
            out.append({**entry["r"], "id": call.id, "name": call.name, entry["a"]: call.input})
        else:
            index = entry["b"]
            if index >= len(blocks) or index in used:
                return None
            part = _block_to_part(entry["k"], blocks[index], entry.get("r", {}))
            if part is None:
                return None
            used.add(index)
            out.append(part)
    return out if len(used) == len(blocks) else None


def plain(value: Any) -> Any:
    """``value`` if it is JSON, else its ``repr`` (the session log holds JSON only)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return {"$repr": repr(value)}
    return value


def content_out(
    template: object, blocks: Sequence[Block], calls: Mapping[str, ToolUseBlock]
) -> str | list[Any]:
    if isinstance(template, list):
        filled = _fill(template, blocks, calls)
        if filled is not None:
            return filled
    return default_content(blocks)
