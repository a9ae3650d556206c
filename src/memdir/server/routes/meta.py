"""``GET /v1/whoami`` and ``GET /v1/namespaces``: who the key is, and what it reaches."""

from __future__ import annotations

from typing import Final

from fastapi import Request

from memdir.server.auth import Scope
from memdir.server.pagination import Cursor, Limit, page_of
from memdir.server.policy import CurrentPrincipal, MemdirRouter, Policy
from memdir.server.schemas.meta import NamespaceInfo, Page, WhoAmI
from memdir.server.state import server_state

__all__ = ["router"]

READ: Final = Policy(scope=Scope.READ)

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
