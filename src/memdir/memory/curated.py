"""Replacing ``MEMORY.md`` on behalf of a person or a client, by compare-and-swap.

The consolidator is not the only writer of ``MEMORY.md``: a person curates it, and a client of
the HTTP API replaces it with an edited copy. :func:`replace_memory_md` does that safely:

- it is based on the version that was read (:meth:`Workspace.read_versioned`); if the file
  changed since, nothing is written and :class:`~memdir.errors.VersionConflict` says so (an
  edit is never lost to another, the consolidator's included);
- the same content as the file holds is a success, whatever the version: a replace sent again
  after its answer was lost is not a conflict;
- secrets are masked, as on every write path; the text is at most :data:`MAX_MEMORY_MD_BYTES`;
- the previous file is kept in ``memory/.history/``, and the edit is recorded in the
  consolidation log (status ``"replaced"``, ``by`` who, the ``sha256`` of the text written),
  so ``memdir memory history`` shows human edits between the consolidations and the history
  page tells which version a person made;
- the search index is brought up to date for ``MEMORY.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir.errors import ConfigError, MemdirError, ToolInputError, VersionConflict
from memdir.memory._checks import check_callable, check_int
from memdir.memory._entries import diff_entries, parse_bullets
from memdir.memory._history import save_version, write_log
from memdir.memory._state import sha256
from memdir.memory._testpoint import pause_point
from memdir.provenance._records import load_memory_records, reconcile, save_records
from memdir.redact import Redactor
from memdir.store.workspace import MEMORY_MD, Workspace

if TYPE_CHECKING:
    from memdir.index import SearchIndex

__all__ = ["MAX_MEMORY_MD_BYTES", "CuratedWrite", "replace_memory_md"]

log = logging.getLogger("memdir.memory")

MAX_MEMORY_MD_BYTES = 256 * 1024
"""The largest ``MEMORY.md`` a replace writes (UTF-8 bytes). It is read into every prompt:
the consolidator's own budget is far smaller (4,000 tokens by default)."""

_WHO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}")
_REDACTOR = Redactor()


@dataclass(frozen=True, slots=True, kw_only=True)
class CuratedWrite:
    """What :func:`replace_memory_md` did.

    Attributes:
        version: the version of ``MEMORY.md`` holding this text (for the next replace), or
            ``None`` when another writer changed the file again right after this write (read
            it for its version).
        changed: whether the file was written (``False``: it already held this text).
        history_path: where the previous file was saved, or ``None``.
        masked: secrets masked in the text.
        index_error: why re-indexing failed, or ``None`` (the file is written either way;
            the next search's refresh indexes it).
    """

    version: str | None
    changed: bool
    history_path: str | None = None
    masked: int = 0
    index_error: str | None = None


def replace_memory_md(
    ws: Workspace,
    text: str,
    *,
    version: str | None,
    by: str = "person",
    redactor: Redactor | None = None,
    history_versions: int = 20,
    index: SearchIndex | None = None,
) -> CuratedWrite:
    """Replace ``MEMORY.md`` with ``text`` if it still has ``version``.

    Args:
        ws: the workspace.
        text: the new file (may be empty).
        version: the version the edit is based on (from :meth:`Workspace.read_versioned`);
            ``None``: the file must not exist yet.
        by: who replaces it, as recorded in the log (``"person"``, ``"api"``, a key id).
        redactor: masks secrets (default: the built-in patterns).
        history_versions: previous versions kept in ``memory/.history/``.
        index: the index to update (default: the workspace's shared one).

    Raises:
        VersionConflict: the file changed since ``version`` (or exists, for ``None``) and
            holds other text; nothing was written.
        ToolInputError: ``text`` is not text, holds a NUL byte or a lone surrogate, or is
            over :data:`MAX_MEMORY_MD_BYTES`.
        ConfigError: a bad ``by``, ``redactor``, ``history_versions`` or ``index``.
    """
    owner = "replace_memory_md"
    data, masked = _checked(text, redactor or _REDACTOR)
    if not isinstance(by, str) or not _WHO.fullmatch(by):
        raise ConfigError(f"{owner}: by must be a short name such as 'person' or 'api'")
    if version is not None and not isinstance(version, str):
        raise ConfigError(f"{owner}: version must be a string or None")
    check_int(owner, "history_versions", history_versions, minimum=1)
    check_callable(owner, "index", index, method="index_file")
    ws = Workspace.coerce(ws)
    found = ws.read_versioned(MEMORY_MD)
    current = found.version if found is not None else None
    if found is not None and found.data == data:
        return CuratedWrite(version=current, changed=False, masked=masked)
    if current != version:
        raise _conflict(current)
    before = found.data.decode("utf-8", errors="replace") if found is not None else ""
    history = save_version(ws, before, keep=history_versions) if before.strip() else None
    pause_point("curated:before-replace")
    if not ws.replace_if(MEMORY_MD, data, version):
        if history is not None:
            ws.delete(history)  # this copy is not a version anyone replaced
        after = ws.read_versioned(MEMORY_MD)
        raise _conflict(after.version if after is not None else None)
    after = ws.read_versioned(MEMORY_MD)
    new_version = after.version if after is not None and after.data == data else None
    after_text = data.decode("utf-8")
    _record(ws, by, before, after_text, history, sha256(data))
    _provenance(ws, after_text, by)
    return CuratedWrite(
        version=new_version,
        changed=True,
        history_path=history,
        masked=masked,
        index_error=_reindex(ws, index),
    )


def _checked(text: object, redactor: Redactor) -> tuple[bytes, int]:
    """The masked text as UTF-8, and how many secrets were masked."""
    if not isinstance(text, str):
        raise ToolInputError(f"MEMORY.md must be text, not {type(text).__name__}")
    if "\x00" in text:
        raise ToolInputError("MEMORY.md text contains a NUL byte; remove it and try again")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolInputError("MEMORY.md text is not valid Unicode (is the input UTF-8?)") from None
    if size > MAX_MEMORY_MD_BYTES:
        raise ToolInputError(
            f"MEMORY.md text is {size:,} bytes; the limit is {MAX_MEMORY_MD_BYTES:,}: keep the "
            "curated memory short (details belong in the ledgers)"
        )
    masked = sum(redactor.findings(text).values())
    if masked:
        text = redactor.redact(text)
    return text.encode("utf-8"), masked


def _conflict(current: str | None) -> VersionConflict:
    state = "it now has another version" if current is not None else "it no longer exists"
    return VersionConflict(
        f"MEMORY.md changed since it was read ({state}); read it again and reapply the edit",
        current=current,
    )


def _record(
    ws: Workspace, by: str, before: str, after: str, history: str | None, digest: str
) -> None:
    diff = diff_entries(
        [b.text for b in parse_bullets(before)], [b.text for b in parse_bullets(after)]
    )
    record: dict[str, Any] = {
        "at": ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z"),
        "status": "replaced",
        "by": by,
        "reason": None,
        "before_chars": len(before),
        "after_chars": len(after),
        "added": list(diff.added),
        "changed": [list(pair) for pair in diff.changed],
        "removed": list(diff.removed),
        "counts": {
            "added": len(diff.added),
            "changed": len(diff.changed),
            "removed": len(diff.removed),
            "unchanged": diff.unchanged,
        },
        "history": history,
        "sha256": digest,  # of what was written: tells this version's maker in the history
    }
    try:
        write_log(ws, record)
    except MemdirError as exc:  # the edit is made; the log is a record of it
        log.warning("MEMORY.md replaced, but the history log could not be appended (%s)", exc)


def _provenance(ws: Workspace, text: str, by: str) -> None:
    """Record the new file's bullets: kept and reworded ones keep their sources; new ones
    are a person's (``by="person"``), else unsourced."""
    at = ws.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        old = load_memory_records(ws)
        records = [
            dataclasses.replace(r, kind="person")
            if by == "person" and r.kind == "unsourced" and r.id not in old
            else r
            for r in reconcile(text, old, at)
        ]
        save_records(ws, records, keep=())
    except MemdirError as exc:  # the edit is made; its bullets read as unsourced
        log.warning("MEMORY.md replaced, but its provenance was not recorded (%s)", exc)


def _reindex(ws: Workspace, index: SearchIndex | None) -> str | None:
    try:
        if index is None:
            from memdir.tools._core import shared_index

            index = shared_index(ws)
        index.index_file(MEMORY_MD)
    except Exception as exc:  # the file is the truth; the next search's refresh catches up
        log.warning("re-indexing MEMORY.md after a replace failed (%s)", type(exc).__name__)
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None
