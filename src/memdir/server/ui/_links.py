"""The UI's addresses: where a citation opens, and a namespace's pages."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from memdir.store.workspace import SESSIONS_DIR
from memdir.tools._core import parse_citation

__all__ = ["cite_url", "ns_url"]


def ns_url(ns: str, page: str = "", **query: object) -> str:
    """The address of ``page`` of namespace ``ns`` (``""``: its MEMORY.md), with ``query``."""
    url = f"/ui/ns/{quote(ns, safe='')}/{page}"
    given = {k: v for k, v in query.items() if v is not None}
    return f"{url}?{urlencode(given)}" if given else url


def cite_url(ns: str, citation: str) -> str:
    """Where ``citation`` opens: a memory file at its line (``MEMORY.md#L12``,
    ``memory/2026-11-30.md#L3``) or a session's transcript at its line
    (``sessions/s1.log.jsonl#L40``); ``""`` for a citation of nothing (a source now gone)."""
    if not citation:
        return ""
    cited = parse_citation(citation)
    anchor = f"#L{cited.start}" if cited.start is not None else ""
    path = cited.path
    prefix = SESSIONS_DIR + "/"
    if path.startswith(prefix) and path.endswith(".log.jsonl"):
        session = path[len(prefix) : -len(".log.jsonl")]
        # The line in the query too: a long transcript pages to it and marks it.
        return ns_url(ns, f"sessions/{quote(session, safe='')}", line=cited.start) + anchor
    line = cited.start
    return ns_url(ns, "file", path=path, line=line) + anchor
