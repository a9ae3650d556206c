"""The UI's sessions in a real browser and over HTTP: logging in and out with a key, a
tenant that sees only its own namespaces whatever URL it types, forms that need the
session's CSRF token, and the headers that keep stored text from running."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag

import pytest
from fastapi.routing import APIRoute
from starlette.testclient import TestClient

from _browser import Page
from _server import memdir
from _ui import NS, OTHER_FACT, OTHER_NS, UiServer, anonymous_get, ui_server
from memdir.memory import MemoryConsolidator
from memdir.server.app import create_app
from memdir.server.settings import ServerSettings
from memdir.testing import FunctionModel, ModelCall
from test_server_route_policy import UI_PUBLIC


@pytest.fixture(scope="module", params=["files", "postgres"])
def ui(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UiServer]:
    yield from ui_server(request, tmp_path_factory)


def test_a_page_without_a_session_asks_for_a_login_and_comes_back_after_it(
    ui: UiServer, page: Page
) -> None:
    page.open(f"/ui/ns/{NS}/")
    assert page.path.startswith("/ui/login?next=")
    page.screenshot("login")
    field = page.find("#key")
    field.send_keys(ui.key("acme_read"))
    page.go(field, submit=True)
    assert page.path == f"/ui/ns/{NS}/"
    assert "MEMORY.md" in page.text("h1")
    assert page.all(".bullet"), "the ingested conversations were consolidated into bullets"
    page.screenshot("memory")
    page.click_link("sources (1)")
    assert page.path.startswith(f"/ui/ns/{NS}/why?at=MEMORY.md")
    assert page.all(".chain .sources .cite"), "a consolidated bullet cites its ledger line"
    page.screenshot("why")


def test_a_wrong_or_revoked_key_is_refused_with_a_reason(ui: UiServer, page: Page) -> None:
    page.login("mdk_nothere_" + "x" * 40)
    assert page.path.startswith("/ui/login")
    assert "not valid" in page.text("#login-error")
    page.open("/ui/")
    assert page.path.startswith("/ui/login")


def test_the_overview_lists_only_the_tenants_own_namespaces(ui: UiServer, page: Page) -> None:
    page.login(ui.key("acme_read"))
    assert page.path == "/ui/"
    table = page.text("table.overview")
    assert NS in table
    assert OTHER_NS not in table
    page.screenshot("overview")


def test_another_tenants_urls_show_nothing_of_its_memory(ui: UiServer, page: Page) -> None:
    page.login(ui.key("acme_admin"))
    for path in (
        f"/ui/ns/{OTHER_NS}/",
        f"/ui/ns/{OTHER_NS}/why?at=memory%2F2026-01-01.md%23L1",
        f"/ui/ns/{OTHER_NS}/history",
        f"/ui/ns/{OTHER_NS}/ledgers",
        f"/ui/ns/{OTHER_NS}/sessions",
        f"/ui/ns/{OTHER_NS}/search?q=binder",
        f"/ui/ns/{OTHER_NS}/forget",
        "/ui/ns/_/",
        "/ui/ns/..%2F..%2Fetc/",
    ):
        page.open(path)
        shown = page.driver.page_source
        assert OTHER_FACT not in shown and "binder" not in shown.replace("q=binder", ""), path
        assert "Error 404" in page.text("h1"), path


def test_logging_out_ends_the_session(ui: UiServer, page: Page) -> None:
    page.login(ui.key("acme_read"))
    assert page.path == "/ui/"
    page.logout()
    assert page.path.startswith("/ui/login")
    page.open(f"/ui/ns/{NS}/")
    assert page.path.startswith("/ui/login")


def test_the_session_cookie_is_httponly_and_strict(ui: UiServer, page: Page) -> None:
    page.login(ui.key("acme_read"))
    cookies = {c["name"]: c for c in page.driver.get_cookies()}
    cookie = cookies["memdir_ui"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert page.driver.execute_script("return document.cookie") == ""


def test_every_page_needs_a_session(ui: UiServer) -> None:
    for path in ("/ui/", f"/ui/ns/{NS}/", f"/ui/ns/{NS}/why?at=MEMORY.md%23L4"):
        answer = anonymous_get(ui, path)
        assert answer.status_code == 303, path
        assert answer.headers["location"].startswith("/ui/login?next="), path


def test_a_page_carries_headers_that_keep_stored_text_from_running(ui: UiServer) -> None:
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_read"))
        answer = client.get(f"/ui/ns/{NS}/")
    assert answer.status_code == 200
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["referrer-policy"] == "no-referrer"


def test_a_form_from_another_site_or_without_its_token_is_refused(ui: UiServer) -> None:
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_read"))
        cross = client.post("/ui/logout", headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
        forged = client.post(
            "/ui/login",
            data={"key": ui.key("beta_write")},
            headers={"Origin": "https://evil.example"},
        )
        assert forged.status_code == 403
        assert "memdir_ui" not in forged.headers.get("set-cookie", "")


def test_a_next_page_off_the_site_is_not_followed(ui: UiServer) -> None:
    with ui.served.client() as client:
        for target in ("https://evil.example/", "//evil.example/ui/", "/ui/\\\\evil.example"):
            answer = client.post(
                "/ui/login",
                data={"key": ui.key("acme_read"), "next": target},
                follow_redirects=False,
            )
            assert answer.status_code == 303
            assert answer.headers["location"] == "/ui/", target


def test_every_page_of_the_application_asks_for_a_login(tmp_path: Path) -> None:
    """Walks every UI route of the application (pages added later included)."""
    app = create_app(ServerSettings(workspace=str(tmp_path / "ws"), maintenance=False))
    pages = [
        r
        for r in app.routes
        if isinstance(r, APIRoute)
        and r.path.startswith("/ui/")
        and r.path not in UI_PUBLIC
        and "GET" in (r.methods or ())
    ]
    assert len(pages) >= 3
    with TestClient(app) as client:
        for route in pages:
            path = route.path.replace("{ns}", NS)
            path = re.sub(r"\{[^}]+\}", "x", path)
            answer = client.get(path, follow_redirects=False)
            assert answer.status_code == 303, route.path
            assert answer.headers["location"].startswith("/ui/login?next="), route.path


def test_without_the_ui_no_page_is_served(tmp_path: Path) -> None:
    """``memdir serve --no-ui``."""
    app = create_app(ServerSettings(workspace=str(tmp_path / "ws"), maintenance=False, ui=False))
    assert not [r for r in app.routes if getattr(r, "path", "").startswith("/ui")]
    with TestClient(app) as client:
        assert client.get("/ui/login").status_code == 404


def test_the_overview_shows_a_consolidation_that_failed_and_why(ui: UiServer, page: Page) -> None:
    """A model that answers nothing: the run is logged as failed, and the overview says so."""
    ns = "acme.failing"
    ws = ui.served.local(ns)
    ws.init()
    ws.append_text(f"memory/{ws.today().isoformat()}.md", "- The build server is ci-7\n")

    def blank(call: ModelCall) -> str:
        return ""

    done = asyncio.run(MemoryConsolidator(ws, FunctionModel(blank, name="blank")).consolidate())
    assert done.skipped == "blank_answer"
    page.login(ui.key("acme_read"))
    row = next(r for r in page.all("table.overview tbody tr") if ns in r.text)
    assert "failed" in row.text and "blank_answer" in row.text


def test_every_page_works_with_a_keyboard_and_a_screen_reader(ui: UiServer, page: Page) -> None:
    """Crawls the namespace's pages (and the overview, keys and login) for labels, names,
    one h1, a language and the keyboard order."""
    page.login(ui.key("acme_admin"))
    queue, seen, problems = deque(["/ui/", "/ui/keys", f"/ui/ns/{NS}/"]), set(), {}
    while queue and len(seen) < 60:
        path = queue.popleft()
        if path in seen:
            continue
        seen.add(path)
        page.open(path)
        found = page.accessibility_problems()
        if found:
            problems[path] = found
        for href in page.links():
            local = urldefrag(href)[0]
            if local.startswith(f"/ui/ns/{NS}/") and local not in seen:
                queue.append(local)
    assert len(seen) >= 15, seen
    assert problems == {}
    page.logout()
    assert page.accessibility_problems() == []  # the login page


def test_a_search_linked_without_a_namespace_asks_which_or_opens_it(ui: UiServer) -> None:
    memdir("-w", ui.served.workspace, "--namespace", "acme.second", "add", "a second namespace")
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_read"))
        chooser = client.get("/ui/search", params={"q": "小橘"}, follow_redirects=False)
        assert chooser.status_code == 200
        assert f"/ui/ns/{NS}/search?q=" in chooser.text and OTHER_NS not in chooser.text
        opened = client.get("/ui/search", params={"q": "小橘", "ns": NS}, follow_redirects=False)
        assert opened.status_code == 303
        assert opened.headers["location"].startswith(f"/ui/ns/{NS}/search?q=")
        refused = client.get("/ui/search", params={"q": "binder", "ns": OTHER_NS})
        assert refused.status_code == 404 and "binder" not in refused.text.replace("q=", "")
        client.cookies.set("memdir_ui", ui.key("alice_only"))  # one namespace: opened at once
        only = client.get("/ui/search", params={"q": "猫"}, follow_redirects=False)
        assert only.status_code == 303 and only.headers["location"].startswith(f"/ui/ns/{NS}/")


def test_only_the_stylesheet_is_served_as_a_static_file(tmp_path: Path) -> None:
    app = create_app(ServerSettings(workspace=str(tmp_path / "ws"), maintenance=False))
    with TestClient(app) as client:
        css = client.get("/ui/static/ui.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert "nosniff" in css.headers["x-content-type-options"]
        for name in ("ui.js", "..%2F_login.py", "%2E%2E", "templates%2Fbase.html"):
            assert client.get(f"/ui/static/{name}").status_code == 404, name
