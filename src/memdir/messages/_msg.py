"""The message data model: :class:`Msg` and its JSON form (the blocks are in ``_blocks``).

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

from memdir.messages._blocks import (
    BLOCK_TYPES,
    Block,
    ImageBlock,
    MessageFormatError,
    MissingToolCallIdError,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownRoleError,
    block_from_dict,
    block_to_dict,
    check_block,
)

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
    "as_list",
    "block_from_dict",
    "block_to_dict",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: frozenset[str] = frozenset(get_args(Role))

SUMMARY_NAME = "__compaction_summary__"
"""``Msg.name`` of the message that replaces a compacted conversation prefix."""


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
        elif isinstance(content, BLOCK_TYPES):
            content = (content,)
        elif not isinstance(content, tuple):
            if not isinstance(content, Iterable):
                raise MessageFormatError(f"message content must be blocks, not {content!r}")
            content = tuple(content)
        allowed = _ALLOWED[self.role]
        for block in content:
            if not isinstance(block, BLOCK_TYPES):
                raise MessageFormatError(f"not a content block: {block!r}")
            if not isinstance(block, allowed):
                raise MessageFormatError(
                    f"a {self.role!r} message cannot hold a {block.type!r} block"
                )
            check_block(block)
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
        # Only metadata and tool inputs can hold non-JSON values: every other field was checked
        # to be a string when the message was built, so the (large) texts are not dumped here.
        free = [b.input for b in self.content if isinstance(b, ToolUseBlock)]
        if self.metadata or free:
            try:
                json.dumps([data.get("metadata"), free], allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise MessageFormatError(
                    f"message {self.id} is not JSON-serialisable: {exc}"
                ) from exc
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
