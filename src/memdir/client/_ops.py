"""The calls of the REST API's meta and memory routes: each builds its requests and parses
their answers once, for the sync and the async client alike (see :mod:`._wire`).

A namespace call takes the namespace name first; ``NamespaceClient`` passes its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar
from urllib.parse import quote

import httpx

from memdir.client._decode import decode, json_list, json_object
from memdir.client._errors import RemoteError
from memdir.client._types import Ledger, MemoryMd, WhoAmI
from memdir.client._wire import Call, Request
from memdir.index import SearchHit
from memdir.sessions import SessionHit
from memdir.store.namespaces import validate_namespace
from memdir.tools._core import AddResult, MemoryExcerpt

__all__ = [
    "add",
    "consolidations",
    "excerpt",
    "ledger",
    "ledgers",
    "namespace_path",
    "namespaces",
    "pages",
    "read_memory_md",
    "search",
    "search_all",
    "whoami",
]

PAGE: Final = 200
"""Items asked for per page when a call walks a whole list."""
_T = TypeVar("_T")


def namespace_path(ns: str, *rest: str) -> str:
    """The path of a namespace's route: ``/v1/namespaces/<ns>/<rest...>`` (each part quoted)."""
    parts = [quote(validate_namespace(ns), safe=""), *(quote(p, safe="") for p in rest)]
    return "/v1/namespaces/" + "/".join(parts)


def body(response: httpx.Response) -> Any:
    """The answer's JSON.

    Raises:
        RemoteError: the answer is not JSON.
    """
    try:
        return response.json()
    except ValueError:
        raise RemoteError(
            f"the server's answer to {response.request.method} {response.request.url.path} "
            "is not JSON: is the URL a memdir server's?"
        ) from None


def pages(
    path: str, item: Callable[[object], _T], params: Sequence[tuple[str, str]] = ()
) -> Call[list[_T]]:
    """Every item of a paginated list, page after page."""
    found: list[_T] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        asked = [*params, ("limit", str(PAGE)), *([("cursor", cursor)] if cursor else [])]
        page = json_object(
            body((yield Request(method="GET", path=path, params=tuple(asked)))), "a page"
        )
        found += [item(one) for one in json_list(page.get("items"), "a page's items")]
        after = page.get("next_cursor")
        if after is None:
            return found
        if not isinstance(after, str) or after in seen:
            raise RemoteError("the server's pages do not end (a cursor came back twice)")
        seen.add(after)
        cursor = after


def etag_version(response: httpx.Response) -> str:
    """The version an ``ETag`` names (``"v"`` or ``W/"v"``)."""
    tag = str(response.headers.get("etag", ""))
    if not tag:
        raise RemoteError("the server's answer has no ETag (the file's version)")
    return tag.removeprefix("W/").strip('"')


# -- meta ---------------------------------------------------------------------------------


def whoami() -> Call[WhoAmI]:
    """Who the key is: its tenant, id, scope and reach."""
    response = yield Request(method="GET", path="/v1/whoami")
    return decode(WhoAmI, body(response))


def _name(item: object) -> str:
    name = json_object(item, "a namespace").get("name")
    if not isinstance(name, str):
        raise RemoteError("the server's answer (a namespace) has no name")
    return name


def namespaces() -> Call[list[str]]:
    """The names of the namespaces this key reaches that exist, sorted (every page)."""
    return (yield from pages("/v1/namespaces", _name))


# -- memory -------------------------------------------------------------------------------


def add(ns: str, text: str) -> Call[AddResult]:
    """Append each non-blank line of ``text`` as a bullet to today's ledger (the server masks
    secrets first; at most 32,000 characters), creating the namespace if it is new.

    Returns:
        Where the bullets were written (``citation`` cites them).
    """
    response = yield Request(
        method="POST", path=namespace_path(ns, "memories"), json={"text": text}
    )
    return decode(AddResult, body(response))


def search_all(
    ns: str, query: str, limit: int, sources: Sequence[str]
) -> Call[tuple[list[SearchHit], list[SessionHit]]]:
    """Memory hits and session hits for ``query``, each best first."""
    params = (("q", query), ("limit", str(limit)), *(("sources", s) for s in sources))
    response = yield Request(method="GET", path=namespace_path(ns, "search"), params=params)
    found = json_object(body(response), "search")
    hits = [decode(SearchHit, hit) for hit in json_list(found.get("hits"), "hits")]
    session_hits = json_list(found.get("session_hits"), "session_hits")
    return hits, [decode(SessionHit, hit) for hit in session_hits]


def search(ns: str, query: str, limit: int = 10) -> Call[list[SearchHit]]:
    """Search the namespace's memory (``MEMORY.md`` and the ledgers): the hits the library
    finds, best first.

    Args:
        query: a few keywords (at most 1,000 characters).
        limit: how many hits, 1 to 50.
    """
    hits, _ = yield from search_all(ns, query, limit, ("memory",))
    return hits


def excerpt(
    ns: str, path: str, start_line: int | None = None, num_lines: int | None = None
) -> Call[MemoryExcerpt]:
    """Lines of ``MEMORY.md`` or a ledger, by path or citation (``memory/2026-10-14.md#L3-L5``);
    a ledger archived since it was cited is read from ``memory/archive/``.

    Args:
        path: a memory file or a citation.
        start_line: the first line (default: the citation's, else 1).
        num_lines: how many lines, 1 to 200 (default: the citation's range, else 50).
    """
    params = [("path", path)]
    if start_line is not None:
        params.append(("start_line", str(start_line)))
    if num_lines is not None:
        params.append(("num_lines", str(num_lines)))
    response = yield Request(method="GET", path=namespace_path(ns, "excerpt"), params=tuple(params))
    return decode(MemoryExcerpt, body(response))


def ledgers(ns: str, *, archived: bool = False) -> Call[list[Ledger]]:
    """The daily ledgers (``archived``: those in ``memory/archive/``), oldest first."""
    flag = (("archived", "true"),) if archived else ()
    return (
        yield from pages(namespace_path(ns, "ledgers"), lambda item: decode(Ledger, item), flag)
    )


def ledger(ns: str, day: dt.date | str) -> Call[str]:
    """One daily ledger's Markdown (from the archive if it was archived).

    Raises:
        NotFound: no ledger of that day.
    """
    name = day.isoformat() if isinstance(day, dt.date) else day
    response = yield Request(method="GET", path=namespace_path(ns, "ledgers", name))
    return response.text


def read_memory_md(ns: str) -> Call[MemoryMd]:
    """``MEMORY.md`` and its version (give the version to ``replace_memory_md``).

    Raises:
        NotFound: there is no ``MEMORY.md`` yet.
    """
    response = yield Request(method="GET", path=namespace_path(ns, "memory-md"))
    return MemoryMd(response.text, etag_version(response))


def consolidations(ns: str, limit: int = 20) -> Call[list[dict[str, Any]]]:
    """The newest consolidation runs, oldest first, as ``memdir memory history --json``
    shows them (``limit``: 1 to 200)."""
    params = (("limit", str(limit)),)
    response = yield Request(method="GET", path=namespace_path(ns, "consolidations"), params=params)
    return [
        json_object(record, "a consolidation")
        for record in json_list(body(response), "consolidations")
    ]
