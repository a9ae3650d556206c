"""Forgetting in the web UI, in a real browser and over HTTP, on both stores: a fact previewed
(every place it lives) then erased and gone from search, text that is not there, a read key
that cannot erase, a plan that changed since its preview, a namespace deleted only by an
admin who types its name, and ``memdir ui`` refusing to delete the workspace itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from _browser import Page
from _server import memdir
from _ui import CHINESE_FACT, NS, OTHER_FACT, OTHER_NS, UiServer, ui_server
from memdir.server.app import create_app
from memdir.server.settings import ServerSettings

SAME_SITE = {"Sec-Fetch-Site": "same-origin"}


@pytest.fixture(scope="module", params=["files", "postgres"])
def ui(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UiServer]:
    yield from ui_server(request, tmp_path_factory)


def field(html: str, name: str) -> str:
    """The value of the first form field ``name`` of a page."""
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no field {name}"
    return found[1]


def search_texts(ui: UiServer, ns: str, query: str) -> list[str]:
    """What the REST search of ``ns`` finds for ``query`` (memory and sessions)."""
    with ui.served.client("acme_admin") as client:
        answer = client.get(
            f"/v1/namespaces/{ns}/search",
            params={"q": query, "sources": ["memory", "sessions"]},
        )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return [str(hit) for hit in body["hits"] + body["session_hits"]]


def place_paths(page: Page) -> list[str]:
    """The files a preview or a report lists."""
    return [row.find_element("css selector", "th").text for row in page.all(".place")]


def add(ui: UiServer, ns: str, text: str) -> None:
    memdir("-w", ui.served.workspace, "--namespace", ns, "add", text)


def test_a_bullets_forget_link_previews_it_and_erases_nothing(ui: UiServer, page: Page) -> None:
    page.login(ui.key("acme_write")).open(f"/ui/ns/{NS}/")
    bullet = page.find(".bullet")
    text = bullet.find_element("css selector", ".bullet-text").text
    page.go(bullet.find_element("partial link text", "forget"))
    page.assert_nothing_ran()
    assert page.path.startswith(f"/ui/ns/{NS}/forget?citation=MEMORY.md%23L")
    assert [f.text for f in page.all(".fact")] == [text]
    assert "MEMORY.md" in place_paths(page)
    page.open(f"/ui/ns/{NS}/")
    assert text in page.text(".doc"), "a preview erases nothing"


def test_text_that_is_not_there_is_said_so_and_nothing_changes(ui: UiServer, page: Page) -> None:
    hostile = "<script>alert('forget')</script> a fact nobody said"
    page.login(ui.key("acme_write"))
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_write"))
        shown = client.get(f"/ui/ns/{NS}/forget", params={"text": hostile})
        assert shown.status_code == 200 and 'id="nothing"' in shown.text
        assert 'name="plan"' not in shown.text, "nothing to confirm"
        answer = client.post(
            f"/ui/ns/{NS}/forget",
            data={"csrf": field(shown.text, "csrf"), "text": hostile, "plan": "0" * 64},
            headers=SAME_SITE,
        )
    assert answer.status_code == 200 and 'id="nothing"' in answer.text
    assert "Forgotten" not in answer.text
    page.open(f"/ui/ns/{NS}/forget?text={quote(hostile)}")
    assert "nothing to forget" in page.text("#nothing")
    assert page.find("#f-text").get_attribute("value") == hostile


def test_a_read_key_sees_the_preview_but_cannot_erase(ui: UiServer) -> None:
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_read"))
        shown = client.get(f"/ui/ns/{NS}/forget", params={"text": CHINESE_FACT})
        assert shown.status_code == 200
        assert 'class="place"' in shown.text and 'name="plan"' not in shown.text
        answer = client.post(
            f"/ui/ns/{NS}/forget",
            data={"csrf": field(shown.text, "csrf"), "text": CHINESE_FACT, "plan": "x"},
            headers=SAME_SITE,
        )
        assert answer.status_code == 403
        client.cookies.set("memdir_ui", ui.key("acme_admin"))
        shown = client.get(f"/ui/ns/{NS}/forget", params={"text": "binder"})
        other = client.post(
            f"/ui/ns/{OTHER_NS}/forget",
            data={"csrf": field(shown.text, "csrf"), "text": OTHER_FACT, "plan": "x"},
            headers=SAME_SITE,
        )
        assert other.status_code == 404 and OTHER_FACT not in other.text
    assert any("小橘" in hit for hit in search_texts(ui, NS, CHINESE_FACT))
    assert any("binder" in hit for hit in search_texts_of_beta(ui))


def search_texts_of_beta(ui: UiServer) -> list[str]:
    with ui.served.client("beta_write") as client:
        body = client.get(f"/v1/namespaces/{OTHER_NS}/search", params={"q": "binder"}).json()
    return [str(hit) for hit in body["hits"]]


def test_a_plan_that_changed_since_its_preview_is_shown_again_not_erased(ui: UiServer) -> None:
    ns = "acme.stale"
    add(ui, ns, "Dora's locker code is 5521.")
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_write"))
        seen = client.get(f"/ui/ns/{ns}/forget", params={"text": "locker code is 5521"})
        assert seen.text.count('class="place"') >= 1
        add(ui, ns, "Dora repeated it: the locker code is 5521, not 5512.")  # after the preview
        form = {
            "csrf": field(seen.text, "csrf"),
            "text": "locker code is 5521",
            "plan": field(seen.text, "plan"),
        }
        stale = client.post(f"/ui/ns/{ns}/forget", data=form, headers=SAME_SITE)
        assert stale.status_code == 409 and 'id="changed"' in stale.text
        assert len(search_texts(ui, ns, "locker 5521")) == 2, "nothing was erased"
        assert field(stale.text, "plan") != form["plan"]
        form["plan"] = field(stale.text, "plan")
        done = client.post(f"/ui/ns/{ns}/forget", data=form, headers=SAME_SITE)
    assert done.status_code == 200 and 'id="report"' in done.text
    assert search_texts(ui, ns, "locker 5521") == []


def test_deleting_a_namespace_takes_an_admin_and_its_name_typed(ui: UiServer, page: Page) -> None:
    ns = "acme.gone"
    add(ui, ns, "Eve's bike is blue.")
    with ui.served.client() as client:
        client.cookies.set("memdir_ui", ui.key("acme_write"))
        assert client.get(f"/ui/ns/{ns}/delete").status_code == 403
        shown = client.get(f"/ui/ns/{ns}/forget")
        refused = client.post(
            f"/ui/ns/{ns}/delete",
            data={"csrf": field(shown.text, "csrf"), "confirm": ns},
            headers=SAME_SITE,
        )
        assert refused.status_code == 403
    page.login(ui.key("acme_admin")).open(f"/ui/ns/{ns}/forget")
    page.click_link("delete the namespace")
    assert page.path == f"/ui/ns/{ns}/delete"
    page.screenshot("namespace-delete")
    page.find("#confirm").send_keys("acme.gon")
    page.go(page.find("#delete"))
    page.assert_nothing_ran()
    assert "nothing was deleted" in page.text("#confirm-error")
    page.find("#confirm").send_keys(ns)
    page.go(page.find("#delete"))
    page.assert_nothing_ran()
    assert page.path.startswith("/ui/deleted?")
    assert ns in page.text("#deleted")
    assert NS in page.text("table.overview")
    with ui.served.client("acme_admin") as client:
        names = [n["name"] for n in client.get("/v1/namespaces").json()["items"]]
    assert ns not in names and NS in names


def test_a_person_forgets_the_chinese_fact_everywhere(ui: UiServer, page: Page) -> None:
    """Last in the module: the fact is gone for the tests after it."""
    assert any("小橘" in hit for hit in search_texts(ui, NS, CHINESE_FACT))
    page.login(ui.key("acme_write")).open(f"/ui/ns/{NS}/forget")
    page.find("#f-text").send_keys(CHINESE_FACT)
    page.go(page.find("#f-text"), submit=True)
    page.assert_nothing_ran()
    places = place_paths(page)
    assert any(re.fullmatch(r"memory/\d{4}-\d{2}-\d{2}\.md", p) for p in places), places
    assert CHINESE_FACT in page.text(".facts")
    page.screenshot("forget-preview")
    page.go(page.find("#erase"))
    page.assert_nothing_ran()
    assert "Forgotten" in page.text("h1")
    assert set(places) <= set(place_paths(page)), "the report names every place of the preview"
    page.screenshot("forget-report")
    assert not any("小橘" in hit for hit in search_texts(ui, NS, CHINESE_FACT))
    assert not any("小橘" in hit for hit in search_texts(ui, NS, "小橘"))


def test_memdir_ui_does_not_delete_the_workspace_itself(tmp_path: Path) -> None:
    memdir("-w", str(tmp_path / "ws"), "add", "The workspace's own fact.")
    settings = ServerSettings(workspace=str(tmp_path / "ws"), maintenance=False, ui_local=True)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        assert client.get("/ui/ns/_/delete").status_code == 400
        csrf = field(client.get("/ui/keys").text, "csrf")
        answer = client.post("/ui/ns/_/delete", data={"csrf": csrf, "confirm": "_"})
        assert answer.status_code == 400
        assert "only a namespace" in answer.text
    assert sorted(p.name for p in (tmp_path / "ws" / "memory").glob("*.md")), "kept"
