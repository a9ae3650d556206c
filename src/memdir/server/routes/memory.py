"""The memory of a namespace: add, search, excerpts by citation, ledgers, ``MEMORY.md`` and the
consolidation log. Each route is the library call the tools and the CLI make."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Final, Literal

import anyio.to_thread
from fastapi import Header, Query, Request, Response

from memdir.errors import VersionConflict, WorkspaceError
from memdir.memory import read_consolidation_log, replace_memory_md
from memdir.memory.curated import MAX_MEMORY_MD_BYTES
from memdir.server.auth import Scope
from memdir.server.conditional import Precondition, etag, precondition
from memdir.server.pagination import Cursor, Limit, page_of
from memdir.server.policy import AppendOnce, Bound, BoundNamespace, MemdirRouter, Policy
from memdir.server.pool import EMPTY_MEMORY_MD
from memdir.server.problems import (
    InvalidInput,
    NotFound,
    PreconditionFailed,
    Problem,
    ProblemError,
)
from memdir.server.schemas.memory import (
    Added,
    AddIn,
    ConsolidationRecord,
    CuratedOut,
    Excerpt,
    Hit,
    Ledger,
    SearchResult,
)
from memdir.server.schemas.meta import Page
from memdir.server.schemas.sessions import SessionHitOut
from memdir.store._base import Versioned
from memdir.store.workspace import ARCHIVE_DIR, MEMORY_AREA, MEMORY_DIR, MEMORY_MD, Workspace
from memdir.tools import GET_MAX_LINES, MAX_RESULTS_CAP
from memdir.tools._core import (
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    add_memory,
    check_text,
    memory_relpath,
    parse_citation,
    read_memory,
    shared_index,
)
from memdir.tools._sessions import find_in_sessions

__all__ = ["router"]

READ: Final = Policy(scope=Scope.READ)
WRITE: Final = Policy(scope=Scope.WRITE, idempotent=True)
CURATE: Final = Policy(scope=Scope.WRITE, body_limit=MAX_MEMORY_MD_BYTES, idempotent=True)
_MARKDOWN: Final = "text/markdown; charset=utf-8"
_TEXT_TYPES: Final = frozenset({"text/markdown", "text/plain"})
_DEFAULT_LINES: Final = 50
_NOT_MODIFIED: Final = {304: {"description": "Not modified (If-None-Match holds its ETag)."}}
_MARKDOWN_BODY: Final = {200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}}

router = MemdirRouter(prefix="/v1/namespaces/{ns}")

Query_ = Annotated[
    str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="A few keywords.")
]
Sources = Annotated[
    list[Literal["memory", "sessions"]],
    Query(description="What to search: memory (MEMORY.md and the ledgers), sessions, or both."),
]


@router.post("/memories", policy=WRITE, response_model=Added, status_code=201)
def add(bound: BoundNamespace, body: AddIn, once: AppendOnce) -> Added:
    """Append each non-blank line of ``text`` as a bullet to today's ledger (secrets masked)."""
    return Added.model_validate(add_memory(bound.ws, body.text, before_append=once))


@router.get("/search", policy=READ, response_model=SearchResult)
def search(
    bound: BoundNamespace,
    q: Query_,
    limit: Annotated[int, Query(ge=1, le=MAX_RESULTS_CAP)] = 10,
    sources: Sources = ["memory"],  # noqa: B006 (FastAPI copies defaults)
) -> SearchResult:
    """Search the namespace's memory (lexical or hybrid, as the library is configured) and
    its past sessions; the same hits as ``memory_search`` in the same order."""
    text = check_text("q", q, max_chars=MAX_QUERY_CHARS, hint="give a few keywords")
    hits = []
    if "memory" in sources:
        index = shared_index(bound.ws)
        index.refresh()
        hits = index.search(text, limit=limit)
    found = find_in_sessions(bound.ws, text, limit) if "sessions" in sources else []
    return SearchResult(
        hits=[Hit.model_validate(hit) for hit in hits],
        session_hits=[SessionHitOut.model_validate(h) for h in found],
    )


@router.get("/excerpt", policy=READ, response_model=Excerpt)
def excerpt(
    bound: BoundNamespace,
    path: Annotated[
        str,
        Query(
            min_length=1,
            max_length=MAX_PATH_CHARS,
            description="A memory file or a citation: memory/2026-10-14.md#L3-L5.",
        ),
    ],
    start_line: Annotated[int | None, Query(ge=1)] = None,
    num_lines: Annotated[int | None, Query(ge=1, le=GET_MAX_LINES)] = None,
) -> Excerpt:
    """Lines of ``MEMORY.md`` or a ledger, by path or citation (a ledger cited before it was
    archived is found in the archive): what ``memory_get`` reads."""
    cited = parse_citation(path)
    try:
        rel = memory_relpath(bound.ws, cited.path)
    except WorkspaceError as exc:  # a path that leaves the workspace, a NUL...
        raise InvalidInput(str(exc)) from None
    found = _memory_file_size(bound.ws, rel)
    if found is None:
        raise NotFound(f"no memory file {rel}: search finds the right one")
    first = start_line or cited.start or 1
    if num_lines is not None:
        count = num_lines
    elif cited.start is not None and cited.end is not None:
        count = min(cited.end - cited.start + 1, GET_MAX_LINES)
    else:
        count = _DEFAULT_LINES
    if found == 0:
        return Excerpt(path=rel, requested=rel, start_line=1, end_line=0, total_lines=0, lines=[])
    return Excerpt.model_validate(read_memory(bound.ws, rel, first, count))


def _memory_file_size(ws: Workspace, rel: str) -> int | None:
    """The size of the memory file ``rel`` (or of its archived ledger), ``None`` if neither."""
    for candidate in (rel, _archived(rel)):
        if candidate is not None:
            st = ws.stat(candidate, area=MEMORY_AREA)
            if st is not None:
                return st.size
    return None


def _archived(rel: str) -> str | None:
    name = rel.removeprefix(MEMORY_DIR + "/")
    return f"{ARCHIVE_DIR}/{name}" if name != rel and "/" not in name else None


@router.get("/ledgers", policy=READ, response_model=Page[Ledger])
def ledgers(
    bound: BoundNamespace, archived: bool = False, cursor: Cursor = None, limit: Limit = 50
) -> Page[Ledger]:
    """The daily ledgers (or the archived ones), oldest first."""
    found = bound.ws.ledgers(archived=archived)
    page, after = page_of(found, lambda item: item[0].isoformat(), cursor, limit)
    items = []
    for day, rel in page:
        st = bound.ws.stat(rel, area=MEMORY_AREA)
        if st is not None:  # archived meanwhile: the next listing shows it there
            items.append(Ledger(date=day, path=rel, size=st.size, archived=archived))
    return Page[Ledger](items=items, next_cursor=after)


@router.get("/ledgers/{day}", policy=READ, response_class=Response, responses=_MARKDOWN_BODY)
def ledger(bound: BoundNamespace, day: dt.date) -> Response:
    """One daily ledger as Markdown (from the archive when it was archived), with its ETag."""
    for rel in (f"{MEMORY_DIR}/{day.isoformat()}.md", f"{ARCHIVE_DIR}/{day.isoformat()}.md"):
        found = bound.ws.read_versioned(rel)
        if found is not None:
            return _markdown(found, None)
    raise NotFound(f"no ledger for {day.isoformat()}: GET ledgers lists them")


@router.get(
    "/memory-md",
    policy=READ,
    response_class=Response,
    responses={**_MARKDOWN_BODY, **_NOT_MODIFIED},
)
def memory_md(
    bound: BoundNamespace, if_none_match: Annotated[str | None, Header()] = None
) -> Response:
    """``MEMORY.md`` as Markdown, with its version as the ETag (for a compare-and-swap)."""
    found = bound.ws.read_versioned(MEMORY_MD)
    if found is None:
        raise NotFound("MEMORY.md does not exist yet: consolidation writes it")
    return _markdown(found, if_none_match)


def _markdown(found: Versioned, if_none_match: str | None) -> Response:
    tag = etag(found.version)
    if if_none_match is not None and tag in (t.strip() for t in if_none_match.split(",")):
        return Response(status_code=304, headers={"ETag": tag})
    return Response(found.data, media_type=_MARKDOWN, headers={"ETag": tag})


def _problem(description: str) -> dict[str, object]:
    return {"model": Problem, "description": description}


@router.put(
    "/memory-md",
    policy=CURATE,
    response_model=CuratedOut,
    responses={
        201: {"model": CuratedOut, "description": "Created (If-None-Match: *)."},
        412: _problem("MEMORY.md is not at the version of If-Match (ETag: its version now)."),
        415: _problem("The body is not text/markdown or text/plain."),
        428: _problem("Neither If-Match nor If-None-Match: * was sent."),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"text/markdown": {"schema": {"type": "string"}}},
        }
    },
)
async def put_memory_md(
    bound: BoundNamespace,
    request: Request,
    response: Response,
    if_match: Annotated[str | None, Header(description='"<version>" from the ETag.')] = None,
    if_none_match: Annotated[str | None, Header(description="*: create it.")] = None,
) -> CuratedOut:
    """Replace ``MEMORY.md`` by compare-and-swap (secrets masked, the previous file kept in
    its history): ``If-Match`` with the ETag it was read at, or ``If-None-Match: *`` to create
    it (a new namespace's empty ``# Memory`` counts as none). Sending the content it holds
    already succeeds, so a PUT retried after a lost answer is no conflict."""
    pre = precondition(if_match, if_none_match, what="MEMORY.md")
    text = _text(request.headers.get("content-type"), await request.body())
    done, created = await anyio.to_thread.run_sync(_replace, bound, text, pre)
    response.status_code = 201 if created else 200
    if done.version is not None:
        response.headers["ETag"] = etag(done.version)
    return done


def _text(content_type: str | None, body: bytes) -> str:
    media, _, params = (content_type or "text/markdown").partition(";")
    charset = params.strip().lower().removeprefix("charset=").strip('"') if params else "utf-8"
    if media.strip().lower() not in _TEXT_TYPES or charset not in ("utf-8", "utf8"):
        raise ProblemError(
            415,
            "unsupported-media-type",
            "send MEMORY.md as the body, Content-Type: text/markdown; charset=utf-8",
        )
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("the body is not UTF-8 text") from None


def _replace(bound: Bound, text: str, pre: Precondition) -> tuple[CuratedOut, bool]:
    """The replace, and whether it created the file (for ``If-None-Match: *``)."""
    current = bound.ws.read_versioned(MEMORY_MD)
    base = pre.based_on(current, empty=EMPTY_MEMORY_MD.encode("utf-8"))
    try:
        done = replace_memory_md(bound.ws, text, version=base, by="api")
    except VersionConflict as exc:
        raise _conflict(exc.current, pre) from None
    return CuratedOut.model_validate(done), pre.create and done.changed


def _conflict(current: str | None, pre: Precondition) -> PreconditionFailed:
    if current is None:
        detail = "MEMORY.md does not exist: send If-None-Match: * to create it"
        return PreconditionFailed(detail, etag=None)
    tag = etag(current)
    if pre.create:
        detail = f"MEMORY.md exists already (ETag {tag}): send If-Match: {tag} to replace it"
    else:
        detail = (
            f"MEMORY.md changed since it was read (ETag {tag} now): GET it, reapply the edit "
            f"and send If-Match: {tag}"
        )
    return PreconditionFailed(detail, etag=tag)


@router.get("/consolidations", policy=READ, response_model=list[ConsolidationRecord])
def consolidations(
    bound: BoundNamespace, limit: Annotated[int, Query(ge=1, le=200)] = 20
) -> list[ConsolidationRecord]:
    """The newest consolidation runs, oldest first (what ``memdir memory history`` shows)."""
    return read_consolidation_log(bound.ws, limit=limit)
