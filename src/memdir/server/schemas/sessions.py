"""Bodies of the session routes: logged sessions, their messages, and session search."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from memdir.messages import MessageFormatError, Msg, from_anthropic, from_openai
from memdir.server.schemas.meta import FromLibrary
from memdir.sessions import LogRecord

__all__ = [
    "Appended",
    "LoggedMessage",
    "MessagesIn",
    "SessionHitOut",
    "SessionInfoOut",
    "to_msgs",
]

MAX_MESSAGES = 2_000
"""Messages one request may carry."""


class SessionHitOut(FromLibrary):
    """A logged message that matches a query (as :class:`memdir.sessions.SessionHit`)."""

    citation: str = Field(description="sessions/<id>.log.jsonl#L<line>")
    session_id: str
    path: str
    line: int
    role: str
    tools: list[str]
    at: datetime | None
    text: str = Field(description="The message's searchable text.")
    score: float
    superseded_by: str | None = Field(
        default=None,
        description="When a later message among the best hits states a changed value of what "
        "this one says, its citation (sessions/<id>.log.jsonl#L<line>); it is ranked above "
        "this one.",
    )
    supersedes: list[str] = Field(
        default_factory=list,
        description="The citations of the earlier messages among the best hits whose value "
        "this message changes.",
    )


class SessionInfoOut(FromLibrary):
    """A logged session."""

    session_id: str
    path: str
    first_at: datetime | None
    last_at: datetime | None
    messages: int
    lines: int = Field(description="Lines of its log (a line that is not a message counts).")
    summary: str = Field(description="Its first user message, shortened.")


class MessagesIn(BaseModel):
    """Messages to log, in one of three formats."""

    messages: list[dict[str, Any]] = Field(max_length=MAX_MESSAGES)
    format: Literal["memdir", "openai", "anthropic"] = Field(
        default="memdir",
        description="memdir: Msg.to_dict() objects (ids kept: a message logged already is "
        "skipped); openai: chat completion messages; anthropic: Messages API turns.",
    )
    system: str | None = Field(default=None, description="Anthropic's system prompt, if any.")


def to_msgs(body: MessagesIn) -> list[Msg]:
    """The messages of ``body``.

    Raises:
        MessageFormatError: a message is malformed.
    """
    if body.system is not None and body.format != "anthropic":
        raise MessageFormatError("system is for the anthropic format; others carry it in messages")
    if body.format == "openai":
        return from_openai(body.messages)
    if body.format == "anthropic":
        return from_anthropic(body.system, body.messages)
    return [Msg.from_dict(m) for m in body.messages]


class Appended(FromLibrary):
    """The log lines an append wrote."""

    path: str
    start_line: int
    end_line: int


class LoggedMessage(BaseModel):
    """One message of a session log."""

    line: int = Field(description="Its line in the log (cite as path#L<line>).")
    offloaded_at: datetime | None
    msg: dict[str, Any] = Field(description="The message, as Msg.to_dict().")

    @classmethod
    def of(cls, record: LogRecord) -> LoggedMessage:
        """The body of a log record."""
        return cls(line=record.line, offloaded_at=record.offloaded_at, msg=record.msg.to_dict())
