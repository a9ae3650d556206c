"""LangChain messages and memdir messages, both ways, without loss.

One LangChain message becomes one :class:`~memdir.messages.Msg`; what the model reads goes into
the message's blocks, so that memdir's compaction, eviction, flush and secret masking see it:

* ``HumanMessage`` → ``user``, ``AIMessage`` → ``assistant``, ``SystemMessage`` → ``system``,
  ``ToolMessage`` → ``tool`` (one :class:`~memdir.messages.ToolResultBlock` for
  ``tool_call_id``, ``is_error`` from ``status="error"``), ``ChatMessage`` → the role it names;
* ``AIMessage.tool_calls`` → :class:`~memdir.messages.ToolUseBlock` (same id, name, args), so a
  call and its ``ToolMessage`` stay paired by id through compaction;
* content parts: text (plain strings and ``{"type": "text"}``), images (``image_url``, the
  standard ``image`` blocks with a URL or base64 data, Anthropic's ``source``) and reasoning
  (``reasoning``, Anthropic's ``thinking`` and ``redacted_thinking``).

Everything else (ids, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
``invalid_tool_calls``, ``artifact``, and the exact shape of the content: which parts were plain
strings, extra keys on a part, parts no block holds such as citations) is kept as a *skeleton*
in ``Msg.metadata[MESSAGE_KEY]``. The skeleton never repeats the text of a block: it refers to
blocks by position, so the session log's secret masking covers all the text. :func:`to_langchain`
fills the skeleton with the blocks again, so ``to_langchain(from_langchain(ms)) == ms``; a message
whose blocks memdir changed (an evicted tool output, a shortened argument) comes back with the
new text in the original shape when it still fits it, and in LangChain's plain shapes otherwise.

A message memdir made itself (a compaction summary, the error result of an interrupted call) has
no skeleton; its memdir metadata and time travel in ``additional_kwargs["memdir"]``, which no
LangChain chat model sends to its provider, so it is recognised when it comes back.

Not kept: the class of an ``AIMessageChunk`` (LangGraph's ``add_messages`` turns chunks into
``AIMessage`` anyway), and values that are not JSON (kept as their ``repr``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memdir.adapters.langchain._content import content_in, content_out, plain
from memdir.messages import (
    Block,
    ImageBlock,
    MessageFormatError,
    MissingToolCallIdError,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "MEMDIR_KWARG",
    "MESSAGE_KEY",
    "from_langchain",
    "message_to_msg",
    "msg_to_messages",
    "to_langchain",
]

MESSAGE_KEY: Final = "langchain.message"
"""``Msg.metadata`` key holding the skeleton of the LangChain message a message came from."""
MEMDIR_KWARG: Final = "memdir"
"""``additional_kwargs`` key carrying memdir's metadata and time of a message through LangChain."""

_ROLE_OF: Final = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_CHAT_ROLES: Final = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "system",
}


# -- LangChain -> memdir ----------------------------------------------------------------------


def message_to_msg(message: BaseMessage, *, created_at: datetime | None = None) -> Msg:
    """One LangChain message as a :class:`~memdir.messages.Msg` (see the module docstring).

    Args:
        message: a ``HumanMessage``, ``AIMessage``, ``SystemMessage``, ``ToolMessage`` or
            ``ChatMessage``.
        created_at: the message's time when it carries none (LangChain messages have no time;
            one memdir made carries its own); default: now.

    Raises:
        MessageFormatError: not one of those, or malformed content.
        MissingToolCallIdError: a tool call without an id (it could not be paired).
    """
    if not isinstance(message, BaseMessage):
        raise MessageFormatError(f"not a LangChain message: {type(message).__name__}")
    skeleton: dict[str, Any] = {}
    if isinstance(message, ChatMessage):
        role = _CHAT_ROLES.get(message.role, "user")
        skeleton["chat_role"] = message.role
    elif isinstance(message, HumanMessage | AIMessage | SystemMessage | ToolMessage):
        role = _ROLE_OF[message.type]
    else:
        raise MessageFormatError(
            f"{type(message).__name__} cannot be converted: use HumanMessage, AIMessage, "
            "SystemMessage, ToolMessage or ChatMessage"
        )
    kwargs = dict(message.additional_kwargs)
    carried = _carried(kwargs.pop(MEMDIR_KWARG, None))
    if carried is None and MEMDIR_KWARG in message.additional_kwargs:
        kwargs[MEMDIR_KWARG] = message.additional_kwargs[MEMDIR_KWARG]  # not ours: keep it
    for field_name, value in (
        ("additional_kwargs", kwargs),
        ("response_metadata", message.response_metadata),
    ):
        if value:
            skeleton[field_name] = plain(value)
    blocks: list[Block]
    name: str | None = message.name
    if isinstance(message, ToolMessage):
        blocks, template = _tool_result(message)
        name = None
        if message.artifact is not None:
            skeleton["artifact"] = plain(message.artifact)
    else:
        calls = _tool_calls(message) if isinstance(message, AIMessage) else []
        by_id = {c.id: c for c in calls}
        blocks, template = content_in(message.content, role, by_id)
        blocks.extend(calls)
        if isinstance(message, AIMessage):
            if message.invalid_tool_calls:
                skeleton["invalid_tool_calls"] = plain(list(message.invalid_tool_calls))
            if message.usage_metadata is not None:
                skeleton["usage_metadata"] = plain(dict(message.usage_metadata))
    if template is not None:
        skeleton["content"] = template
    if message.id is None:
        skeleton["no_id"] = True
    metadata: dict[str, Any] = dict(carried[0]) if carried else {}
    if carried is None:
        metadata[MESSAGE_KEY] = skeleton
    elif skeleton:  # a message memdir made that LangChain code has added to
        metadata[MESSAGE_KEY] = {**skeleton, "memdir": True}
    when = carried[1] if carried else created_at
    extra: dict[str, Any] = {"created_at": when} if when is not None else {}
    return Msg(
        role=role,  # type: ignore[arg-type]
        content=tuple(blocks),
        name=name,
        id=message.id or uuid.uuid4().hex,
        metadata=metadata,
        **extra,
    )


def _carried(value: object) -> tuple[Mapping[str, Any], datetime] | None:
    """memdir's metadata and time from ``additional_kwargs["memdir"]``, if memdir wrote it."""
    if not isinstance(value, Mapping) or set(value) != {"metadata", "created_at"}:
        return None
    metadata, stamp = value["metadata"], value["created_at"]
    if not isinstance(metadata, Mapping) or not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (metadata, when) if when.tzinfo is not None else None


def _tool_calls(message: AIMessage) -> list[ToolUseBlock]:
    out = []
    for call in message.tool_calls:
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise MissingToolCallIdError(
                f"tool call {call.get('name')!r} has no id, so its result cannot be paired with it"
            )
        out.append(ToolUseBlock(id=call_id, name=call["name"], input=dict(call["args"])))
    return out


def _tool_result(message: ToolMessage) -> tuple[list[Block], list[dict[str, Any]] | None]:
    if not isinstance(message.tool_call_id, str) or not message.tool_call_id:
        raise MissingToolCallIdError("a ToolMessage has no tool_call_id")
    content = message.content
    output: str | list[TextBlock | ImageBlock]
    template = None
    if isinstance(content, str):
        output = content
    else:
        parts, template = content_in(content, "tool", {})
        output = [p for p in parts if isinstance(p, TextBlock | ImageBlock)]
    result = ToolResultBlock(
        tool_use_id=message.tool_call_id,
        name=message.name,
        output=output,
        is_error=message.status == "error",
    )
    return [result], template


def from_langchain(messages: Iterable[BaseMessage]) -> list[Msg]:
    """LangChain messages as :class:`~memdir.messages.Msg`, one each (see :func:`message_to_msg`).

    Raises:
        MessageFormatError: a message cannot be converted (its position is named).
    """
    given: object = messages
    if isinstance(given, BaseMessage | str | bytes) or not isinstance(given, Iterable):
        raise MessageFormatError(f"from_langchain takes a list of messages, not {given!r:.60}")
    out = []
    for index, message in enumerate(messages):
        try:
            out.append(message_to_msg(message))
        except MessageFormatError as exc:
            raise type(exc)(f"LangChain message #{index}: {exc}") from None
    return out


# -- memdir -> LangChain -------------------------------------------------------------------


def to_langchain(msgs: Iterable[Msg]) -> list[BaseMessage]:
    """memdir messages as LangChain messages: the exact originals back where nothing changed.

    A ``tool`` message with several results becomes one ``ToolMessage`` per result (the first
    keeps the message's id, the others get ``<id>-<n>``).

    Raises:
        MessageFormatError: ``msgs`` is not a list of :class:`~memdir.messages.Msg`.
    """
    if isinstance(msgs, Msg) or not isinstance(msgs, Iterable):
        raise MessageFormatError(f"to_langchain takes a list of Msg, not {msgs!r:.60}")
    out: list[BaseMessage] = []
    for msg in msgs:
        if not isinstance(msg, Msg):
            raise MessageFormatError(f"to_langchain takes Msg objects, not {type(msg).__name__}")
        out.extend(msg_to_messages(msg))
    return out


def msg_to_messages(msg: Msg) -> list[BaseMessage]:
    """One :class:`~memdir.messages.Msg` as LangChain messages (several for a multi-result
    ``tool`` message)."""
    raw = msg.metadata.get(MESSAGE_KEY)
    skeleton: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    own = {k: v for k, v in msg.metadata.items() if k != MESSAGE_KEY}
    kwargs = dict(skeleton.get("additional_kwargs") or {})
    if own or not isinstance(raw, Mapping) or skeleton.get("memdir"):
        kwargs[MEMDIR_KWARG] = {"metadata": own, "created_at": msg.created_at.isoformat()}
    common: dict[str, Any] = {"additional_kwargs": kwargs}
    if skeleton.get("response_metadata"):
        common["response_metadata"] = dict(skeleton["response_metadata"])
    msg_id = None if skeleton.get("no_id") else msg.id
    template = skeleton.get("content")
    if msg.role == "tool":
        return [
            _tool_message(r, i, msg_id, template, skeleton, common)
            for i, r in enumerate(msg.tool_results)
        ]
    calls = {c.id: c for c in msg.tool_uses}
    blocks = [b for b in msg.content if not isinstance(b, ToolUseBlock)]
    content = content_out(template, blocks, calls)
    common.update(content=content, id=msg_id, name=msg.name)
    chat_role = skeleton.get("chat_role")
    if isinstance(chat_role, str):
        return [ChatMessage(role=chat_role, **common)]
    if msg.role == "user":
        return [HumanMessage(**common)]
    if msg.role == "system":
        return [SystemMessage(**common)]
    ai: dict[str, Any] = {
        "tool_calls": [
            {"name": c.name, "args": c.input, "id": c.id, "type": "tool_call"}
            for c in calls.values()
        ]
    }
    if skeleton.get("invalid_tool_calls"):
        ai["invalid_tool_calls"] = list(skeleton["invalid_tool_calls"])
    if skeleton.get("usage_metadata") is not None:
        ai["usage_metadata"] = dict(skeleton["usage_metadata"])
    return [AIMessage(**common, **ai)]


def _tool_message(
    result: ToolResultBlock,
    index: int,
    msg_id: str | None,
    template: object,
    skeleton: Mapping[str, Any],
    common: Mapping[str, Any],
) -> ToolMessage:
    content: str | list[Any]
    if isinstance(result.output, str):
        content = result.output
    else:
        content = content_out(template if index == 0 else None, list(result.output), {})
        if content == "" and not result.output:
            content = []
    extra: dict[str, Any] = {}
    if index == 0 and "artifact" in skeleton:
        extra["artifact"] = skeleton["artifact"]
    return ToolMessage(
        **common,
        content=content,
        tool_call_id=result.tool_use_id,
        name=result.name,
        status="error" if result.is_error else "success",
        id=msg_id if index == 0 or msg_id is None else f"{msg_id}-{index}",
        **extra,
    )
