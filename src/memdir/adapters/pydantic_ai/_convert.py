"""Pydantic AI ``ModelMessage`` lists and memdir messages.

A ``ModelResponse`` becomes one assistant :class:`~memdir.messages.Msg` (text, thinking and
tool-call parts as blocks). A ``ModelRequest`` becomes one message per run of parts of the same
kind: system-prompt parts a ``system`` message, user-prompt and retry-feedback parts a ``user``
message, tool-return parts (and retry prompts for a tool) a ``tool`` message whose results carry
the call ids, so compaction never separates a call from its return. Parts memdir has no block
for (built-in tool parts, files, instruction deltas...) stay in the message's *skeleton*: the
message in Pydantic AI's own JSON form (``ModelMessagesTypeAdapter``), kept in
``Msg.metadata[MESSAGE_KEY]`` of the first of its memdir messages, with the text memdir reads
taken out of it. :func:`msgs_to_messages` rebuilds each message from its complete group, so
the JSON form of a conversation survives the round trip exactly; a message memdir changed (a
cleared or evicted tool return) comes back with the new text, and a message memdir made (a
compaction summary) becomes a plain request or response. Message ids are derived from the
message's content, so the same message always gets the same ids (the session log writes it
once).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from memdir.messages import (
    RAW_ARGUMENTS_KEY,
    Block,
    ImageBlock,
    MessageFormatError,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["MESSAGE_KEY", "messages_to_msgs", "msgs_to_messages"]

MESSAGE_KEY: Final = "pydantic_ai.message"
"""``Msg.metadata`` key: which Pydantic AI message (and which of its parts) a message holds."""

_ERROR_OUTCOMES: Final = frozenset({"failed", "retried", "denied", "interrupted"})
_ARG_FORMATS: Final = {"c": (",", ":"), "s": (", ", ": ")}


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


# -- ModelMessage -> Msg ----------------------------------------------------------------------


def messages_to_msgs(messages: Sequence[ModelMessage]) -> list[Msg]:
    """The memdir messages of a Pydantic AI conversation (see the module docstring).

    Raises:
        MessageFormatError: ``messages`` is not a list of ``ModelRequest``/``ModelResponse``.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise MessageFormatError(
            f"messages_to_msgs takes a list of ModelMessage, not {type(messages).__name__}"
        )
    for message in messages:
        if not isinstance(message, ModelRequest | ModelResponse):
            raise MessageFormatError(f"not a Pydantic AI ModelMessage: {type(message).__name__}")
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return [m for data in dumped for m in message_to_msgs(data)]


def message_to_msgs(data: dict[str, Any]) -> list[Msg]:
    """The memdir messages of one message in Pydantic AI's JSON form."""
    key = hashlib.sha256(
        json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode()
    ).hexdigest()[:32]
    skel = copy.deepcopy(data)
    when = _when(data)
    groups: list[tuple[str, list[Block], list[list[Any]]]] = []  # role, blocks, part refs
    for index, part in enumerate(skel.get("parts") or []):
        role, blocks, field = _part_blocks(part, data["kind"])
        if role is None:
            continue
        if not groups or groups[-1][0] != role:
            groups.append((role, [], []))
        groups[-1][1].extend(blocks)
        groups[-1][2].append([index, field, len(blocks)])
    if not groups:  # nothing memdir reads: one empty message carries the skeleton
        groups.append(("assistant" if data["kind"] == "response" else "user", [], []))
    out = []
    for i, (role, blocks, refs) in enumerate(groups):
        meta: dict[str, Any] = {"key": key, "i": i, "n": len(groups), "parts": refs}
        if i == 0:
            meta["skeleton"] = skel
        out.append(
            Msg(
                role=role,  # type: ignore[arg-type]
                content=tuple(blocks),
                id=f"{key}-{i}",
                created_at=when,
                metadata={MESSAGE_KEY: meta},
            )
        )
    return out


def _when(data: Mapping[str, Any]) -> datetime:
    stamps = [data.get("timestamp")] + [p.get("timestamp") for p in data.get("parts") or []]
    for stamp in stamps:
        if isinstance(stamp, str):
            try:
                parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return datetime.now(UTC)


def _part_blocks(part: dict[str, Any], kind: str) -> tuple[str | None, list[Block], str]:
    """(role, blocks, how to put them back) for one part; the part loses what the blocks hold."""
    pk = part.get("part_kind")
    content = part.get("content")
    if kind == "response":
        if pk == "text" and isinstance(content, str):
            part["content"] = None
            return "assistant", [TextBlock(text=content)], "content"
        if pk == "thinking" and isinstance(content, str):
            part["content"] = None
            signature = part.get("signature")
            return "assistant", [ThinkingBlock(thinking=content, signature=signature)], "thinking"
        if pk == "tool-call" and part.get("tool_call_id") and part.get("tool_name"):
            args, how = _args_in(part.get("args"))
            part["args"] = None
            block = ToolUseBlock(id=part["tool_call_id"], name=part["tool_name"], input=args)
            return "assistant", [block], how
        return "assistant", [], "none"
    if pk == "system-prompt" and isinstance(content, str):
        part["content"] = None
        return "system", [TextBlock(text=content)], "content"
    if pk == "user-prompt":
        if isinstance(content, str):
            part["content"] = None
            return "user", [TextBlock(text=content)], "content"
        blocks: list[Block] = []
        items: list[Any] = content if isinstance(content, list) else []
        for n, item in enumerate(items):
            if isinstance(item, str):
                blocks.append(TextBlock(text=item))
                items[n] = None
            elif isinstance(item, dict) and item.get("kind") == "image-url" and item.get("url"):
                blocks.append(ImageBlock(source=item["url"], media_type=item.get("media_type")))
                items[n] = {**item, "url": None}
        return "user", blocks, "list"
    if (
        pk in ("tool-return", "retry-prompt")
        and part.get("tool_call_id")
        and (pk == "tool-return" or part.get("tool_name"))
    ):
        text = _text_of(content)
        if isinstance(content, str):
            part["content"] = None
        is_error = pk == "retry-prompt" or part.get("outcome") in _ERROR_OUTCOMES
        result = ToolResultBlock(
            tool_use_id=part["tool_call_id"],
            name=part.get("tool_name") or None,
            output=text,
            is_error=is_error,
        )
        return "tool", [result], "return" if isinstance(content, str) else "return-json"
    if pk in ("retry-prompt", "retry-feedback"):
        return "user", [TextBlock(text=_text_of(content))], "text-json"
    return None, [], "none"


def _args_in(raw: Any) -> tuple[dict[str, Any], str]:
    if isinstance(raw, dict):
        return raw, "dict"
    if raw is None:
        return {}, "args-none"
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            for fmt, separators in _ARG_FORMATS.items():
                if json.dumps(parsed, separators=separators, ensure_ascii=False) == raw:
                    return parsed, fmt
        return {RAW_ARGUMENTS_KEY: raw}, "raw"
    return {RAW_ARGUMENTS_KEY: _text_of(raw)}, "raw"


# -- Msg -> ModelMessage ----------------------------------------------------------------------


def msgs_to_messages(msgs: Iterable[Msg]) -> list[ModelMessage]:
    """Pydantic AI messages for memdir messages: each original message rebuilt from its group.

    Raises:
        MessageFormatError: ``msgs`` is not a list of :class:`Msg`.
    """
    if isinstance(msgs, Msg | str | bytes | Mapping):
        raise MessageFormatError(f"msgs_to_messages takes a list of Msg, not {type(msgs).__name__}")
    items = list(msgs)
    out: list[ModelMessage] = []
    i = 0
    while i < len(items):
        msg = items[i]
        if not isinstance(msg, Msg):
            raise MessageFormatError(f"msgs_to_messages: item #{i} is not a Msg")
        meta = msg.metadata.get(MESSAGE_KEY)
        if isinstance(meta, Mapping) and meta.get("i") == 0 and isinstance(meta.get("n"), int):
            group = items[i : i + meta["n"]]
            rebuilt = _rebuild(group, meta)
            if rebuilt is not None:
                out.append(rebuilt)
                i += len(group)
                continue
        out.append(_plain(msg))
        i += 1
    return out


def _rebuild(group: list[Msg], first: Mapping[str, Any]) -> ModelMessage | None:
    key = first.get("key")
    for n, msg in enumerate(group):
        meta = msg.metadata.get(MESSAGE_KEY)
        if not isinstance(meta, Mapping) or meta.get("key") != key or meta.get("i") != n:
            return None
    if len(group) != first["n"] or not isinstance(first.get("skeleton"), Mapping):
        return None
    data = copy.deepcopy(dict(first["skeleton"]))
    parts = data.get("parts") or []
    for msg in group:
        blocks = list(msg.content)
        for index, how, count in msg.metadata[MESSAGE_KEY]["parts"]:
            taken, blocks = blocks[:count], blocks[count:]
            if len(taken) != count or not _fill(parts[index], how, taken):
                return None
        if blocks:
            return None
    try:
        return ModelMessagesTypeAdapter.validate_python([data])[0]
    except ValueError:
        return None


def _fill(part: dict[str, Any], how: str, blocks: list[Block]) -> bool:
    if how == "none":
        return not blocks
    block = blocks[0] if blocks else None
    if how == "content" and isinstance(block, TextBlock):
        part["content"] = block.text
    elif how == "thinking" and isinstance(block, ThinkingBlock):
        part["content"] = block.thinking
    elif how in ("dict", "args-none", "raw", *_ARG_FORMATS) and isinstance(block, ToolUseBlock):
        raw = block.input.get(RAW_ARGUMENTS_KEY)
        if how == "args-none" and not block.input:
            part["args"] = None
        elif how == "dict":
            part["args"] = copy.deepcopy(block.input)
        elif how == "raw" and set(block.input) == {RAW_ARGUMENTS_KEY} and isinstance(raw, str):
            part["args"] = raw
        else:
            part["args"] = json.dumps(block.input, separators=_ARG_FORMATS.get(how, (",", ":")))
    elif how == "list":
        content = part.get("content") or []
        queue = list(blocks)
        for n, item in enumerate(content):
            if item is None or (isinstance(item, dict) and item.get("url") is None):
                if not queue:
                    return False
                b = queue.pop(0)
                if item is None and isinstance(b, TextBlock):
                    content[n] = b.text
                elif isinstance(item, dict) and isinstance(b, ImageBlock):
                    content[n] = {**item, "url": b.source}
                else:
                    return False
        return not queue
    elif how in ("return", "return-json") and isinstance(block, ToolResultBlock):
        if how == "return" or block.text != _text_of(part.get("content")):
            part["content"] = block.text  # memdir changed it (cleared, evicted)
    elif how == "text-json" and isinstance(block, TextBlock):
        if block.text != _text_of(part.get("content")):
            part["content"] = block.text
    else:
        return False
    return True


def _plain(msg: Msg) -> ModelMessage:
    """A request or response for a message memdir made (or whose group is incomplete)."""
    if msg.role == "assistant":
        parts: list[Any] = []
        for block in msg.content:
            if isinstance(block, TextBlock):
                parts.append(TextPart(content=block.text))
            elif isinstance(block, ThinkingBlock) and not block.redacted:
                parts.append(ThinkingPart(content=block.thinking, signature=block.signature))
            elif isinstance(block, ToolUseBlock):
                parts.append(
                    ToolCallPart(
                        tool_name=block.name, args=dict(block.input), tool_call_id=block.id
                    )
                )
        return ModelResponse(parts=parts, timestamp=msg.created_at)
    if msg.role == "tool":
        return ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name=r.name or "tool",
                    content=r.text,
                    tool_call_id=r.tool_use_id,
                    outcome="failed" if r.is_error else "success",
                )
                for r in msg.tool_results
            ]
        )
    if msg.role == "system":
        return ModelRequest(parts=[SystemPromptPart(content=msg.text)])
    content: list[Any] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            content.append(block.text)
        elif isinstance(block, ImageBlock):
            content.append(ImageUrl(url=block.source))
    single = len(content) == 1 and isinstance(content[0], str)
    return ModelRequest(parts=[UserPromptPart(content=content[0] if single else content)])
