"""Previous versions of ``MEMORY.md`` and the consolidation log, in ``memory/.history/``.

Before every rewrite the current file is saved as ``MEMORY.<UTC instant>.md`` (the newest
``keep`` versions are kept). Every run, applied or refused, appends one JSON line to
``consolidation.log.jsonl``: when, which model, the status, and the added / changed / removed
bullets; a run (or a replace) that wrote the file also records the SHA-256 of what it wrote
(``sha256``), which tells who made each kept version (:mod:`._versions`). ``memdir memory
history`` prints it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from memdir.memory._checks import check_int
from memdir.memory._entries import EntryDiff
from memdir.store.workspace import HISTORY_DIR, MEMORY_MD, Workspace

__all__ = ["LOG_REL", "log_run", "read_log", "save_version", "write_log"]

log = logging.getLogger("memdir.memory")

LOG_REL = f"{HISTORY_DIR}/consolidation.log.jsonl"


def save_version(ws: Workspace, text: str, *, keep: int) -> str:
    """Save ``text`` as a new history version; prune old ones. Returns its relative path."""
    stamp = ws.utc_now().strftime("%Y%m%dT%H%M%S.%fZ")
    rel = f"{HISTORY_DIR}/MEMORY.{stamp}.md"
    n = 1
    while not ws.create_text(rel, text):  # never over an existing version (two hosts)
        n += 1
        rel = f"{HISTORY_DIR}/MEMORY.{stamp}-{n}.md"
    versions = sorted(
        (
            e
            for e in ws.listdir(HISTORY_DIR)
            if e.kind == "file"
            and e.stat is not None
            and e.name.startswith("MEMORY.")
            and e.name.endswith(".md")
        ),
        key=lambda e: (e.stat.mtime_ns if e.stat is not None else 0, e.name),
    )
    for old in versions[: max(0, len(versions) - keep)]:
        ws.delete(f"{HISTORY_DIR}/{old.name}")
    return rel


def write_log(ws: Workspace, record: dict[str, Any]) -> None:
    """Append one record to the consolidation log (one locked write)."""
    ws.append_text(LOG_REL, json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def log_run(
    ws: Workspace,
    *,
    model: str,
    status: str,
    reason: str | None,
    entries: int,
    files: Sequence[str],
    budget_chars: int,
    before_chars: int,
    removed: Sequence[str] = (),
    diff: EntryDiff | None = None,
    trimmed: Sequence[str] = (),
    history: str | None = None,
    provenance: dict[str, int] | None = None,
    written_sha256: str | None = None,
) -> None:
    """Record one consolidation run (``diff`` when applied, ``removed`` when refused for them).

    ``provenance`` counts, for an applied run, the source ids the model invented (dropped),
    the bullets left unsourced and those quoted as untrusted instructions. ``written_sha256``
    is the digest of the ``MEMORY.md`` the run wrote (``None``: it wrote nothing).

    A failure to write is logged, not raised: the run itself is already done or refused.
    """
    record: dict[str, Any] = {
        "at": ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z"),
        "model": model,
        "status": status,
        "reason": reason,
        "entries": entries,
        "files": list(files),
        "budget_chars": budget_chars,
        "before_chars": before_chars,
    }
    if diff is not None:
        record.update(
            added=list(diff.added),
            changed=[list(pair) for pair in diff.changed],
            removed=list(diff.removed),
            trimmed=list(trimmed),
            counts={
                "added": len(diff.added),
                "changed": len(diff.changed),
                "removed": len(diff.removed),
                "unchanged": diff.unchanged,
                "trimmed": len(trimmed),
            },
            after_chars=len(ws.read_text(MEMORY_MD)),
            history=history,
        )
        if provenance is not None:
            record["provenance"] = provenance
        if written_sha256 is not None:
            record["sha256"] = written_sha256
    elif removed:
        record.update(would_remove=list(removed), counts={"would_remove": len(removed)})
    try:
        write_log(ws, record)
    except Exception as exc:
        log.warning("consolidation: could not append to the history log (%s)", type(exc).__name__)


def read_log(ws: Workspace | str, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Records of the consolidation log, oldest first; damaged lines are skipped.

    Args:
        ws: the workspace (or its path).
        limit: only the newest ``limit`` records (``None``: all).

    Raises:
        ConfigError: ``limit`` is not a positive integer or ``None``.
    """
    if limit is not None:
        check_int("read_consolidation_log", "limit", limit, minimum=1)
    text = Workspace.coerce(ws).read_text(LOG_REL)
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            log.warning("%s line %d is damaged; skipped", LOG_REL, number)
            continue
        if isinstance(record, dict):
            records.append(record)
    return records[-limit:] if limit else records
