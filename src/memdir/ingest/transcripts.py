"""Read existing agent transcripts into :class:`~memdir.messages.Msg` lists.

Supported formats (detected from the content, not the file name):

* **memdir** session logs (``sessions/<id>.log.jsonl``): one record a line with a ``msg`` field,
  or bare ``Msg.to_dict()`` lines;
* **OpenAI** chat message lists: a JSON array of ``{"role": ..., "content": ...}`` objects, or an
  object with a ``messages`` array (tool calls and ``tool`` messages included);
* **Anthropic** Messages API requests: an object with ``messages`` (and optional ``system``)
  whose contents are lists of typed blocks;
* **Claude Code** session files (``~/.claude/projects/<project>/<session>.jsonl``): one event a
  line; assistant turns split over several lines are merged by message id; meta, sidechain and
  bookkeeping events are skipped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from memdir.errors import MemdirError
from memdir.messages import Msg, ToolResultBlock, from_anthropic, from_openai

__all__ = ["Transcript", "TranscriptFormat", "load_transcript", "session_id_for"]

TranscriptFormat = Literal["memdir", "openai", "anthropic", "claude-code"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_BOM = b"\xef\xbb\xbf"
_EXPECTED = (
    "a list of messages in OpenAI or Anthropic format (or an object with a 'messages' list), "
    "a memdir session log or a Claude Code session"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """One conversation read from a file.

    Attributes:
        source: the file it was read from.
        session_id: a safe session id (from the file, or derived from its name).
        format: the detected format.
        messages: the conversation, oldest first.
        skipped: lines or records that were not messages or could not be read.
    """

    source: str
    session_id: str
    format: TranscriptFormat
    messages: tuple[Msg, ...]
    skipped: int = 0


def session_id_for(name: str) -> str:
    """A valid session id (``[A-Za-z0-9._-]{1,128}``, no leading dot) derived from ``name``."""
    if not isinstance(name, str):
        raise MemdirError(f"session_id_for needs a str, not {type(name).__name__}")
    cleaned = _UNSAFE.sub("-", name).strip("-.")[:128].strip("-.")
    return cleaned or "session"


def load_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read a transcript file in any supported format (UTF-8, with or without a BOM).

    Raises:
        MemdirError: the file cannot be read, or holds no recognisable conversation.
    """
    if not isinstance(path, str | os.PathLike):
        raise MemdirError(f"transcript path must be a str or a path, not {type(path).__name__}")
    source = Path(path)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        raise MemdirError(f"transcript not found: {source}") from None
    except OSError as exc:
        raise MemdirError(f"cannot read transcript {source}: {exc}") from exc
    bom = len(_BOM) if data.startswith(_BOM) else 0
    try:
        raw = data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemdirError(
            f"{source}: not a text file (invalid UTF-8 at byte {bom + exc.start})"
        ) from None
    stem = source.name.split(".")[0] or source.name
    text = raw.strip()
    if not text:
        raise MemdirError(f"transcript {source} is empty")
    document: Any = None
    if text[0] in "[{":
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            document = None  # probably JSON Lines
    if isinstance(document, list) or (
        isinstance(document, dict) and ("messages" in document or "system" in document)
    ):
        return _from_document(document, source, stem)
    if isinstance(document, dict):  # one record or event, maybe pretty-printed
        try:
            return _from_lines(json.dumps(document), source, stem)
        except MemdirError:
            keys = ", ".join(repr(k[:40]) for k in list(document)[:5])
            keys += ", ..." if len(document) > 5 else ""
            found = f"a JSON object (keys {keys})" if keys else "an empty JSON object"
            raise MemdirError(
                f"{source}: {found}, not a list of messages or a known export format; "
                f"expected {_EXPECTED}"
            ) from None
    return _from_lines(raw, source, stem)


def _from_document(document: Any, source: Path, stem: str) -> Transcript:
    system: Any = None
    items: Any = document
    if isinstance(document, dict):
        items = document.get("messages")
        system = document.get("system")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise MemdirError(
            f"{source}: expected a list of messages or an object with a 'messages' list"
        )
    if not items:
        raise MemdirError(f"{source}: the transcript has no messages")
    try:
        if _looks_like_memdir(items):
            msgs = [Msg.from_dict(item) for item in items]
            return Transcript(
                source=str(source),
                session_id=session_id_for(stem),
                format="memdir",
                messages=tuple(msgs),
            )
        if system is not None or _looks_like_anthropic(items):
            system_text = _system_text(system)
            msgs = from_anthropic(system_text, items)
            fmt: TranscriptFormat = "anthropic"
        else:
            msgs = from_openai(items)
            fmt = "openai"
    except MemdirError as exc:
        raise MemdirError(f"{source}: {exc}") from exc
    return Transcript(
        source=str(source), session_id=session_id_for(stem), format=fmt, messages=tuple(msgs)
    )


def _system_text(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(
            str(part.get("text", "")) for part in system if isinstance(part, dict)
        ).strip()
    return str(system)


def _looks_like_memdir(items: list[dict[str, Any]]) -> bool:
    first = items[0]
    content = first.get("content")
    return "created_at" in first and "id" in first and isinstance(content, list)


def _looks_like_anthropic(items: list[dict[str, Any]]) -> bool:
    for item in items:
        content = item.get("content")
        if item.get("role") in {"tool", "system"} or "tool_calls" in item:
            return False
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in {"tool_use", "tool_result", "thinking"}
            for part in content
        ):
            return True
    return False


def _json_lines(raw: str) -> Iterator[tuple[int, Any]]:
    # Only "\n" ends a line: str.splitlines() would also split at U+2028, U+2029 and U+0085,
    # which json.dumps(ensure_ascii=False) writes raw inside strings.
    for number, line in enumerate(raw.split("\n"), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            yield number, json.loads(line)
        except (ValueError, RecursionError):
            yield number, None


def _from_lines(raw: str, source: Path, stem: str) -> Transcript:
    records = list(_json_lines(raw))
    if any(isinstance(obj, dict) and "message" in obj and "type" in obj for _, obj in records):
        return _from_claude_code(records, source, stem)
    msgs: list[Msg] = []
    skipped = 0
    seen: set[str] = set()
    for _, obj in records:
        payload = obj.get("msg") if isinstance(obj, dict) and "msg" in obj else obj
        if not isinstance(payload, dict):
            skipped += 1
            continue
        try:
            msg = Msg.from_dict(payload)
        except (MemdirError, KeyError, TypeError, ValueError):
            skipped += 1
            continue
        if msg.id in seen:
            continue
        seen.add(msg.id)
        msgs.append(msg)
    if not msgs:
        parsed = sum(1 for _, obj in records if obj is not None)
        found = (
            "the file is not JSON or JSON Lines"
            if not parsed
            else f"none of its {parsed} JSON lines is a message"
        )
        raise MemdirError(f"{source}: no messages found: {found}; expected {_EXPECTED}")
    return Transcript(
        source=str(source),
        session_id=session_id_for(stem),
        format="memdir",
        messages=tuple(msgs),
        skipped=skipped,
    )


def _from_claude_code(records: list[tuple[int, Any]], source: Path, stem: str) -> Transcript:
    turns: list[dict[str, Any]] = []
    stamps: list[str | None] = []
    session_id: str | None = None
    skipped = 0
    for _, obj in records:
        if not isinstance(obj, dict):
            skipped += 1
            continue
        kind = obj.get("type")
        message = obj.get("message")
        if kind not in {"user", "assistant"} or not isinstance(message, dict):
            continue  # summaries, snapshots, system events: bookkeeping, not conversation
        if obj.get("isSidechain") or obj.get("isMeta"):
            continue
        if session_id is None and isinstance(obj.get("sessionId"), str):
            session_id = obj["sessionId"]
        role = message.get("role", kind)
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            skipped += 1
            continue
        # Blocks a Msg cannot hold (documents, server tools...) are counted, not fatal.
        kept = [b for b in content if _known_block(b, role)]
        skipped += len(content) - len(kept)
        if content and not kept:
            continue
        content = kept
        message_id = message.get("id")
        if (
            turns
            and role == "assistant"
            and turns[-1]["role"] == "assistant"
            and message_id is not None
            and turns[-1].get("_id") == message_id
        ):
            turns[-1]["content"].extend(content)  # one API message streamed over several lines
            continue
        turns.append({"role": role, "content": list(content), "_id": message_id})
        stamps.append(obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None)
    if not turns:
        raise MemdirError(f"{source}: no user or assistant messages found")
    msgs: list[Msg] = []
    call_names: dict[str, str] = {}
    for number, (turn, stamp) in enumerate(zip(turns, stamps, strict=True), start=1):
        turn.pop("_id", None)
        try:
            converted = from_anthropic(None, [turn])
        except MemdirError as exc:
            raise MemdirError(f"{source}: turn {number}: {exc}") from exc
        when = _parse_instant(stamp)
        for msg in converted:
            call_names.update((call.id, call.name) for call in msg.tool_uses)
            msg = _name_results(msg, call_names)
            msgs.append(msg if when is None else dataclasses.replace(msg, created_at=when))
    return Transcript(
        source=str(source),
        session_id=session_id_for(session_id or stem),
        format="claude-code",
        messages=tuple(msgs),
        skipped=skipped,
    )


_KNOWN_BLOCKS = {
    "assistant": frozenset({"text", "thinking", "redacted_thinking", "tool_use"}),
    "user": frozenset({"text", "image", "tool_result"}),
}


def _known_block(block: object, role: object) -> bool:
    known = _KNOWN_BLOCKS.get(role if isinstance(role, str) else "", frozenset())
    return isinstance(block, dict) and block.get("type") in known


def _name_results(msg: Msg, call_names: dict[str, str]) -> Msg:
    """Give tool results the name of the call they answer (turns are converted one by one)."""
    if not msg.tool_results or all(r.name for r in msg.tool_results):
        return msg
    blocks = [
        dataclasses.replace(block, name=call_names.get(block.tool_use_id))
        if isinstance(block, ToolResultBlock) and not block.name
        else block
        for block in msg.content
    ]
    return msg.with_content(blocks)


def _parse_instant(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
