"""MemdirSession: the Agents SDK's ``Session`` on a memdir workspace's append-only session log.

Every item the SDK adds is appended to ``sessions/<session_id>.log.jsonl`` (one message record
per item, secrets masked) before anything else happens, and no line is ever removed or
rewritten. What the SDK reads back (the *window*) is derived from that log:

* ``pop_item`` appends a marker record ``{"op": "pop", "target": <message id>}``;
* ``clear_session`` appends ``{"op": "clear"}``: the window starts again, empty;
* a compaction appends the summary and a marker ``{"op": "window", "ids": [...]}`` naming the
  messages the window holds from then on (the summary first, the kept tail after it).

Markers are message records of role ``user`` named :data:`MARKER_NAME` with the operation in
``metadata["memdir.session_marker"]``; their text says they are not part of the conversation.
A session opened again, in this process or another, replays the log: item records are added to
the window, markers are applied. The window in memory keeps the items exactly as added (the log
holds them masked, so a session replayed from the log holds masked text).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agents.memory import OpenAIResponsesCompactionArgs, SessionSettings
from agents.memory.session_settings import resolve_session_limit

from memdir.adapters.openai_agents._convert import (
    ITEM_KEY,
    item_to_msg,
    mask_skeleton,
    msg_to_items,
)
from memdir.agent._runtime import BackgroundTasks
from memdir.compaction import CompactionConfig, CompactionResult, ConversationCompactor
from memdir.errors import ConfigError, MemdirError
from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
from memdir.memory import MemoryFlushManager
from memdir.messages import Msg, dangling_tool_calls
from memdir.models import ChatModel, model_from_string
from memdir.redact import redact
from memdir.sessions import SessionLog
from memdir.store.workspace import Workspace

__all__ = ["MARKER_KEY", "MARKER_NAME", "MemdirSession"]

logger = logging.getLogger("memdir.adapters.openai_agents")

MARKER_NAME: Final = "__memdir_session_marker__"
"""``Msg.name`` of a marker record in the session log."""
MARKER_KEY: Final = "memdir.session_marker"
"""``Msg.metadata`` key of a marker record: ``{"op": "pop" | "clear" | "window", ...}``."""
_DEFAULT_COMPACTION: Final = CompactionConfig()
_DEFAULT_EVICTION: Final = ToolResultEvictionConfig()


def fingerprint(item: Mapping[str, Any]) -> str:
    """A stable text for an item, to recognise it in the SDK's model input."""
    return json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(slots=True)
class _Entry:
    """One message of the window, the item it stands for (as JSON) and its fingerprints.

    ``fps`` are the fingerprints the SDK may hold the item under: as it was added, and as
    ``get_items`` serves it (the two differ once memdir changed the message).
    """

    msg: Msg
    item: str
    fps: tuple[str, ...]
    own: bool = False  # made by memdir (a summary...), not an item the SDK added

    def changed_to(self, msg: Msg) -> list[_Entry]:
        """Entries for ``msg``, this message as memdir changed it (fingerprints kept)."""
        new = _entries(msg)
        if len(new) == 1:
            new[0].fps = tuple(dict.fromkeys([*self.fps, *new[0].fps]))
        return new


def _entries(msg: Msg, added: Mapping[str, Any] | None = None) -> list[_Entry]:
    """The window entries of ``msg``: one, or one per item when it stands for several."""
    served = msg_to_items(msg)
    if len(served) != 1:
        # One of memdir's own messages that is several items (an assistant text with tool
        # calls, several error results): one message per item, so one entry is one item.
        return [_own(e) for item in served for e in _entries(item_to_msg(item), item)]
    fps: tuple[str, ...] = (fingerprint(served[0]),)
    if added is not None and served[0] != added:
        fps = (fingerprint(added), *fps)
    own = ITEM_KEY not in msg.metadata
    return [_Entry(msg=msg, item=json.dumps(served[0], ensure_ascii=False), fps=fps, own=own)]


def _own(entry: _Entry) -> _Entry:
    entry.own = True
    return entry


@dataclass(frozen=True, slots=True)
class _Stamp:
    """The log as a reader last saw it (equal stamps: the log did not change in between)."""

    identity: str = ""
    tag: str = ""
    size: int = -1


@dataclass(slots=True)
class _State:
    window: list[_Entry] = field(default_factory=list)
    # Fingerprints of items compacted out of the window (how many of each), so that the SDK's
    # model input, which still holds them during a run, can be mapped onto the window.
    gone: Counter[str] = field(default_factory=Counter)


def _as_model(model: ChatModel | str, what: str) -> ChatModel:
    if isinstance(model, str):
        return model_from_string(model)
    if not callable(getattr(model, "generate", None)):
        raise ConfigError(f"{what} must be a memdir ChatModel or a model string like 'extractive'")
    return model


class MemdirSession:
    """An Agents SDK session kept in a memdir workspace, compacted the memdir way.

    ``Runner.run(agent, "...", session=MemdirSession("chat-1", "~/agent-ws"))``. It implements
    the SDK's ``Session`` protocol (``get_items``, ``add_items``, ``pop_item``,
    ``clear_session``) and ``run_compaction``, for every model the SDK can drive.

    After each ``add_items`` (and when the SDK calls ``run_compaction``), if a trigger of
    ``compaction`` fires and no tool call is waiting for its output, the window is compacted
    by :class:`~memdir.compaction.ConversationCompactor`: memory is flushed from the messages
    about to be summarised, they are already in the session log, and a summary item (a user
    message) takes their place; a tool call and its output are never separated. Tool outputs
    over ``tool_result_eviction.max_result_chars`` are written to ``large_tool_results/`` when
    they are added, and the window holds a preview. After each reply, new facts are flushed to
    the daily ledger in the background (``memory_flush``).

    Args:
        session_id: 1-128 characters of ``A-Z a-z 0-9 . _ -``; names the log file.
        workspace: the workspace, or its path.
        compaction: when and how to compact (memdir's defaults); ``None`` never compacts.
        tool_result_eviction: when to move big tool outputs to files; ``None`` keeps them.
        model: the model that writes summaries (a memdir model or a string such as
            ``"openai:gpt-4o-mini"``); default the offline ``"extractive"``.
        memory_model: the model that extracts facts for the ledger (default ``model``).
        memory_flush: flush facts to ``memory/YYYY-MM-DD.md`` after replies and before
            compaction.
        session_settings: the SDK's settings (``limit`` caps what ``get_items`` returns).
        namespace: the caller's namespace in the workspace.

    Raises:
        ConfigError: a bad model or configuration.
        SessionLogError: an invalid session id.
    """

    def __init__(
        self,
        session_id: str,
        workspace: Workspace | str | os.PathLike[str],
        *,
        compaction: CompactionConfig | None = _DEFAULT_COMPACTION,
        tool_result_eviction: ToolResultEvictionConfig | None = _DEFAULT_EVICTION,
        model: ChatModel | str = "extractive",
        memory_model: ChatModel | str | None = None,
        memory_flush: bool = True,
        session_settings: SessionSettings | None = None,
        namespace: str | None = None,
    ) -> None:
        if compaction is not None and not isinstance(compaction, CompactionConfig):
            raise ConfigError("compaction must be a CompactionConfig or None")
        if tool_result_eviction is not None and not isinstance(
            tool_result_eviction, ToolResultEvictionConfig
        ):
            raise ConfigError("tool_result_eviction must be a ToolResultEvictionConfig or None")
        if not isinstance(memory_flush, bool):
            raise ConfigError("memory_flush must be True or False")
        self.workspace = Workspace.coerce(workspace, namespace)
        self.redactor: Callable[[str], str] | None = (
            compaction.redactor if compaction is not None else redact
        )
        self.log = SessionLog(self.workspace, session_id, redact=self.redactor)
        self.session_id: str = self.log.session_id
        self.session_settings: SessionSettings | None = session_settings
        summary_model = _as_model(model, "model")
        self.flush_manager: MemoryFlushManager | None = None
        if memory_flush:
            memory = _as_model(memory_model, "memory_model") if memory_model else summary_model
            self.flush_manager = MemoryFlushManager(self.workspace, memory)
        self.compactor: ConversationCompactor | None = None
        if compaction is not None:
            self.compactor = ConversationCompactor(
                summary_model, self.workspace, compaction, on_flush=self._flush_before_compaction
            )
        self.evictor: ToolResultEvictor | None = None
        if tool_result_eviction is not None:
            self.evictor = ToolResultEvictor(
                self.workspace, tool_result_eviction, session_id=self.session_id
            )
        self.last_compaction: CompactionResult | None = None
        """The latest compaction that changed the window (``None`` before the first)."""
        self.system_hint: str | None = None
        """The instructions sent with the last model call (set by ``memdir_input_filter``);
        counted by the compaction triggers."""
        self._state = _State()
        self._stamp: _Stamp | None = None  # the log as this object last saw it
        self._lock = asyncio.Lock()
        self._background = BackgroundTasks()

    def __repr__(self) -> str:
        return f"MemdirSession({self.session_id!r}, {self.workspace.describe()!r})"

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The window's items, oldest first; ``limit`` keeps the latest ``limit`` of them."""
        async with self._lock:
            await self._refresh()
            items = [json.loads(entry.item) for entry in self._state.window]
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` to the log and the window, then evict, compact and flush as due."""
        if not items:
            return
        async with self._lock:
            await self._refresh()
            entries = [e for item in items for e in _entries(item_to_msg(item), item)]
            if self.evictor is not None:
                self._evict(entries)
            await self._append([e.msg for e in entries])
            self._state.window.extend(entries)
            if self.compactor is not None and not dangling_tool_calls(self._msgs()):
                await self._compact(force=False)
            last = self._state.window[-1].msg if self._state.window else None
            if (
                self.flush_manager is not None
                and last is not None
                and last.role == "assistant"
                and last.text
                and not dangling_tool_calls(self._msgs())
            ):
                self._flush_in_background(self._msgs())

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item; the log gets a pop marker (nothing is deleted)."""
        async with self._lock:
            await self._refresh()
            window = self._state.window
            if not window:
                return None
            entry = window.pop()
            marker = _marker({"op": "pop", "target": entry.msg.id}, "an item was removed")
            await self._append([marker])
            return json.loads(entry.item)

    async def clear_session(self) -> None:
        """Empty the window; the log keeps every line and gets a clear marker."""
        async with self._lock:
            await self._refresh()
            await self._append([_marker({"op": "clear"}, "the session was cleared")])
            self._state = _State()

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Compact now if a trigger fires, or whatever the triggers say with ``force``.

        The SDK calls this after a turn of a Responses-API model; :meth:`add_items` already
        compacts for every model, so this matters mostly for ``force``. Nothing is done while a
        tool call waits for its output.
        """
        if self.compactor is None:
            return
        force = bool(args.get("force")) if args else False
        async with self._lock:
            await self._refresh()
            if not dangling_tool_calls(self._msgs()):
                await self._compact(force=force)

    # -- memory ------------------------------------------------------------------------------

    async def flush_memories(self) -> None:
        """Extract new facts from the window into the daily ledger now (and wait for it)."""
        if self.flush_manager is None:
            return
        async with self._lock:
            await self._refresh()
            msgs = self._msgs()
        await self.flush_manager.flush_memories(msgs, session_id=self.session_id)

    async def aclose(self) -> None:
        """Wait for the background flushes to finish."""
        await self._background.drain()

    async def _flush_before_compaction(self, msgs: Sequence[Msg], *, session_id: str) -> None:
        if self.flush_manager is not None:
            await self.flush_manager.flush_memories(msgs, session_id=session_id)

    def _flush_in_background(self, msgs: list[Msg]) -> None:
        assert self.flush_manager is not None
        self._background.spawn(
            self.flush_manager.flush_memories(msgs, session_id=self.session_id),
            name=f"memory flush of session {self.session_id}",
        )

    # -- the model's view during a run ---------------------------------------------------------

    def model_input(self, items: Sequence[Mapping[str, Any]]) -> list[Any] | None:
        """The window in place of ``items``, the SDK's input for a model call; ``None`` if unsafe.

        During one ``Runner.run`` the SDK keeps the items it read and produced in memory, so
        after a compaction in the middle of a run its next model input still holds what was
        summarised. When every item of ``items`` is one of this session's (kept or compacted
        out), and the window's items are all there, the answer is the window followed by the
        items the SDK has not added yet; otherwise ``None`` (use ``items`` as they are).
        """
        window = self._state.window
        aliases: dict[str, list[int]] = {}
        for index, entry in enumerate(window):
            for fp in entry.fps:
                aliases.setdefault(fp, []).append(index)
        gone = Counter(self._state.gone)
        matched = [False] * len(window)
        same = True  # the SDK holds exactly the window, as get_items serves it
        rest: list[Any] = []
        for position, item in enumerate(items):
            fp = fingerprint(item)
            found = next((i for i in aliases.get(fp, ()) if not matched[i]), None)
            if found is not None:
                matched[found] = True
                same = same and found == position and window[found].fps[-1] == fp
            elif gone[fp] > 0:
                gone[fp] -= 1
                same = False
            else:
                rest = list(items[position:])
                break
        if same or not all(m or e.own for m, e in zip(matched, window, strict=True)):
            return None
        return [json.loads(entry.item) for entry in window] + rest

    # -- internals ---------------------------------------------------------------------------

    def _msgs(self) -> list[Msg]:
        return [e.msg for e in self._state.window]

    def _evict(self, entries: list[_Entry]) -> None:
        assert self.evictor is not None
        window = self._state.window
        outcome = self.evictor.evict([*self._msgs(), *(e.msg for e in entries)])
        if not outcome.evicted:
            return
        both = [*window, *entries]
        for index, msg in enumerate(outcome.messages):
            if msg is not both[index].msg:
                # An evicted result keeps its message (and so its single item).
                changed = both[index].changed_to(msg)[0]
                if index < len(window):
                    window[index] = changed
                else:
                    entries[index - len(window)] = changed

    async def _compact(self, *, force: bool) -> None:
        assert self.compactor is not None
        before = self._state.window
        result = await self.compactor.compact_if_needed(
            [e.msg for e in before],
            session_id=self.session_id,
            system=self.system_hint,
            force=force,
        )
        if result is None:
            return
        by_id = {e.msg.id: e for e in before}
        window: list[_Entry] = []
        for msg in result.messages:
            old = by_id.get(msg.id)
            if old is not None and old.msg == msg:
                window.append(old)
            else:
                window.extend(old.changed_to(msg) if old is not None else _entries(msg))
        kept_ids = {m.id for m in result.messages}
        for entry in before:
            if entry.msg.id not in kept_ids:
                self._state.gone.update(entry.fps)
        self._state.window = window
        self.last_compaction = result
        if result.summary_message is not None:
            fresh = [e.msg for e in window if e.msg.id not in by_id]
            await self._append([*fresh, self._window_marker()])

    def _window_marker(self) -> Msg:
        ids = [e.msg.id for e in self._state.window]
        return _marker({"op": "window", "ids": ids}, "the conversation was compacted")

    async def _append(self, msgs: list[Msg]) -> None:
        redactor = self.redactor
        logged = [mask_skeleton(m, redactor) for m in msgs] if redactor is not None else msgs
        await asyncio.to_thread(self.log.append, logged)
        self._stamp = await self._stat_async()

    async def _stat_async(self) -> _Stamp:
        # A stat of a local file is quicker than a hop to a thread; a database's is not.
        return self._stat() if self.workspace.is_local else await asyncio.to_thread(self._stat)

    def _stat(self) -> _Stamp:
        try:
            st = self.workspace.stat(self.log.rel_path)
        except MemdirError:
            return _Stamp()
        if st is None:
            return _Stamp()
        return _Stamp(st.identity, st.tag, st.size)

    async def _refresh(self) -> None:
        """Replay the log when it changed since this object last wrote or read it."""
        stamp = await self._stat_async()
        if stamp == self._stamp:
            return
        records = (await asyncio.to_thread(self.log.read)).records
        self._state = _replay([r.msg for r in records])
        self._stamp = stamp


def _marker(op: dict[str, Any], what: str) -> Msg:
    return Msg.user(
        f"[memdir session marker: {what}; not part of the conversation]",
        name=MARKER_NAME,
        id=f"{MARKER_NAME}:{uuid.uuid4().hex}",
        metadata={MARKER_KEY: op},
    )


def _replay(msgs: list[Msg]) -> _State:
    """The window a log describes: items added, markers applied."""
    state = _State()
    by_id: dict[str, Msg] = {}
    for msg in msgs:
        op = msg.metadata.get(MARKER_KEY) if msg.name == MARKER_NAME else None
        if isinstance(op, Mapping):
            kind = op.get("op")
            if kind == "clear":
                state = _State()
            elif kind == "pop":
                target = op.get("target")
                for i in range(len(state.window) - 1, -1, -1):
                    if state.window[i].msg.id == target:
                        del state.window[i]
                        break
            elif kind == "window" and isinstance(op.get("ids"), list):
                current = {e.msg.id: e for e in state.window}
                window = []
                for msg_id in op["ids"]:
                    entry = current.get(msg_id)
                    if entry is not None:
                        window.append(entry)
                    elif msg_id in by_id:
                        window.extend(_entries(by_id[msg_id]))
                kept = {e.msg.id for e in window}
                for entry in state.window:
                    if entry.msg.id not in kept:
                        state.gone.update(entry.fps)
                state.window = window
            continue
        by_id[msg.id] = msg
        if ITEM_KEY in msg.metadata:  # an item the SDK added (memdir's own records wait)
            state.window.extend(_entries(msg))
    return state
