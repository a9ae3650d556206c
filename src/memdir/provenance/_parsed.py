"""Memory files parsed once per version, for the provenance of search hits.

A search hit's sources need the bullets of the file it cites (and of ``MEMORY.md``, the
records of its sidecar). Parsing a 2,000-line ledger for every search cost far more than the
search itself, so the parsed form is kept, per process, keyed by the workspace, the file and
the change tags of the file and its sidecar (:meth:`Workspace.stat`): any write to either
makes a new key, so a stale parse is never used.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, TypeVar

from memdir.store.workspace import ARCHIVE_DIR, MEMORY_AREA, MEMORY_DIR, Workspace

__all__ = ["cached_parse", "change_tag"]

_SIZE: Final = 32
"""Parsed files kept (a 2,000-line ledger's bullets weigh about a megabyte)."""
_T = TypeVar("_T")
_cache: OrderedDict[tuple[str, ...], object] = OrderedDict()
_lock = threading.Lock()


def change_tag(ws: Workspace, rel: str) -> str | None:
    """The change tag of memory file ``rel`` (a ledger moved to the archive: the archived
    one's); ``None`` when neither exists."""
    st = ws.stat(rel, area=MEMORY_AREA)
    if st is None and rel.startswith(MEMORY_DIR + "/") and rel.count("/") == 1:
        st = ws.stat(f"{ARCHIVE_DIR}/{rel.split('/', 1)[1]}", area=MEMORY_AREA)
    return st.tag if st is not None else None


def cached_parse(
    ws: Workspace, rels: tuple[str, ...], parse: Callable[[], _T], *, missing: _T | None = None
) -> _T:
    """``parse()``, or what it returned before for the same versions of the files ``rels``
    of ``ws`` (the first one must exist; the others, sidecars, may not). ``missing``: what
    a missing first file parses to, when known (it is not read); else ``parse()`` says."""
    tags = [change_tag(ws, rel) for rel in rels]
    if tags[0] is None:
        return parse() if missing is None else missing
    key = (repr(ws), *rels, *(tag or "-" for tag in tags))
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found  # type: ignore[return-value]
    value = parse()
    with _lock:
        _cache[key] = value
        while len(_cache) > _SIZE:
            _cache.popitem(last=False)
    return value
