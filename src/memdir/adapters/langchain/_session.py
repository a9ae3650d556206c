"""One conversation (LangGraph thread) as the middleware keeps it: its log, its Msg cache."""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config

from memdir.adapters.langchain._convert import message_to_msg, msg_to_messages
from memdir.adapters.langchain._spaces import Space
from memdir.errors import MemdirError
from memdir.eviction import ToolResultEvictor
from memdir.messages import Msg
from memdir.models import ToolSpec
from memdir.sessions import SessionLog, validate_session_id
from memdir.tokens import TokenCounter

__all__ = ["Session", "thread_session", "tool_spec"]

log = logging.getLogger("memdir.adapters.langchain")

_Cached = tuple[BaseMessage, Msg]  # the LangChain message and its Msg


def _unchanged(old: BaseMessage, new: BaseMessage) -> bool:
    """Whether ``new`` is ``old`` again (a checkpointer hands out equal copies every run)."""
    if old is new:
        return True
    if not (
        type(old) is type(new)
        and old.content == new.content
        and old.name == new.name
        and old.additional_kwargs == new.additional_kwargs
        and old.response_metadata == new.response_metadata
    ):
        return False
    if isinstance(old, AIMessage) and isinstance(new, AIMessage):
        return old.tool_calls == new.tool_calls and old.usage_metadata == new.usage_metadata
    if isinstance(old, ToolMessage) and isinstance(new, ToolMessage):
        return (old.tool_call_id, old.status, old.artifact) == (
            new.tool_call_id,
            new.status,
            new.artifact,
        )
    if isinstance(old, ChatMessage) and isinstance(new, ChatMessage):
        return old.role == new.role
    return True


@dataclass(slots=True)
class Session:
    """What the middleware keeps per conversation (a thread in a namespace, ``space``).

    ``cache`` maps each state message's id to the message and its Msg, so a model call
    converts only the messages that are new or were replaced since the last one; ``tokens``
    holds each Msg's token count, and ``overhead`` the count of the system prompt and tools.
    """

    id: str
    space: Space
    log: SessionLog
    evictor: ToolResultEvictor | None
    cache: dict[str, _Cached] = field(default_factory=dict)
    logged: set[str] = field(default_factory=set)
    system: str | None = None
    tools: list[ToolSpec] | None = None
    tokens: dict[str, tuple[Msg, int]] = field(default_factory=dict)
    overhead: tuple[object, int] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def convert(self, messages: Sequence[BaseMessage], *, keep: bool = False) -> list[Msg]:
        """The state's messages as Msg, converting only those new or changed since last time.

        The cache then holds these messages only, unless ``keep`` (messages seen before stay).
        """
        out: list[Msg] = []
        seen: dict[str, _Cached] = dict(self.cache) if keep else {}
        for message in messages:
            if message.id is None:  # add_messages gives every message an id; others may not
                message.id = uuid.uuid4().hex
            hit = self.cache.get(message.id)
            if hit is not None and _unchanged(hit[0], message):
                msg = hit[1]
            else:
                when = hit[1].created_at if hit is not None else self.space.workspace.utc_now()
                msg = message_to_msg(message, created_at=when)
            seen[message.id] = (message, msg)
            out.append(msg)
        self.cache = seen
        return out

    def measure(self, counter: TokenCounter, msgs: Sequence[Msg]) -> tuple[int, int]:
        """``(non-system messages, request tokens)`` as the compactor counts them, counting
        only the messages new since the last call (and the system prompt when it changed)."""
        total = 0
        known: dict[str, tuple[Msg, int]] = {}
        for msg in msgs:
            hit = self.tokens.get(msg.id)
            tokens = hit[1] if hit is not None and hit[0] is msg else counter.count_message(msg)
            known[msg.id] = (msg, tokens)
            total += tokens
        self.tokens = known
        shape = (self.system, tuple(id(t) for t in self.tools or ()))
        if self.overhead is None or self.overhead[0] != shape:
            extra = counter.count_request([], system=self.system, tools=self.tools)
            self.overhead = (shape, extra)
        count = sum(1 for m in msgs if m.role != "system")
        return count, total + self.overhead[1]

    def to_langchain(self, msgs: Sequence[Msg]) -> list[BaseMessage]:
        """Msg back to LangChain: the very same objects for messages memdir did not change."""
        out: list[BaseMessage] = []
        for msg in msgs:
            hit = self.cache.get(msg.id)
            if hit is not None and hit[1] is msg:
                out.append(hit[0])
            else:
                out.extend(msg_to_messages(msg))
        return out

    def log_new(self, msgs: Sequence[Msg]) -> None:
        """Append the messages not logged yet (the compaction offload fsyncs them later).

        Runs on the middleware's worker thread, in the order the calls were made.
        """
        with self.lock:
            new = [m for m in msgs if m.id not in self.logged]
        if not new:
            return
        try:
            self.log.append(new, fsync=False)
        except MemdirError as exc:
            log.warning("session %s: messages not logged yet: %s", self.id, exc)
            return
        with self.lock:
            self.logged.update(m.id for m in new)


def thread_session() -> str:
    """The session of the current LangGraph run: its thread id, else ``default``."""
    try:
        config = get_config()
    except RuntimeError:
        return "default"
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None or thread == "":
        return "default"
    text = str(thread)
    try:
        return validate_session_id(text)
    except MemdirError:
        return "lc-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def tool_spec(tool: object) -> ToolSpec | None:
    """A tool as memdir counts it; ``None`` for one LangChain cannot describe as a function."""
    try:
        described = convert_to_openai_tool(tool)  # type: ignore[arg-type]
        function = described["function"]
        return ToolSpec(
            name=function["name"],
            description=function.get("description") or "",
            parameters=function.get("parameters") or {},
        )
    except (ValueError, TypeError, KeyError, MemdirError):
        return None
