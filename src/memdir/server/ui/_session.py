"""Who is looking at a page: the UI's session cookie, its CSRF token, and ``memdir ui``'s
loopback viewer.

Logging in takes an API key (or a JWT, when the server takes them); the key is kept in an
``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` and ``__Host-`` prefixed behind TLS) and
checked on every page as a bearer key is on every route, so a revoked key ends every session
at once and any replica serves any page. Each form carries a CSRF token derived from the
session (an HMAC of the cookie), and a write is also refused when the browser says it came
from another site (``Sec-Fetch-Site``, else ``Origin``). ``memdir ui`` has no key: one person
on loopback, every namespace of the workspace, pages refused unless the ``Host`` header names
a loopback address (a page of another site cannot reach it by renaming itself).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.requests import Request

from memdir._net import is_loopback_host
from memdir.errors import ConfigError
from memdir.server.auth import AuthError, Grant, Principal, Scope
from memdir.server.problems import ProblemError
from memdir.server.state import ServerState, server_state
from memdir.store.namespaces import validate_namespace

__all__ = [
    "COOKIE",
    "LOCAL_NAMESPACE",
    "SECURE_COOKIE",
    "LoginRequired",
    "Refused",
    "Viewer",
    "check_form",
    "cookie_name",
    "csrf_for",
    "viewer_of",
]

COOKIE: Final = "memdir_ui"
SECURE_COOKIE: Final = "__Host-memdir_ui"
LOCAL_NAMESPACE: Final = "_"
"""``memdir ui``'s name for the workspace itself (never a valid namespace name)."""
_LOCAL_CSRF: Final = hmac.new(
    secrets.token_bytes(32), b"memdir-ui-csrf", hashlib.sha256
).hexdigest()
"""The CSRF token of ``memdir ui``: one process, no session to derive it from."""


class LoginRequired(Exception):
    """The page needs a session: the browser is sent to the login page."""


class Refused(Exception):
    """A page refused (shown as an error page with ``status`` and ``message``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking.

    Attributes:
        principal: the key's principal (``memdir ui``: the workspace's owner, admin of all).
        csrf: the token every form of this session carries.
        local: ``memdir ui`` (no key, loopback).
    """

    principal: Principal
    csrf: str
    local: bool = False

    @property
    def tenant(self) -> str:
        """The tenant (``memdir ui``: ``local``)."""
        return self.principal.tenant

    def can(self, scope: Scope) -> bool:
        """Whether the session may do what ``scope`` allows."""
        return self.principal.scope >= scope

    def reaches(self, ns: str) -> bool:
        """Whether ``ns`` is one of this viewer's namespaces (the name checked first)."""
        if self.local and ns == LOCAL_NAMESPACE:
            return True
        try:
            validate_namespace(ns)
        except ConfigError:
            return False
        return self.principal.grant.allows(ns)


def cookie_name(request: Request) -> str:
    """The session cookie's name: ``__Host-`` prefixed over TLS (which needs ``Secure``)."""
    return SECURE_COOKIE if request.url.scheme == "https" else COOKIE


def csrf_for(token: str) -> str:
    """The CSRF token of the session holding ``token``."""
    return hmac.new(token.encode("utf-8"), b"memdir-ui-csrf", hashlib.sha256).hexdigest()


def _local_viewer(request: Request) -> Viewer:
    host = (request.headers.get("host") or "").strip()
    name = urlsplit(f"//{host}").hostname or ""
    if not is_loopback_host(name):
        raise Refused(403, "memdir ui answers only to a loopback address (127.0.0.1, localhost)")
    principal = Principal(
        tenant="local",
        key_id="local",
        scope=Scope.ADMIN,
        grant=Grant(tenant="local", prefix=""),
        via="loopback",
    )
    return Viewer(principal=principal, csrf=_LOCAL_CSRF, local=True)


async def viewer_of(request: Request) -> Viewer:
    """The viewer of ``request`` (a page dependency).

    Raises:
        LoginRequired: no session, or its key is no longer valid.
        Refused: ``memdir ui`` reached by a name that is not loopback; a tenant over its rate.
    """
    from memdir.server.policy import authenticate

    state = server_state(request)
    if state.settings.ui_local:
        return _local_viewer(request)
    token = request.cookies.get(cookie_name(request))
    if not token:
        raise LoginRequired
    try:
        principal = await authenticate(state, token)
    except AuthError:
        raise LoginRequired from None
    except ProblemError as exc:
        raise Refused(exc.status, "the keys cannot be read now; try again soon") from None
    _admit(state, principal)
    request.state.principal = principal  # the access log and the metrics name the tenant
    return Viewer(principal=principal, csrf=csrf_for(token))


def _admit(state: ServerState, principal: Principal) -> None:
    wait = state.limiter.take(principal.tenant)
    if wait > 0:
        raise Refused(429, f"too many requests from this tenant; try again in {wait:.0f} s")


def same_site(request: Request) -> bool:
    """Whether the browser says the request came from this site (or says nothing)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


def check_form(request: Request, viewer: Viewer, token: object) -> None:
    """Refuse a form sent from another site or without the session's CSRF token.

    Raises:
        Refused: 403.
    """
    if not same_site(request):
        raise Refused(403, "this form was sent from another site; it was not applied")
    if not isinstance(token, str) or not hmac.compare_digest(token, viewer.csrf):
        raise Refused(403, "the form has expired (reload the page and send it again)")
