"""Pages: the Jinja2 environment, the headers every page carries, redirects and error pages.

Every template is autoescaped (memory text, file names, queries and summaries are always
shown as text); the Content-Security-Policy allows no inline script, no other origin, no
frame; pages are never cached (they show private memory) and send no referrer (a search's
query is in its URL).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from memdir import __version__
from memdir.server.ui._links import cite_url, ns_url
from memdir.server.ui._session import Viewer

__all__ = ["SECURITY_HEADERS", "error_page", "page", "redirect", "secured"]

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def _size(value: int | None) -> str:
    if value is None:
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError  # pragma: no cover


def _when(value: datetime | str | None) -> str:
    if value is None or value == "":
        return "never"
    if isinstance(value, str):
        return value.replace("T", " ").removesuffix("Z") + " UTC"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of the UI (autoescaped, undefined names are errors)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memdir.server.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["size"] = _size
    env.filters["when"] = _when
    env.filters["q"] = lambda value: quote(str(value), safe="")
    env.globals["version"] = __version__
    env.globals["cite_url"] = cite_url
    env.globals["ns_url"] = ns_url
    return env


def secured(response: Response) -> Response:
    """``response`` with the headers every UI answer carries."""
    response.headers.update(SECURITY_HEADERS)
    return response


def page(
    request: Request,
    template: str,
    viewer: Viewer | None,
    *,
    status: int = 200,
    title: str = "",
    ns: str | None = None,
    **context: Any,
) -> Response:
    """The page ``template`` rendered for ``viewer`` (``None``: logged out)."""
    html = (
        environment()
        .get_template(template)
        .render(request=request, viewer=viewer, title=title, ns=ns, **context)
    )
    return secured(HTMLResponse(html, status_code=status))


def error_page(request: Request, viewer: Viewer | None, status: int, message: str) -> Response:
    """An error page saying ``message`` (one line, never a stack trace)."""
    return page(
        request, "error.html", viewer, status=status, title=f"Error {status}", message=message
    )


def redirect(url: str) -> Response:
    """A 303 to ``url`` (a path of this UI), after a form or to the login page."""
    if not url.startswith("/ui") or url.startswith("//"):
        url = "/ui/"
    return secured(RedirectResponse(url, status_code=303))
