"""The message data model: content blocks, :class:`Msg`, and their JSON form.

Public names are re-exported by :mod:`memdir.messages`; this module exists so that the provider
converters can import the model without a circular import.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, get_args

from memdir.errors import MemdirError

__all__ = [
    "SUMMARY_NAME",
    "Block",
    "ImageBlock",
    "MessageFormatError",
    "MissingToolCallIdError",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UnknownRoleError",
    "block_from_dict",
    "block_to_dict",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: frozenset[str] = frozenset(get_args(Role))

SUMMARY_NAME = "__compaction_summary__"
"""``Msg.name`` of the message that replaces a compacted conversation prefix."""


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
_BLOCK_TYPES = (TextBlock, ThinkingBlock, ImageBlock, ToolUseBlock, ToolResultBlock)

# Which blocks each role may hold. Tool results live only in "tool" messages, tool calls and
# thinking only in assistant messages: converters and compaction rely on this.
_ALLOWED: dict[str, tuple[type, ...]] = {
    "system": (TextBlock,),
    "user": (TextBlock, ImageBlock),
    "assistant": (TextBlock, ThinkingBlock, ImageBlock, ToolUseBlock),
    "tool": (ToolResultBlock,),
}


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True, kw_only=True)
class Msg:
    """One conversation message: a role and a tuple of content blocks.

    Messages are immutable; derive new ones with :func:`dataclasses.replace` or
    :meth:`with_content`. ``content`` may be given as a string or a list, it is stored as a tuple.

    Args:
        role: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.
        content: the blocks. ``"tool"`` messages hold only :class:`ToolResultBlock`;
            only assistant messages hold :class:`ToolUseBlock` and :class:`ThinkingBlock`.
        name: an optional author name (``SUMMARY_NAME`` marks a compaction summary).
        id: a unique id (a random UUID hex by default); stable across serialisation.
        created_at: an aware instant, stored in UTC.
        metadata: JSON-serialisable annotations (copied on construction).

    Raises:
        UnknownRoleError: for a role outside the four above.
        MessageFormatError: for a block that is not allowed in the role or is malformed.
    """

    role: Role
    content: tuple[Block, ...] = ()
    name: str | None = None
    id: str = field(default_factory=_new_id)
    created_at: datetime = field(default_factory=_utc_now)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or self.role not in _ROLES:
            raise UnknownRoleError(
                f"unknown message role {self.role!r}: use one of {', '.join(sorted(_ROLES))}"
            )
        content: object = self.content
        if isinstance(content, str):
            content = (TextBlock(text=content),)
        elif isinstance(content, _BLOCK_TYPES):
            content = (content,)
        elif not isinstance(content, tuple):
            if not isinstance(content, Iterable):
                raise MessageFormatError(f"message content must be blocks, not {content!r}")
            content = tuple(content)
        allowed = _ALLOWED[self.role]
        for block in content:
            if not isinstance(block, _BLOCK_TYPES):
                raise MessageFormatError(f"not a content block: {block!r}")
            if not isinstance(block, allowed):
                raise MessageFormatError(
                    f"a {self.role!r} message cannot hold a {block.type!r} block"
                )
            _check_block(block)
        if self.role == "tool" and not content:
            raise MessageFormatError("a 'tool' message needs at least one tool_result block")
        object.__setattr__(self, "content", content)
        if not isinstance(self.id, str) or not self.id:
            raise MessageFormatError("a message id must be a non-empty string")
        if self.name is not None and not isinstance(self.name, str):
            raise MessageFormatError(f"a message name must be a string, not {self.name!r}")
        if not isinstance(self.created_at, datetime) or self.created_at.tzinfo is None:
            raise MessageFormatError("created_at must be a timezone-aware datetime")
        object.__setattr__(self, "created_at", self.created_at.astimezone(UTC))
        if not isinstance(self.metadata, Mapping):
            raise MessageFormatError("message metadata must be a mapping")
        object.__setattr__(self, "metadata", dict(self.metadata))

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def system(cls, text: str, **kw: Any) -> Msg:
        """A system message holding ``text``."""
        return cls(role="system", content=(TextBlock(text=text),), **kw)

    @classmethod
    def user(cls, text: str, **kw: Any) -> Msg:
        """A user message holding ``text``."""
        return cls(role="user", content=(TextBlock(text=text),), **kw)

    @classmethod
    def assistant(
        cls,
        text: str | None = None,
        *,
        tool_calls: Sequence[ToolUseBlock] = (),
        **kw: Any,
    ) -> Msg:
        """An assistant message with optional text followed by tool calls."""
        blocks: list[Block] = [TextBlock(text=text)] if text is not None else []
        blocks.extend(tool_calls)
        return cls(role="assistant", content=tuple(blocks), **kw)

    @classmethod
    def tool_result(
        cls,
        tool_use_id: str,
        output: str | list[TextBlock | ImageBlock],
        *,
        name: str | None = None,
        is_error: bool = False,
        **kw: Any,
    ) -> Msg:
        """A tool message holding one result for the call ``tool_use_id``."""
        block = ToolResultBlock(
            tool_use_id=tool_use_id, name=name, output=output, is_error=is_error
        )
        return cls(role="tool", content=(block,), **kw)

    # -- views -------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (empty when there are none)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls in this message, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        """The tool results in this message, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))

    def with_content(self, content: str | Iterable[Block]) -> Msg:
        """A copy with new content (same id, role, name, time and metadata)."""
        return dataclasses.replace(self, content=content)  # type: ignore[arg-type]

    # -- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` restores an equal message.

        Raises:
            MessageFormatError: if the metadata or a tool input is not JSON-serialisable.
        """
        data: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "content": [block_to_dict(b) for b in self.content],
            "created_at": self.created_at.isoformat(),
        }
        if self.name is not None:
            data["name"] = self.name
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        try:
            json.dumps(data, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise MessageFormatError(f"message {self.id} is not JSON-serialisable: {exc}") from exc
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Msg:
        """Rebuild a message from :meth:`to_dict` output.

        Raises:
            MessageFormatError: if a field is missing or has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise MessageFormatError(f"a message must be a JSON object, not {type(data).__name__}")
        if "role" not in data:
            raise MessageFormatError("message has no 'role'")
        raw = data.get("content", [])
        if isinstance(raw, str):
            content: tuple[Block, ...] = (TextBlock(text=raw),)
        elif isinstance(raw, list):
            content = tuple(block_from_dict(b) for b in raw)
        else:
            raise MessageFormatError("message 'content' must be a list of blocks or a string")
        kw: dict[str, Any] = {}
        if "id" in data:
            kw["id"] = data["id"]
        if "created_at" in data:
            try:
                kw["created_at"] = datetime.fromisoformat(data["created_at"])
            except (TypeError, ValueError) as exc:
                raise MessageFormatError(f"bad created_at {data['created_at']!r}") from exc
        metadata = data.get("metadata") or {}
        return cls(
            role=data["role"],
            content=content,
            name=data.get("name"),
            metadata=metadata,
            **kw,
        )


def _check_block(block: Block) -> None:
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
                _check_block(part)
        else:
            _need_str(block.output, "tool result 'output'")


def as_list(value: object, what: str, *, of_msgs: bool = False) -> list[Any]:
    """``value`` (an iterable of items) as a list, for the list-taking functions.

    Raises:
        MessageFormatError: ``value`` is ``None``, a single message, a string, a mapping or
            not iterable (a common slip is passing one message where a list is expected), or
            ``of_msgs`` is set and an item is not a :class:`Msg`.
    """
    if isinstance(value, Msg | str | bytes | Mapping) or not isinstance(value, Iterable):
        raise MessageFormatError(f"{what} takes a list, not {type(value).__name__}")
    items = list(value)
    if of_msgs:
        for index, item in enumerate(items):
            if not isinstance(item, Msg):
                raise MessageFormatError(
                    f"{what}: item #{index} is a {type(item).__name__}, not a Msg"
                )
    return items


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
    _check_block(block)
    return block
