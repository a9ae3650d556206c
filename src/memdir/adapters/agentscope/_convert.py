"""AgentScope 2.x ``Msg`` <-> :class:`memdir.messages.Msg`, losslessly.

An AgentScope reply is one assistant ``Msg`` whose blocks interleave text, thinking, tool calls
and their results. memdir keeps tool results in ``tool`` messages, so one AgentScope message
becomes *segments*: each run of non-result blocks an ``assistant`` message, each run of results
a ``tool`` message (user and system messages stay one message each). A hint block (AgentScope's
notes to the model) becomes assistant text marked as a hint, so that memdir's "latest user
message" is always what the user said.

What memdir's blocks do not hold — block ids and times, tool-call states and permission
suggestions, the raw argument string, a result's state and metadata, the message's usage,
finish reason and metadata — rides in each segment's ``metadata["agentscope"]``. Converting
back takes the text from the memdir blocks (so a compaction pass that shortened an old tool
result is honoured) and everything else from that record.

Segment ids are ``<msg id>/<first block id>@<its creation time>`` (``.../result`` for a tool
segment): stable when a message grows or when a compaction keeps only its tail, so the session
log, which knows messages by id, never skips a new segment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

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

if TYPE_CHECKING:
    from agentscope.message import Msg as AsMsg

__all__ = ["META_KEY", "from_memdir", "is_hint", "to_memdir"]

META_KEY: Final = "agentscope"
"""Key of the AgentScope record in each segment's metadata."""
_ERROR_STATES: Final = frozenset({"error", "interrupted", "denied"})
_MSG_FIELDS: Final = (
    "name",
    "role",
    "id",
    "metadata",
    "created_at",
    "usage",
    "finished_at",
    "finished_reason",
    "structured_output",
    "error",
)


def _instant(text: object) -> datetime:
    """AgentScope's timestamp (naive ISO in local time) as an aware instant."""
    if isinstance(text, str):
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo is not None else moment.astimezone()
    return datetime.now().astimezone()


def _times(block: Mapping[str, Any]) -> dict[str, Any]:
    return {key: block[key] for key in ("id", "created_at", "finished_at") if key in block}


def _data_uri(source: Mapping[str, Any]) -> str:
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
    return str(source.get("url", ""))


def _part(block: Mapping[str, Any]) -> tuple[TextBlock | ImageBlock, dict[str, Any]]:
    """A text or data block (of a user message, a tool result or a hint)."""
    if block.get("type") == "data":
        source = block.get("source") or {}
        extra = {**_times(block), "type": "data", "name": block.get("name")}
        extra["source_type"] = source.get("type")
        image = ImageBlock(
            source=_data_uri(source) or "data:,", media_type=source.get("media_type")
        )
        return image, extra
    return TextBlock(text=str(block.get("text", ""))), _times(block)


def _assistant_block(block: Mapping[str, Any]) -> tuple[Block, dict[str, Any]]:
    kind = block.get("type")
    if kind == "tool_call":
        raw = block.get("input", "")
        try:
            parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
        except ValueError:
            parsed = None
        args = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: raw}
        extra = {**_times(block), "state": block.get("state")}
        if block.get("suggested_rules"):
            extra["suggested_rules"] = block["suggested_rules"]
        if not isinstance(parsed, dict) or json.dumps(parsed, ensure_ascii=False) != raw:
            extra["raw"] = raw
        return ToolUseBlock(id=str(block["id"]), name=str(block["name"]), input=args), extra
    if kind == "thinking":
        known = {"type", "thinking", "id", "created_at", "finished_at"}
        rest = {k: v for k, v in block.items() if k not in known}
        signature = rest.get("signature") if isinstance(rest.get("signature"), str) else None
        extra = {**_times(block), "extra": rest} if rest else _times(block)
        return ThinkingBlock(thinking=str(block.get("thinking", "")), signature=signature), extra
    if kind == "hint":
        hint = block.get("hint", "")
        extra = {**_times(block), "type": "hint", "source": block.get("source")}
        if isinstance(hint, list):
            extra["hint"] = hint
            text = "\n".join(str(p.get("text", "")) for p in hint if p.get("type") == "text")
        else:
            text = str(hint)
        return TextBlock(text=text), extra
    return _part(block)


def _result(block: Mapping[str, Any]) -> tuple[ToolResultBlock, dict[str, Any]]:
    output = block.get("output", "")
    extra = {**_times(block), "state": block.get("state"), "metadata": block.get("metadata")}
    converted: str | list[TextBlock | ImageBlock]
    if isinstance(output, list):
        pairs = [_part(p) for p in output]
        converted = [p for p, _ in pairs]
        extra["parts"] = [e for _, e in pairs]
    else:
        converted = str(output)
    result = ToolResultBlock(
        tool_use_id=str(block["id"]),
        name=block.get("name"),
        output=converted,
        is_error=block.get("state") in _ERROR_STATES,
    )
    return result, extra


def _segment_id(msg_id: str, first: Mapping[str, Any] | None, kind: str) -> str:
    if first is None:
        return msg_id
    # A block id alone can repeat (models that number their calls call_0, call_1 every turn);
    # with its creation time it names one block.
    suffix = "/result" if kind == "tool" else ""
    return f"{msg_id}/{first.get('id', '')}@{first.get('created_at', '')}{suffix}"


def to_memdir(msgs: Iterable[AsMsg]) -> list[Msg]:
    """AgentScope messages as memdir messages (segments; see the module docstring)."""
    out: list[Msg] = []
    for msg in msgs:
        out.extend(msg_to_memdir(msg))
    return out


def msg_to_memdir(msg: AsMsg) -> list[Msg]:
    """One AgentScope message as its memdir segments."""
    data = msg.model_dump(mode="json")
    head = {key: data.get(key) for key in _MSG_FIELDS}
    blocks: list[dict[str, Any]] = data.get("content") or []
    role = data["role"]
    created = _instant(head["created_at"])
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    for block in blocks:
        kind = "tool" if block.get("type") == "tool_result" else role
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(block)
        else:
            runs.append((kind, [block]))
    if not runs:
        runs = [(role, [])]
    out = []
    for kind, run in runs:
        converted = [
            _result(b)
            if kind == "tool"
            else _assistant_block(b)
            if role == "assistant"
            else _part(b)
            for b in run
        ]
        meta = {META_KEY: {"msg": head, "blocks": [extra for _, extra in converted]}}
        out.append(
            Msg(
                role=kind,  # type: ignore[arg-type]
                content=tuple(block for block, _ in converted),
                name=head.get("name"),
                id=_segment_id(str(head["id"]), run[0] if run else None, kind),
                created_at=created,
                metadata=meta,
            )
        )
    return out


def is_hint(msg: Msg, index: int) -> bool:
    """Whether block ``index`` of a segment is an AgentScope hint (a note to the model)."""
    record = msg.metadata.get(META_KEY)
    if not isinstance(record, Mapping):
        return False
    extras = record.get("blocks")
    return (
        isinstance(extras, list)
        and index < len(extras)
        and isinstance(extras[index], Mapping)
        and extras[index].get("type") == "hint"
    )


# -- back to AgentScope ---------------------------------------------------------------------------


def _aligned(record: Mapping[str, Any], blocks: Sequence[Block]) -> list[dict[str, Any]]:
    """The block records of a segment, when they still describe its blocks; else empty ones."""
    extras = record.get("blocks")
    if isinstance(extras, list) and len(extras) == len(blocks):
        return [e if isinstance(e, dict) else {} for e in extras]
    return [{} for _ in blocks]


def _with_times(extra: Mapping[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    for key in ("id", "created_at", "finished_at"):
        if key in extra:
            block[key] = extra[key]
    return block


def _part_back(part: TextBlock | ImageBlock, extra: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(part, TextBlock):
        return _with_times(extra, {"type": "text", "text": part.text})
    media = part.media_type or "application/octet-stream"
    source: dict[str, Any]
    if part.source.startswith("data:") and ";base64," in part.source:
        kind, data = part.source[5:].split(";base64,", 1)
        source = {"type": "base64", "data": data, "media_type": part.media_type or kind}
    else:
        source = {"type": "url", "url": part.source, "media_type": media}
    block = {"type": "data", "source": source, "name": extra.get("name")}
    return _with_times(extra, block)


def _block_back(block: Block, extra: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(block, ToolUseBlock):
        raw = extra.get("raw")
        if not isinstance(raw, str) or _parsed(raw) != block.input:
            only_raw = set(block.input) == {RAW_ARGUMENTS_KEY}
            raw = (
                block.input[RAW_ARGUMENTS_KEY]
                if only_raw
                else json.dumps(block.input, ensure_ascii=False)
            )
        out = {"type": "tool_call", "id": block.id, "name": block.name, "input": raw}
        for key in ("state", "suggested_rules"):
            if extra.get(key) is not None:
                out[key] = extra[key]
        return _with_times(extra, out)
    if isinstance(block, ThinkingBlock):
        out = {"type": "thinking", "thinking": block.thinking, **(extra.get("extra") or {})}
        if block.signature is not None:
            out["signature"] = block.signature
        return _with_times(extra, out)
    if isinstance(block, TextBlock) and extra.get("type") == "hint":
        hint = extra.get("hint")
        out = {"type": "hint", "hint": hint if isinstance(hint, list) else block.text}
        out["source"] = extra.get("source")
        return _with_times(extra, out)
    if isinstance(block, ToolResultBlock):
        return _result_back(block, extra)
    if isinstance(block, TextBlock | ImageBlock):
        return _part_back(block, extra)
    raise MessageFormatError(f"an AgentScope message cannot hold a {block.type!r} block")


def _parsed(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}


def _result_back(block: ToolResultBlock, extra: Mapping[str, Any]) -> dict[str, Any]:
    output: Any
    if isinstance(block.output, str):
        output = block.output
    else:
        parts = extra.get("parts")
        aligned = parts if isinstance(parts, list) and len(parts) == len(block.output) else None
        output = [
            _part_back(p, (aligned or [{}] * len(block.output))[i])
            for i, p in enumerate(block.output)
        ]
    state = extra.get("state")
    if not isinstance(state, str) or (state in _ERROR_STATES) != block.is_error:
        state = "error" if block.is_error else "success"
    out = {
        "type": "tool_result",
        "id": block.tool_use_id,
        "name": block.name or "",
        "output": output,
        "state": state,
        "metadata": extra.get("metadata") or {},
    }
    return _with_times(extra, out)


def _head(msg: Msg) -> dict[str, Any] | None:
    record = msg.metadata.get(META_KEY)
    if isinstance(record, Mapping) and isinstance(record.get("msg"), Mapping):
        return dict(record["msg"])
    return None


def from_memdir(msgs: Iterable[Msg]) -> list[AsMsg]:
    """memdir messages as AgentScope messages: the segments of one message are joined again.

    A memdir message that did not come from AgentScope becomes a message of its own, except a
    ``tool`` message, whose results join the assistant message before it (where AgentScope
    keeps them).
    """
    from agentscope.message import Msg as AsMsg

    built: list[dict[str, Any]] = []
    for msg in msgs:
        head = _head(msg)
        record = msg.metadata.get(META_KEY) or {}
        blocks = [
            _block_back(b, e)
            for b, e in zip(msg.content, _aligned(record, msg.content), strict=True)
        ]
        if head is not None and built and built[-1]["id"] == head.get("id"):
            built[-1]["content"].extend(blocks)
            continue
        if head is None:
            if msg.role == "tool" and built and built[-1]["role"] == "assistant":
                built[-1]["content"].extend(blocks)
                continue
            role = "assistant" if msg.role == "tool" else msg.role
            head = {"id": msg.id, "role": role, "name": msg.name or role}
            head["created_at"] = msg.created_at.astimezone().replace(tzinfo=None).isoformat()
        head["content"] = blocks
        built.append(head)
    return [AsMsg.model_validate(m) for m in built]
