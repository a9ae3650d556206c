"""Responses-API input items (what the Agents SDK keeps in a session) and memdir messages.

One item becomes one :class:`~memdir.messages.Msg`; what the model reads (text, refusals,
reasoning summaries, tool arguments and outputs, image URLs) goes into the message's blocks, so
that memdir's compaction, eviction, flush and secret masking see it, and everything else (item
ids, statuses, annotations, encrypted reasoning, the exact spelling of the arguments) is kept
as a *skeleton* in ``Msg.metadata[ITEM_KEY]``. :func:`msg_to_items` fills the skeleton with the
blocks again, so ``msg_to_items(item_to_msg(item)) == [item]`` for every item, and a message
whose blocks memdir changed (a cleared or evicted tool output) comes back as the same item with
the new text.

The mapping:

* ``message`` (``user``, ``system``, ``developer``, ``assistant``; string or part-list content):
  a message of the same role (``developer`` as ``system``); ``input_text``, ``output_text`` and
  ``refusal`` parts are text blocks, ``input_image`` parts with a URL are image blocks;
* ``function_call`` / ``custom_tool_call``: an assistant tool call; ``function_call_output`` /
  ``custom_tool_call_output`` / ``local_shell_call_output`` / ``apply_patch_call_output``: a
  tool result for the same call id, so compaction never separates a call from its output;
* ``reasoning``: an assistant message of thinking blocks (summary, then reasoning text);
* the other tool calls with a call id (``computer_call``, ``shell_call``, ``local_shell_call``,
  ``apply_patch_call``, ``mcp_approval_request``) and their outputs: a tool call whose input is
  the item's payload, and a tool result showing the output as JSON (the output item is kept
  whole in the skeleton);
* any other item (``web_search_call``, ``mcp_call``, ``compaction``...): an assistant message
  showing the item as JSON, the item kept whole.

A message memdir made itself (a compaction summary, the error result of an interrupted call)
has no skeleton and becomes plain items: ``{"role", "content"}`` messages, ``function_call``
and ``function_call_output``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from memdir.adapters._skeleton import mask_metadata
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

__all__ = [
    "ITEM_KEY",
    "item_to_msg",
    "items_to_msgs",
    "mask_skeleton",
    "msg_to_items",
    "msgs_to_items",
]

ITEM_KEY: Final = "openai_agents.item"
"""``Msg.metadata`` key holding the skeleton of the Responses item the message came from."""

_ROLES: Final = {
    "user": "user",
    "system": "system",
    "developer": "system",
    "assistant": "assistant",
}
_TEXT_PARTS: Final = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_TEXT_OUTPUTS: Final = {
    "function_call_output": "call_id",
    "custom_tool_call_output": "call_id",
    "local_shell_call_output": "id",
    "apply_patch_call_output": "call_id",
}
_GENERIC_CALLS: Final = {
    "computer_call": "call_id",
    "shell_call": "call_id",
    "local_shell_call": "call_id",
    "apply_patch_call": "call_id",
    "mcp_approval_request": "id",
}
_GENERIC_OUTPUTS: Final = {
    "computer_call_output": "call_id",
    "shell_call_output": "call_id",
    "mcp_approval_response": "approval_request_id",
}
_CALL_KEYS: Final = frozenset({"type", "id", "call_id", "status"})
# Keys whose values are identifiers or opaque tokens, never text to mask.
_OPAQUE: Final = frozenset(
    {
        "type",
        "id",
        "call_id",
        "status",
        "role",
        "name",
        "namespace",
        "detail",
        "format",
        "encrypted_content",
        "approval_request_id",
        "caller_id",
        "$b",
        "$args",
        "$out",
        "kind",
    }
)
# How a dict of arguments was spelled: (separators, ensure_ascii), tried in this order.
_ARG_FORMATS: Final = {
    "c": ((",", ":"), False),
    "s": ((", ", ": "), False),
    "ca": ((",", ":"), True),
    "sa": ((", ", ": "), True),
}


def _dumps(value: Any, fmt: str = "c") -> str:
    separators, ascii_only = _ARG_FORMATS.get(fmt, _ARG_FORMATS["c"])
    return json.dumps(value, separators=separators, ensure_ascii=ascii_only)


def _need_mapping(item: object) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise MessageFormatError(f"a Responses item must be a dict, not {type(item).__name__}")
    return item


# -- item -> Msg ------------------------------------------------------------------------------


def item_to_msg(item: Mapping[str, Any], *, msg_id: str | None = None) -> Msg:
    """The memdir message for one Responses input item (see the module docstring).

    Args:
        item: the item, as the Agents SDK stores it in a session (a dict).
        msg_id: the message id (a fresh one by default).

    Raises:
        MessageFormatError: the item is not a dict, or a message item has an unknown role or
            no content.
    """
    item = _need_mapping(item)
    kw: dict[str, Any] = {} if msg_id is None else {"id": msg_id}
    kind = item.get("type")
    if kind is None or kind == "message":
        return _message_to_msg(item, kw)
    try:
        if kind == "function_call":
            return _function_call(item, kw)
        if kind == "custom_tool_call":
            block = ToolUseBlock(
                id=item.get("call_id"),  # type: ignore[arg-type]  # checked by Msg
                name=item.get("name"),  # type: ignore[arg-type]
                input={"input": item.get("input")},
            )
            skel = {k: v for k, v in item.items() if k != "input"}
            return _msg("assistant", [block], {"kind": "custom_call", "item": skel}, kw)
        if kind in _TEXT_OUTPUTS:
            return _text_output(item, _TEXT_OUTPUTS[kind], kw)
        if kind == "reasoning":
            return _reasoning(item, kw)
        if kind in _GENERIC_CALLS and isinstance(item.get(_GENERIC_CALLS[kind]), str):
            payload = {k: v for k, v in item.items() if k not in _CALL_KEYS}
            skel = {k: v for k, v in item.items() if k in _CALL_KEYS}
            call = ToolUseBlock(id=item[_GENERIC_CALLS[kind]], name=str(kind), input=payload)
            return _msg("assistant", [call], {"kind": "call", "item": skel}, kw)
        if kind in _GENERIC_OUTPUTS and isinstance(item.get(_GENERIC_OUTPUTS[kind]), str):
            result = ToolResultBlock(
                tool_use_id=item[_GENERIC_OUTPUTS[kind]],
                name=str(kind),
                output=_render(item),
            )
            return _msg("tool", [result], {"kind": "whole", "item": dict(item)}, kw)
    except MessageFormatError:
        pass  # e.g. a call without an id: kept whole below, never dropped
    text = TextBlock(text=f"[{kind} item] {_render(item)}")
    return _msg("assistant", [text], {"kind": "whole", "item": dict(item)}, kw)


def _msg(role: str, blocks: list[Any], skeleton: dict[str, Any], kw: dict[str, Any]) -> Msg:
    return Msg(role=role, content=tuple(blocks), metadata={ITEM_KEY: skeleton}, **kw)  # type: ignore[arg-type]


def _render(item: Mapping[str, Any]) -> str:
    shown = {
        k: v for k, v in item.items() if k not in ("type", "id", "status", "encrypted_content")
    }
    return json.dumps(shown, ensure_ascii=False, default=str)


def _message_to_msg(item: Mapping[str, Any], kw: dict[str, Any]) -> Msg:
    role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise MessageFormatError(f"a message item has an unknown role {item.get('role')!r}")
    if "content" not in item:
        raise MessageFormatError("a message item has no 'content'")
    content = item["content"]
    skel: dict[str, Any] = {k: v for k, v in item.items() if k != "content"}
    if isinstance(content, str):
        return _msg(role, [TextBlock(text=content)], {"kind": "message", "item": skel, "$b": 1}, kw)
    if not isinstance(content, list):
        raise MessageFormatError("a message item's 'content' must be a string or a list")
    blocks, parts = _parts_to_blocks(content, images=role != "system")
    skel["content"] = parts
    return _msg(role, blocks, {"kind": "message", "item": skel}, kw)


def _parts_to_blocks(
    parts: list[Any], *, images: bool
) -> tuple[list[TextBlock | ImageBlock], list[Any]]:
    """Blocks for the parts that carry text or an image URL, and the parts' skeletons."""
    blocks: list[TextBlock | ImageBlock] = []
    skeletons: list[Any] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, Mapping) else None
        field = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
        if field is not None and isinstance(part.get(field), str):
            blocks.append(TextBlock(text=part[field]))
            skeletons.append({**{k: v for k, v in part.items() if k != field}, "$b": field})
        elif (
            images
            and kind == "input_image"
            and isinstance(part.get("image_url"), str)
            and part["image_url"]
        ):
            blocks.append(ImageBlock(source=part["image_url"]))
            skeletons.append(
                {**{k: v for k, v in part.items() if k != "image_url"}, "$b": "image_url"}
            )
        else:
            skeletons.append(copy.deepcopy(part))
    return blocks, skeletons


def _function_call(item: Mapping[str, Any], kw: dict[str, Any]) -> Msg:
    raw = item.get("arguments")
    skel: dict[str, Any] = {k: v for k, v in item.items() if k != "arguments"}
    args: dict[str, Any] | None = None
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            fmt = next((f for f in _ARG_FORMATS if _dumps(parsed, f) == raw), None)
            if fmt is not None:
                args, skel["$args"] = parsed, fmt
    if args is None:
        if not isinstance(raw, str):
            raise MessageFormatError("a function_call item's 'arguments' must be a string")
        args, skel["$args"] = {RAW_ARGUMENTS_KEY: raw}, "raw"
    block = ToolUseBlock(id=item.get("call_id"), name=item.get("name"), input=args)  # type: ignore[arg-type]
    return _msg("assistant", [block], {"kind": "function_call", "item": skel}, kw)


def _text_output(item: Mapping[str, Any], id_key: str, kw: dict[str, Any]) -> Msg:
    output = item.get("output")
    skel: dict[str, Any] = {k: v for k, v in item.items() if k != "output"}
    if output is None and "output" not in item:
        result_output: str | list[TextBlock | ImageBlock] = ""
        skel["$out"] = "absent"
    elif isinstance(output, str):
        result_output, skel["$out"] = output, "text"
    elif isinstance(output, list):
        result_output, skel["$out"] = _parts_to_blocks(output, images=True)
    else:
        raise MessageFormatError("a tool output item's 'output' must be a string or a list")
    name = item.get("name")
    block = ToolResultBlock(
        tool_use_id=item.get(id_key),  # type: ignore[arg-type]  # checked by Msg
        name=name if isinstance(name, str) and name else None,
        output=result_output,
    )
    return _msg("tool", [block], {"kind": "output", "item": skel}, kw)


def _reasoning(item: Mapping[str, Any], kw: dict[str, Any]) -> Msg:
    skel: dict[str, Any] = dict(item)
    blocks: list[ThinkingBlock] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if not isinstance(parts, list):
            continue
        shells: list[Any] = []
        for part in parts:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                blocks.append(ThinkingBlock(thinking=part["text"]))
                shells.append({**{k: v for k, v in part.items() if k != "text"}, "$b": "text"})
            else:
                shells.append(copy.deepcopy(part))
        skel[key] = shells
    return _msg("assistant", blocks, {"kind": "reasoning", "item": skel}, kw)


def items_to_msgs(items: Iterable[Mapping[str, Any]]) -> list[Msg]:
    """:func:`item_to_msg` of each item, in order.

    Raises:
        MessageFormatError: ``items`` is not a list of dicts, or an item is malformed.
    """
    if isinstance(items, Mapping | str | bytes):
        raise MessageFormatError(f"items_to_msgs takes a list of items, not {type(items).__name__}")
    return [item_to_msg(item) for item in items]


# -- Msg -> items -----------------------------------------------------------------------------


def msg_to_items(msg: Msg) -> list[dict[str, Any]]:
    """The Responses items for one message: its own item again when it came from one.

    Raises:
        MessageFormatError: ``msg`` is not a :class:`Msg`.
    """
    if not isinstance(msg, Msg):
        raise MessageFormatError(f"msg_to_items takes a Msg, not {type(msg).__name__}")
    skel = msg.metadata.get(ITEM_KEY)
    if isinstance(skel, Mapping) and isinstance(skel.get("item"), Mapping):
        restored = _restore(skel, msg.content)
        if restored is not None:
            return [restored]
    return _plain_items(msg)


def msgs_to_items(msgs: Iterable[Msg]) -> list[dict[str, Any]]:
    """:func:`msg_to_items` of each message, concatenated."""
    if isinstance(msgs, Msg | str | bytes | Mapping):
        raise MessageFormatError(f"msgs_to_items takes a list of Msg, not {type(msgs).__name__}")
    return [item for msg in msgs for item in msg_to_items(msg)]


def _restore(skel: Mapping[str, Any], blocks: tuple[Block, ...]) -> dict[str, Any] | None:
    """The item of ``skel`` filled with ``blocks``, or ``None`` when they do not fit it."""
    kind = skel.get("kind")
    item: dict[str, Any] = copy.deepcopy(dict(skel["item"]))
    if kind == "whole":
        return item
    if kind == "message":
        if skel.get("$b") == 1:
            if len(blocks) != 1 or not isinstance(blocks[0], TextBlock):
                return None
            item["content"] = blocks[0].text
            return item
        filled = _fill_parts(item.get("content"), list(blocks))
        if filled is None:
            return None
        item["content"] = filled
        return item
    if len(blocks) != 1 and kind != "reasoning":
        return None
    block = blocks[0] if blocks else None
    if kind == "function_call" and isinstance(block, ToolUseBlock):
        fmt = item.pop("$args", "c")
        raw = block.input.get(RAW_ARGUMENTS_KEY)
        if fmt == "raw" and set(block.input) == {RAW_ARGUMENTS_KEY} and isinstance(raw, str):
            item["arguments"] = raw
        else:
            item["arguments"] = _dumps(block.input, fmt)
        return item
    if kind == "custom_call" and isinstance(block, ToolUseBlock) and "input" in block.input:
        item["input"] = block.input["input"]
        return item
    if kind == "call" and isinstance(block, ToolUseBlock):
        return {**item, **copy.deepcopy(block.input)}
    if kind == "output" and isinstance(block, ToolResultBlock):
        how = item.pop("$out", "text")
        if how == "absent" and block.output == "":
            return item
        if isinstance(how, list) and isinstance(block.output, list):
            filled = _fill_parts(how, list(block.output))
            if filled is not None:
                item["output"] = filled
                return item
        # Changed by memdir (evicted, cleared): the text takes the place of the output.
        item["output"] = block.output if isinstance(block.output, str) else block.text
        return item
    if kind == "reasoning" and all(isinstance(b, ThinkingBlock) for b in blocks):
        queue = list(blocks)
        for key in ("summary", "content"):
            if isinstance(item.get(key), list):
                filled = _fill_parts(item[key], queue, consume=True)
                if filled is None:
                    return None
                item[key] = filled
        return item if not queue else None
    return None


def _fill_parts(shells: object, blocks: list[Any], *, consume: bool = False) -> list[Any] | None:
    """Parts with their ``$b`` field filled from ``blocks`` (all used unless ``consume``)."""
    if not isinstance(shells, list):
        return None
    out: list[Any] = []
    for shell in shells:
        if not (isinstance(shell, Mapping) and "$b" in shell):
            out.append(copy.deepcopy(shell))
            continue
        if not blocks:
            return None
        block = blocks.pop(0)
        field = shell["$b"]
        part = {k: copy.deepcopy(v) for k, v in shell.items() if k != "$b"}
        if field == "image_url" and isinstance(block, ImageBlock):
            part[field] = block.source
        elif field != "image_url" and isinstance(block, TextBlock):
            part[field] = block.text
        elif isinstance(block, ThinkingBlock):
            part[field] = block.thinking
        else:
            return None
        out.append(part)
    if blocks and not consume:
        return None
    return out


def _plain_items(msg: Msg) -> list[dict[str, Any]]:
    """Items for a message that did not come from an item (memdir's own messages)."""
    if msg.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": r.tool_use_id,
                "output": r.output if isinstance(r.output, str) else _output_parts(r.output),
            }
            for r in msg.tool_results
        ]
    out: list[dict[str, Any]] = []
    if msg.role == "assistant":
        texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
        if texts:
            out.append({"role": "assistant", "content": "\n\n".join(texts)})
        for call in msg.tool_uses:
            raw = call.input.get(RAW_ARGUMENTS_KEY)
            arguments = (
                raw
                if set(call.input) == {RAW_ARGUMENTS_KEY} and isinstance(raw, str)
                else _dumps(call.input)
            )
            out.append(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments,
                }
            )
        return out
    if any(isinstance(b, ImageBlock) for b in msg.content):
        return [{"role": msg.role, "content": _output_parts(msg.content)}]
    return [{"role": msg.role, "content": msg.text}]


def _output_parts(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append({"type": "input_image", "image_url": block.source, "detail": "auto"})
    return parts


# -- masking ----------------------------------------------------------------------------------


def mask_skeleton(msg: Msg, redact: Callable[[str], str]) -> Msg:
    """``msg`` with ``redact`` applied to the text a skeleton keeps (outputs kept whole, etc.).

    The session log masks the blocks of a message; this masks what its skeleton holds besides
    identifiers, so nothing of an item reaches the log unmasked.
    """
    return mask_metadata(msg, ITEM_KEY, redact, opaque=_OPAQUE)
