"""Per-session conversation state, persisted in the workspace after every step.

``sessions/<session_id>.state.json`` holds the working conversation (after eviction and
compaction), rewritten atomically after each step, so a process killed mid-call resumes where it
stopped. A tool call that was running when the process died gets an error result on load, so
the conversation stays valid for every provider. An unreadable state file is moved aside
(``.corrupt-<time>``), never deleted.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Final

from memdir.errors import WorkspaceError
from memdir.messages import (
    MessageFormatError,
    Msg,
    ToolResultBlock,
    ToolUseBlock,
    pair_tool_results,
)
from memdir.sessions import validate_session_id
from memdir.store.workspace import SESSIONS_DIR, Workspace

__all__ = ["INTERRUPTED_RESULT", "SessionStore", "repair_dangling"]

logger = logging.getLogger("memdir.agent")

STATE_FORMAT: Final = 1
INTERRUPTED_RESULT: Final = (
    "Error: this tool call was interrupted (the process stopped before it finished); "
    "its effect is unknown. Check the outcome or call it again if it is still needed."
)


@dataclass(slots=True)
class _Stamp:
    tag: str
    size: int


class SessionStore:
    """Loads and saves the conversation of each session.

    Args:
        workspace: where ``sessions/`` lives.
        agent_name: recorded in the file (informational).
    """

    def __init__(self, workspace: Workspace, agent_name: str) -> None:
        self.workspace = workspace
        self.agent_name = agent_name
        self._stamps: dict[str, _Stamp | None] = {}
        # Serialised messages by id; the Msg object is kept so a replaced message (same id,
        # new content) is never served from the cache.
        self._json: dict[str, dict[str, tuple[Msg, str]]] = {}

    def rel_path(self, session_id: str) -> str:
        """Workspace-relative path of the session's state file."""
        return f"{SESSIONS_DIR}/{validate_session_id(session_id)}.state.json"

    def _stat(self, session_id: str) -> _Stamp | None:
        st = self.workspace.stat(self.rel_path(session_id))
        if st is None:
            return None
        return _Stamp(st.tag, st.size)

    def stale(self, session_id: str) -> bool:
        """Whether the file changed since this store last read or wrote it (another process)."""
        if session_id not in self._stamps:
            return True
        return self._stat(session_id) != self._stamps[session_id]

    def load(self, session_id: str) -> list[Msg]:
        """Read the session's conversation (empty if there is none).

        Tool calls left without a result (the process died while they ran) are answered with
        an error result, so the conversation can be sent to a model again.
        """
        rel = self.rel_path(session_id)
        stamp = self._stat(session_id)
        if stamp is None:
            self._stamps[session_id] = None
            return []
        try:
            raw = self.workspace.read_bytes(rel)
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
                raise MessageFormatError("not a session state object")
            msgs = [Msg.from_dict(m) for m in data["messages"]]
        except FileNotFoundError:
            self._stamps[session_id] = None
            return []
        except (OSError, ValueError, MessageFormatError) as exc:
            aside = self._move_aside(rel)
            logger.warning(
                "session %s: unreadable state file moved to %s (%s); starting afresh",
                session_id,
                aside,
                type(exc).__name__,
            )
            self._stamps[session_id] = None
            return []
        self._stamps[session_id] = stamp
        return repair_dangling(msgs)

    def save(self, session_id: str, messages: list[Msg]) -> None:
        """Rewrite the session's state file atomically."""
        parts: list[str] = []
        cache: dict[str, tuple[Msg, str]] = {}
        previous = self._json.get(session_id, {})
        for msg in messages:
            hit = previous.get(msg.id)
            if hit is not None and hit[0] is msg:
                encoded = hit[1]
            else:
                encoded = json.dumps(msg.to_dict(), ensure_ascii=False, allow_nan=False)
            cache[msg.id] = (msg, encoded)
            parts.append(encoded)
        self._json[session_id] = cache
        head: dict[str, Any] = {
            "format": STATE_FORMAT,
            "session_id": session_id,
            "agent": self.agent_name,
            "updated_at": self.workspace.utc_now().isoformat(),
        }
        # The envelope is written by hand so the cached message JSON is reused verbatim.
        body = (
            json.dumps(head, ensure_ascii=False)[:-1] + ', "messages": [' + ",".join(parts) + "]}"
        )
        rel = self.rel_path(session_id)
        self.workspace.write_bytes(rel, body.encode("utf-8"))
        self._stamps[session_id] = self._stat(session_id)

    def _move_aside(self, rel: str) -> str:
        """Keep an unreadable state file under another name (never deleted), remove it."""
        stamp = self.workspace.utc_now().strftime("%Y%m%dT%H%M%S%fZ")
        aside = f"{rel}.corrupt-{stamp}"
        try:
            data = self.workspace.read_bytes(rel)
            if not self.workspace.create_text(aside, data):
                raise WorkspaceError(f"{aside} exists already")
            self.workspace.delete(rel)
        except (OSError, WorkspaceError) as exc:
            raise WorkspaceError(f"cannot move the unreadable state file aside: {exc}") from exc
        return aside


def repair_dangling(msgs: list[Msg]) -> list[Msg]:
    """Answer tool calls that never got a result with an "interrupted" error result.

    The results go right after the tool messages that did arrive for the same assistant
    message, so calls and results stay paired.
    """
    unanswered = pair_tool_results(msgs).unanswered
    if not unanswered:
        return msgs
    missing: dict[int, list[ToolUseBlock]] = {}
    for i, call in unanswered:
        missing.setdefault(i, []).append(call)
    out: list[Msg] = []
    pending: list[ToolUseBlock] = []
    for i, msg in enumerate(msgs):
        if pending and msg.role != "tool":
            out.append(_interrupted(pending))
            pending = []
        out.append(msg)
        if msg.role == "assistant":
            pending = missing.get(i, [])
    if pending:
        out.append(_interrupted(pending))
    return out


def _interrupted(calls: list[ToolUseBlock]) -> Msg:
    results = tuple(
        ToolResultBlock(tool_use_id=c.id, name=c.name, output=INTERRUPTED_RESULT, is_error=True)
        for c in calls
    )
    return Msg(role="tool", content=results)
