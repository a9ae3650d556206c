"""Keyed hashes of erased facts, the per-workspace secret they are keyed with, the denylist.

An erased fact is remembered only as an HMAC-SHA256 of its comparable form (NFKC, no list or
diff marker, case-folded, whitespace collapsed), keyed with a random secret kept in the store
file ``memory/.forget/secret``: a reader of the erasure records cannot confirm a guess at the
text without that secret. ``memory/.forget/erased.jsonl`` holds one record per erasure (time,
who asked, the keys, never the text); its keys are the denylist that a flush and a
consolidation check before they write.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import unicodedata
from collections.abc import Iterator
from typing import Any

from memdir.store.ledger import normalize_bullet
from memdir.store.workspace import MEMORY_DIR, Workspace

__all__ = [
    "ERASED_REL",
    "FORGET_DIR",
    "SECRET_REL",
    "Keyer",
    "erased_keys",
    "erasure_mark",
    "erasure_records",
    "fold",
    "listed",
]

FORGET_DIR = f"{MEMORY_DIR}/.forget"
SECRET_REL = f"{FORGET_DIR}/secret"
ERASED_REL = f"{FORGET_DIR}/erased.jsonl"
_DIFF_MARK = re.compile(r"^[\s+\-]*(?=\S)")


def fold(text: str) -> str:
    """``text`` as compared by a forget: NFKC (full-width forms become ASCII), case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def _comparable(line: str) -> str:
    line = unicodedata.normalize("NFKC", line)
    return normalize_bullet(_DIFF_MARK.sub("- ", line, count=1))


class Keyer:
    """The keyed hash of a workspace (its secret read, or made on first use)."""

    def __init__(self, ws: Workspace) -> None:
        raw = ws.read_text(SECRET_REL).strip()
        if not raw:
            ws.create_text(SECRET_REL, secrets.token_hex(32) + "\n")
            raw = ws.read_text(SECRET_REL).strip()  # another writer's, if it was first
        self._secret = raw.encode("ascii", errors="replace")

    def key(self, line: str) -> str:
        """The keyed hash of one line (``""`` for a line with nothing to compare)."""
        form = _comparable(line)
        if not form:
            return ""
        return hmac.new(self._secret, form.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def erasure_mark(ws: Workspace) -> str:
    """Changes whenever a fact is erased (a consolidation compares it before and after);
    ``""`` when nothing was, and for a workspace on a ``memdir serve`` server, which applies
    its erasures to every write it takes (its ``memory/.forget/`` is not served)."""
    if ws.remote is not None:
        return ""
    st = ws.stat(ERASED_REL)
    return "" if st is None else f"{st.size}:{st.tag}"


def erasure_records(ws: Workspace) -> Iterator[dict[str, Any]]:
    """The records of ``memory/.forget/erased.jsonl`` (one per erasure), oldest first (none
    for a workspace on a server: see :func:`erasure_mark`)."""
    if not erasure_mark(ws):
        return
    for line in ws.read_text(ERASED_REL).splitlines():
        try:
            record: Any = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def listed(record: dict[str, Any], field: str) -> list[str]:
    """The strings of the list ``field`` of an erasure record (none when malformed)."""
    value = record.get(field)
    return [k for k in value if isinstance(k, str)] if isinstance(value, list) else []


def erased_keys(ws: Workspace) -> frozenset[str]:
    """Every keyed hash ever erased in this workspace (the denylist)."""
    return frozenset(k for record in erasure_records(ws) for k in listed(record, "keys"))
