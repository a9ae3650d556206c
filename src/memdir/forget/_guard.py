"""What a running process still holds of an erased fact, blanked before it is written back.

A forget rewrites every file, but a process that read a conversation before it (an agent in
the middle of a turn, an adapter holding its thread, a flush that has its chunk) still holds
the erased messages: its next save, offload, flush or compaction would write them back. Every
such write passes its messages through :func:`guard_messages`, which blanks (``[erased]``)
each message an erasure named by id or that holds an erased line, as the forget blanked it in
the files; a compaction summary loses only its erased lines.

The erasures are read from ``memory/.forget/erased.jsonl`` (the keyed hashes, and the ids of
the messages a ledger bullet was extracted from) and kept per workspace until that file
changes, so a write where nothing was ever erased costs one ``stat``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Final

from memdir.forget._keys import Keyer, erasure_mark, erasure_records, listed
from memdir.forget._scrub import ERASED_TEXT, Erasure, message_scrubbed, scrub_file
from memdir.messages import Msg
from memdir.store.workspace import Workspace

__all__ = ["current_erasure", "guard_bytes", "guard_messages", "without_erased"]

_KEPT: Final = 64
_cache: dict[tuple[str, str], Erasure] = {}
_lock = threading.Lock()


def current_erasure(ws: Workspace) -> Erasure | None:
    """Every erasure of ``ws`` as one :class:`Erasure` (``None`` when nothing was erased)."""
    mark = erasure_mark(ws)
    if not mark:
        return None
    key = (repr(ws), mark)
    with _lock:
        found = _cache.get(key)
    if found is not None:
        return found
    records = list(erasure_records(ws))
    keys = {k for record in records for k in listed(record, "keys")}
    message_ids = {m for record in records for m in listed(record, "messages")}
    erasure = Erasure(
        keys=frozenset(keys),
        bullet_ids=frozenset(),
        message_ids=frozenset(message_ids),
        key_of=Keyer(ws).key,
        marker="",
    )
    with _lock:
        if len(_cache) >= _KEPT:
            _cache.clear()
        _cache[key] = erasure
    return erasure


def guard_messages(ws: Workspace, msgs: Sequence[Msg]) -> list[Msg]:
    """``msgs`` with every erased message blanked: ``msgs`` itself when it is a list and
    nothing in it is erased."""
    erasure = current_erasure(ws)
    if erasure is None:
        return msgs if isinstance(msgs, list) else list(msgs)
    out: list[Msg] | None = None
    for i, msg in enumerate(msgs):
        scrubbed = message_scrubbed(msg.to_dict(), erasure)
        if scrubbed is not None:
            if out is None:
                out = list(msgs)
            out[i] = Msg.from_dict(scrubbed)
    if out is not None:
        return out
    return msgs if isinstance(msgs, list) else list(msgs)


def guard_bytes(ws: Workspace, rel: str, data: bytes) -> bytes:
    """``data``, about to be written to (or appended to) file ``rel``, as the erasures of
    ``ws`` leave it: what a ``memdir serve`` server writes for a remote client, whose process
    may hold what was erased (:func:`~memdir.forget._scrub.scrub_file`: an erased message
    blanked, an erased line dropped; an evicted tool result that holds one becomes
    ``[erased]``)."""
    erasure = current_erasure(ws)
    if erasure is None:
        return data
    scrubbed = scrub_file(rel, data, erasure)
    return ERASED_TEXT.encode() if scrubbed is None else scrubbed


def without_erased(ws: Workspace, lines: Iterable[str]) -> list[str]:
    """``lines`` without those an erasure named (checked before a ledger append and before
    a consolidation writes ``MEMORY.md``)."""
    kept = list(lines)
    erasure = current_erasure(ws)
    if erasure is None:
        return kept
    return [line for line in kept if erasure.key_of(line) not in erasure.keys]
