"""The calls of the job, ``MEMORY.md`` and transfer routes: flush, compact, consolidate,
maintenance, replacing ``MEMORY.md`` by compare-and-swap, export and import.

The long ones (flush, compact, consolidate, maintenance runs, export, import) run on the
server, with its model, and wait up to the client's ``job_timeout``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memdir.client._decode import decode, json_object
from memdir.client._ops import body, etag_version, namespace_path
from memdir.client._ops_sessions import MessageFormat, messages_body
from memdir.client._types import Compacted, MaintenanceStatus
from memdir.client._wire import Call, Request
from memdir.compaction.compactor import CompactionPlan
from memdir.errors import ConfigError
from memdir.memory.consolidate import ConsolidationResult
from memdir.memory.curated import CuratedWrite
from memdir.memory.flush import FlushResult
from memdir.memory.maintenance import MaintenanceReport
from memdir.messages import Msg
from memdir.sessions import validate_session_id
from memdir.store.transfer import TransferReport

__all__ = [
    "compact",
    "consolidate",
    "export",
    "flush",
    "import_",
    "maintenance",
    "replace_memory_md",
    "run_maintenance",
]


def flush(
    ns: str,
    session_id: str,
    messages: Sequence[Msg | Mapping[str, Any]],
    *,
    format: MessageFormat = "memdir",
    system: str | None = None,
) -> Call[FlushResult]:
    """Extract the durable facts of ``messages`` into today's ledger, with the server's model
    (exactly once per message: the session's flush cursor skips those flushed before).

    Args:
        session_id: the conversation the messages belong to.
        messages: ``Msg`` objects or dicts in ``format``.
        format: ``memdir``, ``openai`` or ``anthropic``.
        system: Anthropic's system prompt (``anthropic`` only).
    """
    payload = {
        "session_id": validate_session_id(session_id),
        **messages_body(messages, format, system),
    }
    response = yield Request(
        method="POST", path=namespace_path(ns, "flush"), json=payload, job=True
    )
    return decode(FlushResult, body(response))


def compact(
    ns: str,
    session_id: str,
    messages: Sequence[Msg | Mapping[str, Any]],
    *,
    format: MessageFormat = "memdir",
    system: str | None = None,
    trigger_messages: int | None = None,
    trigger_tokens: int | None = None,
    keep_messages: int | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> Call[Compacted | CompactionPlan]:
    """Compact a conversation on the server: the messages taken out go to the session's log
    (and their facts to memory), the summary and the kept tail come back.

    Args:
        session_id: the conversation.
        messages: the whole conversation, ``Msg`` objects or dicts in ``format``.
        format: ``memdir``, ``openai`` or ``anthropic``.
        system: Anthropic's system prompt (``anthropic`` only).
        trigger_messages: compact above this many messages (default: the server's).
        trigger_tokens: compact above this many tokens (default: the server's).
        keep_messages: messages kept verbatim at the end (default: the server's).
        force: compact even under the triggers.
        dry_run: only say what would happen (a ``CompactionPlan``); nothing is written.

    Returns:
        The compacted conversation, or with ``dry_run`` the plan.
    """
    payload: dict[str, Any] = {
        "session_id": validate_session_id(session_id),
        **messages_body(messages, format, system),
        "force": force,
        "dry_run": dry_run,
    }
    for name, value in (
        ("trigger_messages", trigger_messages),
        ("trigger_tokens", trigger_tokens),
        ("keep_messages", keep_messages),
    ):
        if value is not None:
            payload[name] = value
    response = yield Request(
        method="POST", path=namespace_path(ns, "compact"), json=payload, job=True
    )
    found = body(response)
    if dry_run:
        return decode(CompactionPlan, found)
    result = decode(Compacted, found)
    if format != "memdir":
        return result
    return dataclasses.replace(result, messages=[decode(Msg, m) for m in result.messages])


def consolidate(ns: str, *, dry_run: bool = False) -> Call[ConsolidationResult]:
    """Fold the new ledger entries into ``MEMORY.md`` now, with the server's model
    (``dry_run``: compute the new text without writing it; ``text`` holds it)."""
    path = namespace_path(ns, "consolidate")
    response = yield Request(method="POST", path=path, json={"dry_run": dry_run}, job=True)
    return decode(ConsolidationResult, body(response))


def maintenance(ns: str) -> Call[MaintenanceStatus]:
    """When the namespace was last maintained and consolidated, and who is at it now."""
    response = yield Request(method="GET", path=namespace_path(ns, "maintenance"))
    return decode(MaintenanceStatus, body(response))


def run_maintenance(ns: str, *, dry_run: bool = False) -> Call[MaintenanceReport]:
    """Run one maintenance pass now (archive old ledgers, consolidate, prune logs, reindex);
    needs an ``admin`` key."""
    path = namespace_path(ns, "maintenance", "run")
    response = yield Request(method="POST", path=path, json={"dry_run": dry_run}, job=True)
    return decode(MaintenanceReport, body(response))


def replace_memory_md(ns: str, text: str, version: str | None) -> Call[CuratedWrite]:
    """Replace ``MEMORY.md`` if it is still at ``version`` (compare-and-swap; the server masks
    secrets and keeps the previous text in the history).

    Args:
        text: the new Markdown.
        version: the version ``read_memory_md`` returned; ``None``: create the file, which
            must not exist yet.

    Raises:
        VersionConflict: the file changed since ``version`` (or exists, with ``None``);
            nothing was written.
    """
    if not isinstance(text, str):
        raise ConfigError(f"MEMORY.md's text must be a str, not {type(text).__name__}")
    condition = {"If-Match": f'"{version}"'} if version is not None else {"If-None-Match": "*"}
    response = yield Request(
        method="PUT",
        path=namespace_path(ns, "memory-md"),
        content=text.encode("utf-8"),
        headers={"Content-Type": "text/markdown; charset=utf-8", **condition},
    )
    found = json_object(body(response), "a MEMORY.md write")
    if found.get("version") is None and response.headers.get("etag"):
        found["version"] = etag_version(response)
    return decode(CuratedWrite, found)


def export(ns: str, path: str | os.PathLike[str]) -> Call[int]:
    """Save the namespace as a ``.tar.gz`` archive at ``path`` (replaced atomically when
    complete; needs an ``admin`` key). The archive is what ``import_`` and
    ``memdir import`` take.

    Returns:
        The archive's size in bytes.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError(f"cannot save the export to {target}: {target.parent} is not a directory")
    yield Request(method="GET", path=namespace_path(ns, "export"), download=target, job=True)
    return target.stat().st_size


def import_(
    ns: str, path: str | os.PathLike[str], *, replace: bool = False
) -> Call[TransferReport]:
    """Load a ``.tar.gz`` archive (made by ``export`` or ``memdir export``) into the namespace;
    needs an ``admin`` key.

    Args:
        path: the archive.
        replace: overwrite files that differ (default: leave them, listed as conflicts).
    """
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"cannot import {source}: no such file")
    params = (("replace", "true"),) if replace else ()
    response = yield Request(
        method="POST",
        path=namespace_path(ns, "import"),
        params=params,
        headers={"Content-Type": "application/gzip"},
        upload=source,
        job=True,
    )
    return decode(TransferReport, body(response))
