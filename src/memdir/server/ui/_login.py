"""Logging in and out, and the UI's static files."""

from __future__ import annotations

from importlib import resources
from typing import Final

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memdir.server.auth import AuthError
from memdir.server.problems import ProblemError
from memdir.server.state import server_state
from memdir.server.ui._render import page, redirect, secured
from memdir.server.ui._session import (
    COOKIE,
    SECURE_COOKIE,
    Refused,
    cookie_name,
    same_site,
)

__all__ = ["router"]

router = APIRouter(prefix="/ui", include_in_schema=False)

_STATIC: Final = {"ui.css": "text/css; charset=utf-8"}
"""The files under ``/ui/static/`` (the pages need no script)."""
_MAX_KEY: Final = 8192


def _next(value: object) -> str:
    """Where to go after logging in: a page of this UI, never another site."""
    if (
        isinstance(value, str)
        and value.startswith("/ui/")
        and "//" not in value
        and "\\" not in value
    ):
        return value
    return "/ui/"


@router.get("/login")
async def login_form(request: Request, next: str = "/ui/") -> Response:
    """The login page (``memdir ui`` needs none)."""
    if server_state(request).settings.ui_local:
        return redirect("/ui/")
    return page(request, "login.html", None, title="Log in", next=_next(next), message=None)


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the key and start a session: an ``HttpOnly``, ``SameSite=Strict`` cookie."""
    from memdir.server.policy import authenticate

    state = server_state(request)
    if state.settings.ui_local:
        return redirect("/ui/")
    if not same_site(request):
        raise Refused(403, "this form was sent from another site; it was not applied")
    form = await request.form(max_files=0, max_fields=8)
    key = form.get("key")
    target = _next(form.get("next"))
    token = key.strip() if isinstance(key, str) else ""
    message = None
    if not token:
        message = "paste an API key (memdir keys create makes one)"
    elif len(token) > _MAX_KEY:
        message = "that is not a key"
    else:
        try:
            await authenticate(state, token)
        except AuthError as exc:
            message = {
                "revoked": "that key was revoked",
                "expired": "that key has expired",
            }.get(exc.reason, "that key is not valid")
        except ProblemError:
            message = "the keys cannot be read now; try again soon"
    if message is not None:
        return page(
            request, "login.html", None, status=401, title="Log in", next=target, message=message
        )
    response = redirect(target)
    response.set_cookie(
        cookie_name(request),
        token,
        httponly=True,
        secure=request.url.scheme == "https",
        samesite="strict",
        path="/",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session (the cookie is cleared; the key itself stays valid)."""
    if not same_site(request):
        raise Refused(403, "this form was sent from another site; it was not applied")
    response = redirect("/ui/login")
    for name in (COOKIE, SECURE_COOKIE):
        response.delete_cookie(
            name, path="/", secure=name == SECURE_COOKIE, httponly=True, samesite="strict"
        )
    return response


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """The UI's stylesheet (in the package: nothing is fetched from elsewhere)."""
    media = _STATIC.get(name)
    if media is None:
        raise Refused(404, "no such file")
    data = resources.files("memdir.server.ui").joinpath("static", name).read_bytes()
    response = secured(Response(data, media_type=media))
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response
