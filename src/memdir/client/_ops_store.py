"""The calls of the store routes: a namespace's files and locks, as
:class:`~memdir.client._remote_store.RemoteStore` uses them.

Each returns what the ``Store`` contract answers for the expected outcomes (a missing file is
``None``, a held lock ``False``); any other error is raised as the server answered it.
"""

from __future__ import annotations

import uuid
from typing import Final, Literal
from urllib.parse import quote

from memdir.client._decode import decode, json_object
from memdir.client._errors import NamespaceNotFound, NotFound, RemoteError, VersionConflict
from memdir.client._ops import body, etag_version, namespace_path, pages
from memdir.client._wire import Call, Request
from memdir.store._base import Entry, FileStat, Versioned

__all__ = [
    "append_file",
    "create_store",
    "delete_file",
    "list_dir",
    "read_file",
    "read_from",
    "release_lock",
    "renew_lock",
    "stat_file",
    "store_exists",
    "take_lock",
    "write_file",
]

AreaName = Literal["memory"] | None
"""The part of the namespace a symlink may lead to: ``memory`` (``MEMORY.md`` and
``memory/``), or ``None``: the part the path is in."""
_OCTETS: Final = {"Content-Type": "application/octet-stream"}
_LOCK_HELD: Final = "lock-held"


def _path(ns: str, kind: str, rel: str = "") -> str:
    base = namespace_path(ns, "store", kind)
    return f"{base}/{quote(rel, safe='/')}" if rel else base


def _area(area: AreaName) -> tuple[tuple[str, str], ...]:
    return (("area", area),) if area is not None else ()


def store_exists(ns: str) -> Call[bool]:
    """Whether the namespace exists on the server."""
    try:
        yield Request(method="GET", path=namespace_path(ns, "store"))
    except NamespaceNotFound:
        return False
    return True


def create_store(ns: str) -> Call[None]:
    """Create the namespace if it is new (with an empty ``MEMORY.md``, as ``memdir init``)."""
    yield Request(method="PUT", path=namespace_path(ns, "store"))


def read_file(ns: str, rel: str, area: AreaName = None) -> Call[Versioned | None]:
    """The file and its version; ``None`` if it (or the namespace) does not exist."""
    try:
        response = yield Request(method="GET", path=_path(ns, "files", rel), params=_area(area))
    except NotFound:
        return None
    return Versioned(data=response.content, version=etag_version(response))


def read_from(ns: str, rel: str, offset: int, area: AreaName = None) -> Call[bytes | None]:
    """The file's bytes from ``offset`` on; ``None`` if it does not exist."""
    params = (("offset", str(max(0, offset))), *_area(area))
    try:
        response = yield Request(method="GET", path=_path(ns, "files", rel), params=params)
    except NotFound:
        return None
    return response.content


def stat_file(ns: str, rel: str, area: AreaName = None) -> Call[FileStat | None]:
    """The file's size, change time and tags; ``None`` if it does not exist."""
    try:
        response = yield Request(method="GET", path=_path(ns, "stats", rel), params=_area(area))
    except NotFound:
        return None
    return decode(FileStat, body(response))


def _entry(item: object) -> Entry:
    found = json_object(item, "a directory entry")
    name, kind, stat = found.get("name"), found.get("kind"), found.get("stat")
    if not isinstance(name, str) or kind not in ("file", "dir"):
        raise RemoteError("the server's answer (a directory entry) has no name or kind")
    return Entry(
        name=name,
        kind="file" if kind == "file" else "dir",
        stat=decode(FileStat, stat) if stat is not None else None,
    )


def list_dir(ns: str, rel: str) -> Call[list[Entry]]:
    """The entries of a directory (``""``: the top), by name; none when it is missing."""
    try:
        return (yield from pages(_path(ns, "dirs", rel), _entry, (("limit", "1000"),)))
    except NamespaceNotFound:
        return []


def write_file(ns: str, rel: str, data: bytes, version: str | Literal[False] | None) -> Call[bool]:
    """Write the file whole: unconditionally (``version`` ``False``), only if it does not exist
    (``None``), or only if it is at ``version``. Whether it was written."""
    headers = dict(_OCTETS)
    if version is None:
        headers["If-None-Match"] = "*"
    elif version is not False:
        headers["If-Match"] = f'"{version}"'
    request = Request(method="PUT", path=_path(ns, "files", rel), content=data, headers=headers)
    try:
        yield request
    except VersionConflict:
        return False
    return True


def append_file(ns: str, rel: str, data: bytes, *, fsync: bool = True) -> Call[tuple[int, int]]:
    """Append ``data`` at the end of the file in one step; its ``(start, end)`` offsets."""
    params = () if fsync else (("fsync", "false"),)
    response = yield Request(
        method="POST", path=_path(ns, "files", rel), params=params, content=data, headers=_OCTETS
    )
    found = json_object(body(response), "an append")
    start, end = found.get("start"), found.get("end")
    if not isinstance(start, int) or not isinstance(end, int):
        raise RemoteError("the server's answer (an append) has no start and end")
    return start, end


def delete_file(ns: str, rel: str) -> Call[bool]:
    """Remove the file; whether it existed."""
    response = yield Request(method="DELETE", path=_path(ns, "files", rel))
    return json_object(body(response), "a delete").get("deleted") is True


def _held(response_body: object) -> tuple[bool, float]:
    found = json_object(response_body, "a lock")
    ttl = found.get("ttl")
    return found.get("held") is True, float(ttl) if isinstance(ttl, int | float) else 0.0


def take_lock(ns: str, name: str, token: uuid.UUID) -> Call[float | None]:
    """Take the lock for ``token`` if nobody holds it: its time to live in seconds, or
    ``None`` when another holder has it."""
    path = namespace_path(ns, "store", "locks", name)
    try:
        response = yield Request(method="POST", path=path, json={"token": str(token)})
    except RemoteError as exc:
        if exc.status == 409 and exc.code == _LOCK_HELD:
            return None
        raise
    held, ttl = _held(body(response))
    return ttl if held else None


def renew_lock(ns: str, name: str, token: uuid.UUID) -> Call[bool]:
    """Hold the lock a time to live more; whether ``token`` still held it."""
    path = namespace_path(ns, "store", "locks", name)
    response = yield Request(method="PUT", path=path, json={"token": str(token)})
    return _held(body(response))[0]


def release_lock(ns: str, name: str, token: uuid.UUID) -> Call[bool]:
    """Give the lock up; whether ``token`` still held it."""
    path = namespace_path(ns, "store", "locks", name)
    response = yield Request(method="DELETE", path=path, params=(("token", str(token)),))
    return _held(body(response))[0]
