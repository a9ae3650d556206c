"""The API keys page: a tenant's keys listed (never a secret or digest), a key made (its secret
shown once, on the answer to the form), a key revoked.

Needs the admin scope. An admin manages the keys whose reach lies within its own key's reach,
of its own tenant only: it never sees, makes or revokes a key of another tenant or a key wider
than its own. ``memdir ui`` manages every tenant's keys of the workspace (the person owns
it). A revoke is seen at once by this process (the key cache is polled), so the session of the
revoked key ends at its next page.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.errors import ConfigError
from memdir.server.auth import Grant, KeyRecord, Scope, mint_key
from memdir.server.state import server_state
from memdir.server.ui._pages import CurrentViewer, read_form, require
from memdir.server.ui._render import page, redirect
from memdir.server.ui._session import Refused, Viewer

__all__ = ["manages", "router", "within"]

router = APIRouter(prefix="/ui/keys", include_in_schema=False)

_WHAT: Final = "Managing API keys"
MAX_DAYS: Final = 3650


def within(inner: Grant, outer: Grant) -> bool:
    """Whether every namespace ``inner`` reaches is one ``outer`` reaches."""
    if inner.tenant != outer.tenant:
        return False
    if outer.namespace is not None:
        return inner.namespace == outer.namespace
    if inner.namespace is not None:
        return outer.allows(inner.namespace)
    return inner.prefix.startswith(outer.prefix)


def manages(viewer: Viewer, record: KeyRecord) -> bool:
    """Whether ``viewer`` may see and revoke ``record`` (``memdir ui``: every key)."""
    return viewer.local or within(record.grant, viewer.principal.grant)


def _records(request: Request, viewer: Viewer) -> list[KeyRecord]:
    """The keys ``viewer`` manages, newest first (blocking: the store is read)."""
    store = server_state(request).authenticator.store
    found = store.records(None if viewer.local else viewer.tenant)
    return [r for r in reversed(found) if manages(viewer, r)]


def _keys_page(
    request: Request,
    viewer: Viewer,
    *,
    status: int = 200,
    error: str | None = None,
    values: dict[str, str] | None = None,
    revoked: str | None = None,
) -> Response:
    records = _records(request, viewer)
    grant = viewer.principal.grant
    defaults = {
        "tenant": "",
        "scope": "read",
        "namespace_prefix": "" if viewer.local else grant.prefix,
        "namespace": grant.namespace or "",
        "label": "",
        "expires_days": "",
    }
    return page(
        request,
        "keys.html",
        viewer,
        status=status,
        title="API keys",
        records=records,
        now=datetime.now(UTC),
        error=error,
        values={**defaults, **(values or {})},
        revoked=revoked if any(r.key_id == revoked for r in records) else None,
        scopes=[s.label for s in Scope],
    )


@router.get("")
def keys(request: Request, viewer: CurrentViewer, revoked: str = "") -> Response:
    """The keys the viewer manages, and the form that makes one."""
    require(viewer, Scope.ADMIN, _WHAT)
    return _keys_page(request, viewer, revoked=revoked or None)


def _expiry(text: str, now: datetime) -> datetime | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_DAYS:
        raise ConfigError(f"the expiry is a whole number of days from 1 to {MAX_DAYS}, or empty")
    return now + timedelta(days=int(text))


def _mint(viewer: Viewer, form: dict[str, str]) -> tuple[str, KeyRecord]:
    """The key the form asks for, within the viewer's own reach.

    Raises:
        ConfigError: a value a key cannot have (shown on the form).
        Refused: 403, another tenant's key, or one wider than the viewer's.
    """
    grant = viewer.principal.grant
    asked = form.get("tenant", "").strip()
    if viewer.local:
        tenant = asked
    elif asked and asked != viewer.tenant:
        raise Refused(403, "a key of another tenant cannot be made here")
    else:
        tenant = viewer.tenant
    prefix = form.get("namespace_prefix", "").strip() or None
    namespace = form.get("namespace", "").strip() or None
    if not viewer.local:
        prefix = prefix or grant.prefix
        asked_reach = Grant(tenant=tenant, prefix=prefix, namespace=namespace)
        if not within(asked_reach, grant):
            reach = grant.namespace or f"{grant.prefix}*"
            raise Refused(403, f"a key can reach only namespaces your own key reaches ({reach})")
    now = datetime.now(UTC)
    key, record = mint_key(
        tenant=tenant,
        scope=Scope.parse(form.get("scope", "")),
        now=now,
        namespace_prefix=prefix,
        namespace=namespace,
        label=form.get("label", "").strip(),
        expires_at=_expiry(form.get("expires_days", ""), now),
    )
    return key, record


@router.post("")
async def create(request: Request, viewer: CurrentViewer) -> Response:
    """Make a key; the answer shows its secret, this once (never in a URL or a redirect)."""
    form = await read_form(request, viewer)
    require(viewer, Scope.ADMIN, _WHAT)
    try:
        key, record = _mint(viewer, form)
    except ConfigError as exc:
        message = str(exc)
        shown = {k: v for k, v in form.items() if k != "csrf"}
        return await anyio.to_thread.run_sync(
            lambda: _keys_page(request, viewer, status=400, error=message, values=shown)
        )
    store = server_state(request).authenticator.store
    await anyio.to_thread.run_sync(store.add, record)
    return page(request, "key-created.html", viewer, title="Key created", key=key, record=record)


def _managed(request: Request, viewer: Viewer, key_id: str) -> KeyRecord:
    """The record of ``key_id`` if ``viewer`` manages it (blocking).

    Raises:
        Refused: 404, the same for a key that does not exist and one of another reach.
    """
    wanted = key_id.strip()
    record = server_state(request).authenticator.store.get(wanted) if len(wanted) < 64 else None
    if record is None or not manages(viewer, record):
        raise Refused(404, "no such key")
    return record


@router.get("/revoke")
def revoke_page(request: Request, viewer: CurrentViewer, id: str = "") -> Response:
    """Ask before revoking the key ``id``."""
    require(viewer, Scope.ADMIN, _WHAT)
    record = _managed(request, viewer, id)
    return page(
        request,
        "key-revoke.html",
        viewer,
        title="Revoke a key",
        record=record,
        own=record.key_id == viewer.principal.key_id,
        now=datetime.now(UTC),
    )


@router.post("/revoke")
async def revoke(request: Request, viewer: CurrentViewer) -> Response:
    """Revoke the key the form names; this process stops taking it at once."""
    form = await read_form(request, viewer)
    require(viewer, Scope.ADMIN, _WHAT)
    state = server_state(request)

    def run() -> KeyRecord:
        record = _managed(request, viewer, form.get("key_id", ""))
        state.authenticator.store.revoke(record.key_id, datetime.now(UTC))
        state.authenticator.poll()  # the cached key goes now, not in a second
        return record

    record = await anyio.to_thread.run_sync(run)
    return redirect("/ui/keys?" + urlencode({"revoked": record.key_id}))
