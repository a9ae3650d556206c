"""Export and import of a namespace as one ``.tar.gz``: the archive ``memdir export --to
x.tar.gz`` writes and ``memdir import x.tar.gz`` reads, streamed out, and taken in as an
archive from a stranger (unpacked and checked whole, within the server's limits, before a file
of the namespace is written). Both hold the tenant's job slot while they run."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Final

import anyio.to_thread
from fastapi import Request
from fastapi.responses import StreamingResponse

from memdir.forget._keys import FORGET_DIR
from memdir.server.auth import Scope
from memdir.server.limits import BodyTooLarge
from memdir.server.policy import BoundNamespace, MemdirRouter, Policy
from memdir.server.pool import EMPTY_MEMORY_MD
from memdir.server.problems import Problem
from memdir.server.routes.jobs import JOB_PROBLEMS
from memdir.server.schemas.transfer import Imported
from memdir.server.settings import IMPORT_LIMIT_MAX, ServerSettings
from memdir.server.state import server_state
from memdir.server.streaming import ArchiveStream
from memdir.store.archive import unpack_archive
from memdir.store.transfer import TransferReport, import_workspace
from memdir.store.workspace import MEMORY_MD, Workspace

__all__ = ["router"]

EXPORT: Final = Policy(scope=Scope.ADMIN, job=True)
# The body limit is the server's --import-limit, checked by the route (a policy is fixed when
# the module is imported); this is only the largest that setting may be.
IMPORT: Final = Policy(scope=Scope.ADMIN, body_limit=IMPORT_LIMIT_MAX, job=True, streamed=True)
GZIP: Final = "application/gzip"
_ARCHIVE: Final = {GZIP: {"schema": {"type": "string", "format": "binary"}}}
_SPOOL_CHUNK: Final = 1 << 20

router = MemdirRouter(prefix="/v1/namespaces/{ns}")


@router.get(
    "/export",
    policy=EXPORT,
    name="export_archive",
    response_class=StreamingResponse,
    responses={200: {"content": _ARCHIVE, "description": "The namespace as a .tar.gz."},
               **JOB_PROBLEMS},
)  # fmt: skip
async def export(bound: BoundNamespace, request: Request) -> StreamingResponse:
    """The namespace's files as a ``.tar.gz``, streamed (not the search index): the archive
    ``memdir import`` and ``POST import`` load."""
    jobs = server_state(request).jobs
    give_back = jobs.take(bound.principal.tenant, "export")
    stream = ArchiveStream(bound.ws, give_back)
    try:
        stream.start()
    except BaseException:
        give_back()
        raise
    chunks = stream.chunks()
    first = await anext(chunks)  # a store that cannot be read is still answered as a problem

    async def body() -> Any:
        yield first
        async for chunk in chunks:
            yield chunk

    name = f"{bound.ns}.tar.gz"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(body(), media_type=GZIP, headers=headers)


@router.post(
    "/import",
    policy=IMPORT,
    name="import_archive",
    response_model=Imported,
    responses={
        413: {"model": Problem, "description": "The archive is larger than --import-limit."},
        **JOB_PROBLEMS,
    },
    openapi_extra={"requestBody": {"required": True, "content": _ARCHIVE}},
)
async def import_(bound: BoundNamespace, request: Request, replace: bool = False) -> Imported:
    """Load a ``.tar.gz`` (such as ``GET export`` gives) into the namespace. Each file is
    written unless the namespace holds other bytes there: that is a conflict, listed and left
    as it is (``?replace=true``: overwritten). An archive that is unsafe (``..``, absolute
    names, links, devices), holds other namespaces, or is over the server's limits is refused
    whole (422), before a file is written."""
    state = server_state(request)
    settings = state.settings
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > settings.import_limit:
        raise BodyTooLarge(settings.import_limit, int(declared))
    with state.jobs.slot(bound.principal.tenant, "import"), tempfile.TemporaryFile() as spool:
        await _spool(request, spool, settings.import_limit)
        spool.seek(0)
        report = await state.jobs.call_sync(
            lambda: _import(spool, bound.ws, settings, replace=replace)
        )
    return Imported.model_validate(report)


async def _spool(request: Request, spool: IO[bytes], limit: int) -> None:
    """The body into ``spool`` (the unpacking reads a file, synchronously), refused past
    ``limit`` bytes."""
    size = 0
    pending = bytearray()
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit, None)
        pending += chunk
        if len(pending) >= _SPOOL_CHUNK:
            await anyio.to_thread.run_sync(spool.write, bytes(pending))
            pending.clear()
    await anyio.to_thread.run_sync(spool.write, bytes(pending))


def _import(
    source: IO[bytes], ws: Workspace, settings: ServerSettings, *, replace: bool
) -> TransferReport:
    """What :func:`memdir.store.archive.import_archive` does, within the server's limits and
    never into other namespaces; a new namespace's empty ``MEMORY.md`` is no conflict."""
    with tempfile.TemporaryDirectory(prefix="memdir-import-") as tmp:
        limits = {"max_files": settings.import_max_files, "max_bytes": settings.import_limit}
        unpack_archive(source, tmp, **limits)
        # An archive never sets the erasures' secret or records (nor clears them).
        shutil.rmtree(Path(tmp) / FORGET_DIR, ignore_errors=True)
        report = import_workspace(tmp, ws, replace=replace)
        _over_empty_memory_md(Path(tmp), ws, report)
    return report


def _over_empty_memory_md(unpacked: Path, ws: Workspace, report: TransferReport) -> None:
    """The archive's ``MEMORY.md`` replaces the empty one a write made when it created the
    namespace, by compare-and-swap: one written meanwhile stays, a conflict."""
    shown = f"{ws.namespace}:{MEMORY_MD}"
    if shown not in report.conflicts:
        return
    current = ws.read_versioned(MEMORY_MD)
    if current is None or current.data != EMPTY_MEMORY_MD.encode("utf-8"):
        return
    data = (unpacked / MEMORY_MD).read_bytes()
    if ws.replace_if(MEMORY_MD, data, current.version):
        report.conflicts.remove(shown)
        report.files += 1
        report.bytes += len(data)
