"""``GET /v1/whoami``, ``GET /v1/namespaces`` and ``DELETE /v1/namespaces/{ns}``: who the
key is, what it reaches, and a namespace erased whole."""

from __future__ import annotations

from typing import Final

from fastapi import Request

from memdir.server.auth import Scope
from memdir.server.pagination import Cursor, Limit, page_of
from memdir.server.policy import BoundNamespace, CurrentPrincipal, MemdirRouter, Policy
from memdir.server.schemas.meta import NamespaceDeleted, NamespaceInfo, Page, WhoAmI
from memdir.server.state import server_state

__all__ = ["router"]

READ: Final = Policy(scope=Scope.READ)
DELETE: Final = Policy(scope=Scope.ADMIN, job=True, idempotent=True)

router = MemdirRouter(prefix="/v1")


@router.get("/whoami", policy=READ, response_model=WhoAmI)
def whoami(principal: CurrentPrincipal) -> WhoAmI:
    """The tenant, scope and reach of the key that calls."""
    grant = principal.grant
    return WhoAmI(
        tenant=principal.tenant,
        key_id=principal.key_id,
        scope=principal.scope.label,  # type: ignore[arg-type]
        namespace_prefix=grant.prefix,
        namespace=grant.namespace,
        expires_at=principal.expires_at,
    )


@router.get("/namespaces", policy=READ, response_model=Page[NamespaceInfo])
def list_namespaces(
    request: Request, principal: CurrentPrincipal, cursor: Cursor = None, limit: Limit = 50
) -> Page[NamespaceInfo]:
    """The namespaces this key reaches that exist, by name."""
    names = [n for n in server_state(request).root.namespaces() if principal.grant.allows(n)]
    page, after = page_of(names, lambda name: name, cursor, limit)
    return Page[NamespaceInfo](items=[NamespaceInfo(name=n) for n in page], next_cursor=after)


@router.delete("/namespaces/{ns}", policy=DELETE, response_model=NamespaceDeleted)
async def delete_namespace(bound: BoundNamespace, request: Request) -> NamespaceDeleted:
    """Erase the namespace whole (a user's memory): every file, row, index entry, vector and
    lock, and the API keys bound to exactly it; the others are not touched. The workspace
    root keeps an audit record without content (see docs/forget.md)."""
    from memdir.forget import delete_namespace as erase

    state = server_state(request)
    by = f"key {bound.principal.key_id}"
    with state.jobs.slot(bound.principal.tenant, "delete"):
        done = await state.jobs.call_sync(lambda: erase(state.root, bound.ns, by=by))
    state.pool.forget(bound.ns)
    state.usage.add(bound.principal.tenant, namespaces=-1)
    return NamespaceDeleted(name=done.namespace, files=done.files, keys_revoked=done.keys_revoked)
