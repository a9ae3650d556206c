"""Stable message ids for conversations in formats that carry none."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence

from memdir.messages._msg import MessageFormatError, Msg, as_list

__all__ = ["stable_ids"]


def stable_ids(msgs: Sequence[Msg], session_id: str) -> list[Msg]:
    """The messages with ids derived from the session, their position and their content.

    Messages read from OpenAI or Anthropic JSON get a random id each time they are parsed, so
    the same conversation sent twice would look new twice. With these ids it does not: the
    session log skips the messages it holds and the flush cursor those it extracted, so a
    conversation (or one that goes on from it) can be logged, flushed or compacted again,
    after a crash or a lost answer, without writing anything twice.

    Args:
        msgs: the conversation, in order.
        session_id: the session it belongs to (the same position and content in another
            session is another message).

    Returns:
        Copies of the messages with ids ``<session>:<position>:<24 hex digits>``.

    Raises:
        MessageFormatError: ``msgs`` is not a list of messages, or ``session_id`` is not a
            non-blank string.
    """
    items: list[Msg] = as_list(msgs, "stable_ids", of_msgs=True)
    if not isinstance(session_id, str) or not session_id.strip():
        raise MessageFormatError("stable_ids needs the session id (a non-blank string)")
    out = []
    for i, msg in enumerate(items):
        body = json.dumps([msg.role, msg.name, msg.to_dict()["content"]], ensure_ascii=False)
        digest = hashlib.sha256(f"{session_id}\x1f{i}\x1f{body}".encode()).hexdigest()[:24]
        out.append(dataclasses.replace(msg, id=f"{session_id}:{i}:{digest}"))
    return out
