"""Session-log records: one JSON object a line, how it is parsed back, and redaction.

The format is described in :mod:`memdir.sessions`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memdir.errors import MemdirError
from memdir.messages import Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

__all__ = ["RECORD_VERSION", "LogRecord", "Redactor", "parse_record", "record_id", "redact_message"]

RECORD_VERSION = 1
"""The ``v`` field of the records this version writes and reads."""

Redactor = Callable[[str], str]
"""Masks secrets in one text field (e.g. :class:`memdir.redact.Redactor`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord:
    """One message record read from a session log.

    Attributes:
        line: its line number (1-based).
        session: the session id written in the record.
        offloaded_at: when it was written, if the record says.
        msg: the message, exactly as it was offloaded (after redaction).
    """

    line: int
    session: str
    offloaded_at: datetime | None
    msg: Msg


def record_id(raw: bytes) -> str | None:
    """The message id of a record line, or ``None`` if the line is not a readable record."""
    try:
        data = json.loads(raw)
        msg_id = data["msg"]["id"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    return msg_id if isinstance(msg_id, str) else None


def parse_record(raw: bytes, number: int) -> tuple[LogRecord | None, str]:
    """A record, or ``(None, reason)``; the reason is empty for lines to skip silently."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at column {exc.colno})"
    except ValueError as exc:  # e.g. a number too long to convert
        return None, f"invalid JSON ({exc})"
    except RecursionError:
        return None, "invalid JSON (nested too deeply)"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if data.get("v") != RECORD_VERSION:
        return None, f"unsupported record version {data.get('v')!r}"
    if data.get("type") != "message":
        return None, ""  # a record kind this version does not know: not an error
    try:
        msg = Msg.from_dict(data["msg"])
    except KeyError:
        return None, "record has no 'msg'"
    except MemdirError as exc:
        return None, f"bad message: {exc}"
    offloaded_at: datetime | None = None
    with contextlib.suppress(KeyError, TypeError, ValueError):  # missing or not a time
        offloaded_at = datetime.fromisoformat(data["offloaded_at"])
    session = data.get("session")
    return LogRecord(
        line=number,
        session=session if isinstance(session, str) else "",
        offloaded_at=offloaded_at,
        msg=msg,
    ), ""


def _redact_value(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v, redact) for v in value]
    return value


def redact_message(msg: Msg, redact: Redactor) -> Msg:
    """A copy of ``msg`` with ``redact`` applied to every text field it sends to a model."""
    blocks: list[Any] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            block = replace(block, text=redact(block.text))
        elif isinstance(block, ThinkingBlock) and not block.redacted:
            block = replace(block, thinking=redact(block.thinking))
        elif isinstance(block, ToolUseBlock):
            block = replace(block, input=_redact_value(block.input, redact))
        elif isinstance(block, ToolResultBlock):
            output = block.output
            if isinstance(output, str):
                block = replace(block, output=redact(output))
            else:
                parts = [
                    replace(p, text=redact(p.text)) if isinstance(p, TextBlock) else p
                    for p in output
                ]
                block = replace(block, output=parts)
        blocks.append(block)
    return msg.with_content(blocks)
