"""Getting a transcript ready for replay: stable ids, masked secrets, its own session id.

* **Stable ids.** Formats without message ids (OpenAI and Anthropic lists, Claude Code files)
  get ids derived from the session id, the position and the content, the same ones
  ``memdir compact`` gives (:func:`memdir.messages.stable_ids`). Reading a file twice gives
  the same ids, so the session log and the flush cursor recognise messages they already hold;
  a transcript that grew keeps the ids of its old messages.
* **Redaction.** Every text field (text, thinking, tool inputs, tool outputs) is masked before
  the replay starts, so no secret reaches a model, the session log, an evicted-result file,
  the ledger or ``MEMORY.md``.
* **Session ids.** A transcript gets the session id of its file unless that id is already used
  by another conversation (in this run, or in the workspace: a session log or flush cursor
  holding none of its messages); it then gets ``<id>-2``, ``<id>-3``...
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from memdir.errors import MemdirError
from memdir.ingest.transcripts import Transcript
from memdir.memory import flushed_message_ids
from memdir.messages import Msg, stable_ids
from memdir.sessions import SessionLog
from memdir.sessions._record import redact_message
from memdir.store.workspace import Workspace

__all__ = ["Prepared", "allocate_session_id", "prepare"]

_MAX_SUFFIX = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A transcript ready for replay.

    Attributes:
        transcript: what was read from the file.
        messages: its messages with stable ids and secrets masked.
        timestamped: whether the messages carry the times they were written (memdir logs,
            Claude Code sessions) rather than the time the file was read.
    """

    transcript: Transcript
    messages: tuple[Msg, ...]
    timestamped: bool


def prepare(transcript: Transcript, redactor: Callable[[str], str]) -> Prepared:
    """Give ``transcript``'s messages stable ids and mask their secrets."""
    msgs = list(transcript.messages)
    if transcript.format != "memdir":
        msgs = stable_ids(msgs, transcript.session_id)
    masked = tuple(redact_message(m, redactor) for m in msgs)
    return Prepared(
        transcript=transcript,
        messages=masked,
        timestamped=transcript.format in ("memdir", "claude-code"),
    )


def allocate_session_id(
    ws: Workspace, wanted: str, msgs: Sequence[Msg], taken: Collection[str]
) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``... : the first id free for this conversation.

    An id is free when this run has not used it and the workspace has no session log or flush
    cursor under it, or has one that already holds some of ``msgs`` (the same conversation,
    ingested before, or grown since).

    Raises:
        MemdirError: ``wanted`` is not a valid session id.
    """
    ids = {m.id for m in msgs}
    stem = wanted[:120]
    for n in range(1, _MAX_SUFFIX):
        candidate = wanted if n == 1 else f"{stem}-{n}"
        if candidate not in taken and _belongs(ws, candidate, ids):
            return candidate
    raise MemdirError(f"no free session id left for {wanted!r}; pass another --session-id")


def _belongs(ws: Workspace, session_id: str, ids: set[str]) -> bool:
    logged = SessionLog(ws, session_id).ids()
    if logged and logged.isdisjoint(ids):
        return False
    flushed = flushed_message_ids(ws, session_id)
    return not (flushed and flushed.isdisjoint(ids))
