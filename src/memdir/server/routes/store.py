"""A namespace's store, file by file: what a remote workspace (``memdir -w https://...``) reads
and writes through, the library's ``Store`` contract over HTTP.

Files are read (whole, with their version as the ``ETag``, or from an offset), stat'ed,
written (whole; ``If-None-Match: *`` creates, ``If-Match`` replaces a version: 412 otherwise),
appended to and deleted; directories are listed; named locks are lent by token (taken,
renewed within their time to live, released), excluding the server's own users of the same
lock. Every path goes through the library's confinement (``..`` and links out are refused)
and the search index's ``.index/`` and the server's ``.memdir-server/`` are never reached.
Reads need a ``read`` key, the rest ``write``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Final, Literal, TypeVar

import anyio.to_thread
from fastapi import Header, Query, Request, Response

from memdir._net import REFUSED_HEADER
from memdir.errors import WorkspaceError
from memdir.forget._guard import guard_bytes
from memdir.forget._keys import FORGET_DIR
from memdir.server.auth import Scope
from memdir.server.conditional import etag, precondition
from memdir.server.pagination import Cursor, page_of
from memdir.server.policy import Bound, BoundNamespace, MemdirRouter, Policy
from memdir.server.problems import InvalidInput, NotFound, PreconditionFailed, Problem, ProblemError
from memdir.server.schemas.meta import Page
from memdir.server.schemas.store import (
    Appended,
    Deleted,
    EntryOut,
    LockHeld,
    LockIn,
    StatOut,
    StoreInfo,
)
from memdir.store._base import LENT_LOCK_SECONDS, Entry
from memdir.store._files import lock_name
from memdir.store._safeopen import Area, PathMissing, PathRefused
from memdir.store.workspace import (
    INDEX_DIR,
    MEMORY_AREA,
    MEMORY_DIR,
    SERVER_DIR,
    WORKSPACE_AREA,
    area_of,
)

__all__ = ["STORE_BODY_LIMIT", "router"]

STORE_BODY_LIMIT: Final = 32 << 20
"""The largest file written or appended at once, in bytes."""
READ: Final = Policy(scope=Scope.READ)
# Every write honours an Idempotency-Key: a conditional write or a delete retried after a lost
# answer replays its success instead of failing on its own effect (412, deleted: false).
WRITE: Final = Policy(scope=Scope.WRITE, idempotent=True)
UPLOAD: Final = Policy(scope=Scope.WRITE, body_limit=STORE_BODY_LIMIT, idempotent=True)
_HIDDEN: Final = frozenset({INDEX_DIR, SERVER_DIR})
_LIST_MAX: Final = 1_000
_OCTETS: Final = "application/octet-stream"
_T = TypeVar("_T")

router = MemdirRouter(prefix="/v1/namespaces/{ns}/store")

AreaParam = Annotated[
    Literal["memory"] | None,
    Query(description="memory: follow links only within MEMORY.md and memory/ (memory_get)."),
]
ListLimit = Annotated[int, Query(ge=1, le=_LIST_MAX, description="Entries per page.")]


def _problem(description: str) -> dict[str, Any]:
    return {"model": Problem, "description": description}


_BYTES_BODY: Final = {
    "requestBody": {"required": True, "content": {_OCTETS: {"schema": {"type": "string"}}}}
}
_BYTES_ANSWER: Final = {200: {"content": {_OCTETS: {"schema": {"type": "string"}}}}}
_REFUSED: Final = {403: _problem("The key's scope is too narrow, or the path may not be reached.")}


def _confined(bound: Bound, path: str) -> str:
    """``path`` confined to the namespace, outside ``.index/`` and ``.memdir-server/``."""
    try:
        rel = bound.ws.relpath(path)
    except PathRefused as exc:
        raise _refusal(exc) from None
    except WorkspaceError as exc:  # "..", a NUL, an empty or too long path
        raise InvalidInput(str(exc)) from None
    top = rel.split("/", 1)[0]
    if top in _HIDDEN:
        raise ProblemError(
            403,
            "path-refused",
            f"{top}/ is the server's own: it is not read or written through the API",
            headers={REFUSED_HEADER: "area"},
        )
    if rel == FORGET_DIR or rel.startswith(FORGET_DIR + "/"):
        raise ProblemError(
            403,
            "path-refused",
            f"{FORGET_DIR}/ holds the erasures' secret and records: it is not read or written "
            "through the API",
            headers={REFUSED_HEADER: "area"},
        )
    return rel


def _refusal(exc: PathRefused) -> ProblemError:
    detail = " ".join(str(exc).split())[:1000]
    return ProblemError(403, "path-refused", detail, headers={REFUSED_HEADER: exc.reason})


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A path the store refuses is a 403 naming why (a directory, a link out...)."""
    try:
        yield
    except PathRefused as exc:
        raise _refusal(exc) from None


def _area(rel: str, area: str | None) -> Area:
    return MEMORY_AREA if area == "memory" else area_of(rel)


async def _in_thread(call: Callable[[], _T]) -> _T:
    with _refusals():
        return await anyio.to_thread.run_sync(call)


# -- the namespace ------------------------------------------------------------------------


@router.get("", policy=READ, response_model=StoreInfo)
def store_info(bound: BoundNamespace) -> StoreInfo:
    """The namespace exists (404 otherwise): what a remote workspace checks first."""
    return StoreInfo(namespace=bound.ns)


@router.put("", policy=WRITE, response_model=StoreInfo)
def create_store(bound: BoundNamespace) -> StoreInfo:
    """Create the namespace if it is new (as ``memdir init``: with an empty ``MEMORY.md``)."""
    return StoreInfo(namespace=bound.ns)


# -- files ----------------------------------------------------------------------------------


@router.get(
    "/files/{path:path}",
    policy=READ,
    response_class=Response,
    responses={**_BYTES_ANSWER, **_REFUSED},
)
def read_file(
    bound: BoundNamespace,
    path: str,
    offset: Annotated[int | None, Query(ge=0, description="Only the bytes from here on.")] = None,
    area: AreaParam = None,
) -> Response:
    """The file's bytes with its version as the ``ETag`` (for ``If-Match``), or with
    ``offset`` its bytes from there on (none past its end)."""
    rel = _confined(bound, path)
    where = _area(rel, area)
    with _refusals():
        try:
            if offset is not None:
                return Response(bound.ws.store.read_from(rel, offset, where), media_type=_OCTETS)
            found = bound.ws.store.read_versioned(rel, where)
        except PathMissing:
            found = None
    if found is None:
        raise NotFound(f"no file {rel}")
    return Response(found.data, media_type=_OCTETS, headers={"ETag": etag(found.version)})


@router.get("/stats/{path:path}", policy=READ, response_model=StatOut, responses=_REFUSED)
def stat_file(bound: BoundNamespace, path: str, area: AreaParam = None) -> StatOut:
    """The file's size, change time and tags, without reading it."""
    rel = _confined(bound, path)
    with _refusals():
        found = bound.ws.store.stat(rel, _area(rel, area))
    if found is None:
        raise NotFound(f"no file {rel}")
    return StatOut.model_validate(found)


@router.put(
    "/files/{path:path}",
    policy=UPLOAD,
    status_code=204,
    response_class=Response,
    responses={
        **_REFUSED,
        412: _problem("If-None-Match: * and the file exists, or it is not at If-Match's version."),
    },
    openapi_extra=_BYTES_BODY,
)
async def write_file(
    bound: BoundNamespace,
    path: str,
    request: Request,
    if_match: Annotated[str | None, Header(description='"<version>": replace that one.')] = None,
    if_none_match: Annotated[str | None, Header(description="*: create, never replace.")] = None,
) -> Response:
    """Replace (or create) the file whole, atomically: unconditionally, only if it does not
    exist (``If-None-Match: *``), or only if it is still at a version (``If-Match``)."""
    rel = _confined(bound, path)
    data = await request.body()
    where = area_of(rel)
    store = bound.ws.store
    # Every write passes the namespace's erasures, in its own worker thread: a client may
    # still hold what was erased since it read it (a running agent) and must not write it back.
    if if_match is None and if_none_match is None:
        await _in_thread(lambda: store.write(rel, guard_bytes(bound.ws, rel, data), where))
        return Response(status_code=204)
    pre = precondition(if_match, if_none_match, what=rel)
    if pre.create:
        done = await _in_thread(lambda: store.create(rel, guard_bytes(bound.ws, rel, data), where))
        if not done:
            raise PreconditionFailed(f"{rel} exists already", etag=None)
        return Response(status_code=204)
    if pre.versions is None or len(pre.versions) != 1:
        raise InvalidInput('If-Match takes one version here: "<version>" from the ETag')
    version = pre.versions[0]
    done = await _in_thread(
        lambda: store.replace_if(rel, guard_bytes(bound.ws, rel, data), version, where)
    )
    if not done:
        raise PreconditionFailed(f"{rel} is not at the version of If-Match", etag=None)
    return Response(status_code=204)


@router.post(
    "/files/{path:path}",
    policy=UPLOAD,
    response_model=Appended,
    responses=_REFUSED,
    openapi_extra=_BYTES_BODY,
)
async def append_file(
    bound: BoundNamespace,
    path: str,
    request: Request,
    fsync: Annotated[bool, Query(description="Wait for the disk (false: sooner).")] = True,
) -> Appended:
    """Append the body at the end of the file (creating it) in one atomic step; a newline
    goes first when the file does not end in one. Answers where the bytes went."""
    rel = _confined(bound, path)
    data = await request.body()
    where = area_of(rel)
    start, end = await _in_thread(
        lambda: bound.ws.store.append(rel, guard_bytes(bound.ws, rel, data), where, fsync=fsync)
    )
    return Appended(start=start, end=end)


@router.delete("/files/{path:path}", policy=WRITE, response_model=Deleted, responses=_REFUSED)
def delete_file(bound: BoundNamespace, path: str) -> Deleted:
    """Remove the file; whether it existed."""
    rel = _confined(bound, path)
    with _refusals():
        return Deleted(deleted=bound.ws.store.delete(rel, area_of(rel)))


# -- directories ----------------------------------------------------------------------------


def _listing(bound: BoundNamespace, rel: str, cursor: str | None, limit: int) -> Page[EntryOut]:
    with _refusals():
        entries = bound.ws.store.listdir(rel, area_of(rel) if rel else WORKSPACE_AREA)
    if not rel:
        entries = [e for e in entries if e.name not in _HIDDEN]
    elif rel == MEMORY_DIR:
        entries = [e for e in entries if f"{MEMORY_DIR}/{e.name}" != FORGET_DIR]

    def name(entry: Entry) -> str:
        return entry.name

    page, after = page_of(entries, name, cursor, limit)
    return Page[EntryOut](items=[EntryOut.model_validate(e) for e in page], next_cursor=after)


@router.get("/dirs", policy=READ, response_model=Page[EntryOut])
def list_top(
    bound: BoundNamespace, cursor: Cursor = None, limit: ListLimit = 500
) -> Page[EntryOut]:
    """The files and directories at the top of the namespace, by name."""
    return _listing(bound, "", cursor, limit)


@router.get("/dirs/{path:path}", policy=READ, response_model=Page[EntryOut], responses=_REFUSED)
def list_dir(
    bound: BoundNamespace, path: str, cursor: Cursor = None, limit: ListLimit = 500
) -> Page[EntryOut]:
    """The files and sub-directories directly in a directory, by name (none: it is missing)."""
    return _listing(bound, _confined(bound, path), cursor, limit)


# -- locks ----------------------------------------------------------------------------------


def _lock(name: str) -> str:
    try:
        return lock_name(name)
    except WorkspaceError as exc:
        raise InvalidInput(str(exc)) from None


@router.post(
    "/locks/{name}",
    policy=WRITE,
    response_model=LockHeld,
    responses={409: _problem("Another holder has the lock; try again later.")},
)
def take_lock(bound: BoundNamespace, name: str, body: LockIn) -> LockHeld:
    """Take the lock for the body's token if nobody holds it (409 ``lock-held`` otherwise;
    never waits). Renew it within ``ttl`` seconds and release it when done: a holder that
    stops renewing loses it. Taking it again with the same token renews it."""
    if not bound.ws.store.take_lock(_lock(name), str(body.token)):
        raise ProblemError(409, "lock-held", f"lock {name!r} is held by another writer")
    return LockHeld(held=True, ttl=LENT_LOCK_SECONDS)


@router.put("/locks/{name}", policy=WRITE, response_model=LockHeld)
def renew_lock(bound: BoundNamespace, name: str, body: LockIn) -> LockHeld:
    """Hold the lock ``ttl`` more seconds; ``held: false`` when the token had lost it (stop
    what it guarded)."""
    held = bound.ws.store.renew_lock(_lock(name), str(body.token))
    return LockHeld(held=held, ttl=LENT_LOCK_SECONDS)


@router.delete("/locks/{name}", policy=WRITE, response_model=LockHeld)
def release_lock(bound: BoundNamespace, name: str, token: uuid.UUID) -> LockHeld:
    """Give the lock up; ``held``: whether the token still held it until now."""
    held = bound.ws.store.drop_lock(_lock(name), str(token))
    return LockHeld(held=held, ttl=0)
