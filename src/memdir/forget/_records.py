"""The ``memdir serve`` idempotency records an erasure reaches.

For a day (``--idempotency-ttl``) the server keeps, per ``Idempotency-Key``, what a write was
about to write (an add's bullets) and its answer (a flush's bullets), so that a retry gets the
same answer. A forget erases every record of its namespace that holds an erased line (read
decoded: JSON escapes, case and width fold as everywhere else); a namespace delete erases every
record of the namespace. A record kept before records named their namespace is read whatever
its namespace: a forget erases it when it holds an erased line, a namespace delete when it
holds a line of the namespace.

An erased record keeps no content; until it would have expired, a retry with its key is
answered ``410 idempotency-result-erased`` instead of writing the erased fact again
(:mod:`memdir.server._idem_base`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from memdir.forget._keys import Keyer
from memdir.forget._plan import namespace_lines
from memdir.forget._scrub import Erasure, holds, strings
from memdir.store.workspace import SERVER_DIR, Workspace

if TYPE_CHECKING:
    from memdir.server._idem_base import IdempotencyStore, StoredRecord

__all__ = [
    "RECORDS_PLACE",
    "erase_namespace_records",
    "erase_records",
    "record_lines",
    "records_holding",
]

RECORDS_PLACE: Final = "server idempotency records"
"""The place of a forget's preview that counts the records it erases (never their content)."""


def _store(ws: Workspace) -> IdempotencyStore | None:
    """The records of ``ws``'s workspace; ``None`` where no server ever kept one."""
    if ws.remote is not None:
        return None
    if ws.is_local and not (ws.base / SERVER_DIR / "idempotency").is_dir():
        return None  # never served: nothing to read, and no directory to make
    from memdir.server._idem_base import open_idempotency_store

    return open_idempotency_store(ws)


def record_lines(ws: Workspace) -> Iterator[str]:
    """Every line of text the records of ``ws``'s namespace (and those of no namespace
    known) hold: where a forget of a text looks, as it looks in the files."""
    store = _store(ws)
    if store is None:
        return
    for found in store.records(ws.namespace):
        for text in strings(found.content):
            yield from text.split("\n")


def records_holding(ws: Workspace, erasure: Erasure) -> list[StoredRecord]:
    """The records of ``ws``'s namespace (and those of no namespace known) holding a line
    ``erasure`` erases."""
    store = _store(ws)
    if store is None:
        return []
    return [found for found in store.records(ws.namespace) if holds(found.content, erasure)]


def erase_records(ws: Workspace, erasure: Erasure) -> int:
    """Erase the records :func:`records_holding` finds; how many."""
    store = _store(ws)
    if store is None:
        return 0
    return store.erase(records_holding(ws, erasure))


def erase_namespace_records(root: Workspace, name: str) -> int:
    """Erase every record of the namespace ``name`` and every record of no namespace known
    that holds a line of its files (read before they go); how many."""
    store = _store(root)
    if store is None:
        return 0
    found = list(store.records(name))
    doomed = [r for r in found if r.namespace == name]
    unknown = [r for r in found if r.namespace is None]
    if unknown:
        keyer = Keyer(root)
        doomed_ws = root.namespaced(name, create=False)
        keys = frozenset(keyer.key(line) for line in namespace_lines(doomed_ws)) - {""}
        erasure = Erasure(
            keys=keys,
            bullet_ids=frozenset(),
            message_ids=frozenset(),
            key_of=keyer.key,
            marker="",
        )
        doomed += [r for r in unknown if holds(r.content, erasure)]
    return store.erase(doomed)
