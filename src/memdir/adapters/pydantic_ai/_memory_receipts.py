"""Versions and operation receipts of :class:`MemdirMemoryStore`, kept in the workspace.

A receipt is written *pending* before the change and *done* after it, so a process that dies
in between leaves a receipt the next operation settles from the file itself: done if the file
has the receipt's version, dropped (the call may run again) if not.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic_ai_harness.memory import (
    MemoryMutation,
    MemoryOperation,
    MemoryOperationConflictError,
)

from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = ["MAX_RECEIPTS", "RECEIPTS", "Receipt", "content_version", "find", "load", "save"]

logger = logging.getLogger("memdir.adapters.pydantic_ai")

RECEIPTS = f"{MEMORY_DIR}/.pydantic-ai-memory.json"
"""Where the receipts are (a dot-file: memdir's state, never listed, indexed or opened)."""
MAX_RECEIPTS = 1_024
"""How many of the latest operations are kept (as the harness's own stores keep)."""


def content_version(text: str) -> str:
    """A file's version: the SHA-256 hex digest of its text."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(slots=True)
class Receipt:
    """One write or delete, kept so that a retried call is replayed."""

    id: str
    fingerprint: str
    kind: Literal["write", "delete"]
    rel: str
    version: str | None
    existed: bool
    done: bool

    def mutation(self) -> MemoryMutation:
        """The result the operation had, marked replayed."""
        return MemoryMutation(version=self.version, replayed=True, existed=self.existed)


def load(ws: Workspace) -> list[Receipt]:
    """The receipts, oldest first (an unreadable file is a warning and none)."""
    raw = ws.read_text(RECEIPTS)
    if not raw:
        return []
    try:
        return [Receipt(**item) for item in json.loads(raw)]
    except (ValueError, TypeError):
        logger.warning("ignoring unreadable operation receipts in %s", RECEIPTS)
        return []


def save(ws: Workspace, receipts: list[Receipt]) -> None:
    """Replace the file with the latest :data:`MAX_RECEIPTS` receipts."""
    kept = [asdict(r) for r in receipts[-MAX_RECEIPTS:]]
    ws.write_text(RECEIPTS, json.dumps(kept, separators=(",", ":")))


def settle(ws: Workspace, receipts: list[Receipt]) -> bool:
    """Mark pending receipts whose change landed done, drop the others; whether any changed."""
    changed = False
    for receipt in [r for r in receipts if not r.done]:
        found = ws.read_versioned(receipt.rel)
        text = None if found is None else found.data.decode("utf-8", errors="replace")
        if (None if text is None else content_version(text)) == receipt.version:
            receipt.done = True
        else:
            receipts.remove(receipt)
        changed = True
    return changed


def find(receipts: list[Receipt], operation: MemoryOperation) -> Receipt | None:
    """The receipt of ``operation``, if any.

    Raises:
        MemoryOperationConflictError: its id was used with other arguments.
    """
    receipt = next((r for r in reversed(receipts) if r.id == operation.id), None)
    if receipt is not None and receipt.fingerprint != operation.fingerprint:
        raise MemoryOperationConflictError(
            f"operation id {operation.id!r} was reused with different arguments"
        )
    return receipt
