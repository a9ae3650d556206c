"""The web UI under ``/ui``: see, search and correct what an agent remembers.

Server-rendered pages (Jinja2), a stylesheet and no script that a page needs to be read.
``memdir serve`` serves it to each tenant with the tenant's API keys (a login takes a key);
``memdir ui`` serves it to one person on loopback without a key. The modules, one page
family each:

- :mod:`._session` and :mod:`._login`: who is looking, the session cookie, CSRF;
- :mod:`._render`, :mod:`._pages`, :mod:`._links`, :mod:`._blocks`: what pages share;
- :mod:`._overview`: the namespaces and their state;
- :mod:`._memory`: ``MEMORY.md`` with each bullet's provenance;
- :mod:`._history`, :mod:`._edit`, :mod:`._diff`: ``MEMORY.md``'s versions, their diffs,
  editing it and restoring a version.
- :mod:`._forget`, :mod:`._delete` and :mod:`._keys`: forgetting a fact (previewed, then
  confirmed), deleting a namespace, and the tenant's API keys.
- :mod:`._ledgers`: the daily ledgers, and a memory file at a line (:mod:`._sources`,
  :mod:`._paging`);
- :mod:`._sessions`: the logged sessions, searched, and one read as a transcript
  (:mod:`._transcript`);
- :mod:`._search`: memory and sessions searched as the agent does, the matched words
  marked (:mod:`._highlight`).
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from memdir.server.ui._render import error_page, redirect
from memdir.server.ui._session import LoginRequired, Refused

__all__ = ["install_ui"]


def _routers() -> list[object]:
    from memdir.server.ui import (
        _delete,
        _edit,
        _forget,
        _history,
        _keys,
        _ledgers,
        _login,
        _memory,
        _overview,
        _search,
        _sessions,
    )

    return [
        _login.router,
        _overview.router,
        _memory.router,
        _history.router,
        _edit.router,
        _ledgers.router,
        _sessions.router,
        _search.router,
        _forget.router,
        _delete.router,
        _keys.router,
    ]


async def _login_required(request: Request, exc: Exception) -> Response:
    target = request.url.path
    if request.method == "GET" and request.url.query:
        target += "?" + request.url.query
    return redirect("/ui/login?" + urlencode({"next": target}))


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return error_page(request, None, exc.status, exc.message)


async def _not_found(request: Request) -> Response:
    return error_page(request, None, 404, "no such page")


def install_ui(app: FastAPI) -> None:
    """Serve the UI's pages under ``/ui`` of ``app``."""
    for router in _routers():  # the routes themselves (not include_router: a walk sees them)
        app.router.routes.extend(router.routes)  # type: ignore[attr-defined]
    app.add_api_route("/ui", lambda: redirect("/ui/"), include_in_schema=False)
    app.add_api_route(
        "/ui/{rest:path}", _not_found, methods=["GET", "POST"], include_in_schema=False
    )
    app.add_exception_handler(LoginRequired, _login_required)
    app.add_exception_handler(Refused, _refused)
