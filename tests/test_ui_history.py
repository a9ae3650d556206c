"""MEMORY.md's history, diff, editing and restore pages, in a real browser and over HTTP:
an edit made by a person shows in the history as theirs, the diff marks what it added, a
restore brings the earlier version back, an edit from a stale tab is refused with the diff and
the person's text kept, and a read key, another tenant or a crafted version name changes
nothing."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest

from _browser import Page
from _ui import NS, OTHER_FACT, OTHER_NS, UiServer, ui_server

SAME_SITE = {"Sec-Fetch-Site": "same-origin"}


@pytest.fixture(scope="module", params=["files", "postgres"])
def ui(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UiServer]:
    yield from ui_server(request, tmp_path_factory)


def _wait_path(page: Page, start: str) -> None:
    """Wait until the browser shows a page whose path starts with ``start``."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page.driver, 60).until(lambda _: page.path.startswith(start))
    page.assert_nothing_ran()


def _append(page: Page, line: str) -> None:
    """Add ``line`` at the end of the editor's text."""
    from selenium.webdriver.common.keys import Keys

    field = page.find("#text")
    field.send_keys(Keys.CONTROL, Keys.END)
    field.send_keys(line + "\n")


def _save(page: Page, expect: str) -> None:
    page.go(page.find("form.edit button[type=submit]"))
    _wait_path(page, expect)


def test_an_edit_shows_as_a_persons_version_whose_diff_marks_it_and_a_restore_undoes_it(
    ui: UiServer, page: Page
) -> None:
    bullet = "- Deploys happen on Fridays; <script>alert('x')</script> stays text"
    page.login(ui.key("acme_write"))
    page.open(f"/ui/ns/{NS}/")
    before = page.text(".doc")
    page.click_link("Edit")
    assert page.path == f"/ui/ns/{NS}/edit"
    _append(page, bullet)
    page.screenshot("edit")
    _save(page, f"/ui/ns/{NS}/?notice=saved")
    assert "MEMORY.md is saved" in page.text(".notice")
    assert bullet[2:] in page.text(".doc")  # the <script> is shown as the text it is

    page.open(f"/ui/ns/{NS}/history")
    now, previous = page.all("table.versions tbody tr")[:2]
    assert "MEMORY.md now" in now.text and "a person" in now.text
    assert "consolidation" in previous.text  # the seeded file, consolidated from the ingest
    assert "replaced" in page.text("table.runs") and "applied" in page.text("table.runs")
    page.screenshot("history")

    page.click_link("Compare with the previous version")
    added = [e.text for e in page.all(".diff .add")]
    assert added == [f"+{bullet}"], added
    assert not page.all(".diff .del")
    assert page.all(".diff .ctx")
    page.screenshot("diff")

    page.go(page.find("form.restore button"))
    _wait_path(page, f"/ui/ns/{NS}/?notice=restored")
    assert "earlier version is MEMORY.md again" in page.text(".notice")
    assert page.text(".doc") == before
    page.open(f"/ui/ns/{NS}/history")
    newest = page.all("table.versions tbody tr")[1]  # the edited file, now kept
    assert "a person" in newest.text
    page.click_link("Compare with now")
    removed = [e.text for e in page.all(".diff .del")]
    assert removed == [f"-{bullet}"], removed


def test_a_save_from_a_stale_tab_is_refused_with_the_diff_and_the_text_kept(
    ui: UiServer, page: Page
) -> None:
    page.login(ui.key("acme_write"))
    page.open(f"/ui/ns/{NS}/edit")
    first = page.driver.current_window_handle
    page.driver.switch_to.new_window("tab")
    try:
        page.open(f"/ui/ns/{NS}/edit")
        _append(page, "- Saved in the second tab")
        _save(page, f"/ui/ns/{NS}/?notice=saved")
    finally:
        page.driver.close()
        page.driver.switch_to.window(first)
    _append(page, "- Written in the first tab")
    _save(page, f"/ui/ns/{NS}/edit")
    assert "changed by someone else" in page.text("#edit-error")
    assert [e.text for e in page.all(".diff .add")] == ["+- Written in the first tab"]
    assert [e.text for e in page.all(".diff .del")] == ["-- Saved in the second tab"]
    kept = page.find("#text").get_attribute("value")
    assert "- Written in the first tab" in kept and "- Saved in the second tab" not in kept
    page.screenshot("edit-conflict")
    page.open(f"/ui/ns/{NS}/")
    assert "Saved in the second tab" in page.text(".doc")
    assert "Written in the first tab" not in page.text(".doc")


# -- over HTTP ---------------------------------------------------------------------------------


def _client(ui: UiServer, key: str) -> Any:
    client = ui.served.client()
    client.cookies.set("memdir_ui", ui.key(key))
    return client


def _memory(client: Any, ns: str = NS) -> str:
    """MEMORY.md of ``ns`` as the editor holds it."""
    shown = client.get(f"/ui/ns/{ns}/edit")
    assert shown.status_code == 200
    found = re.search(r"<textarea[^>]*>\n(.*?)</textarea>", shown.text, re.S)
    assert found is not None
    return html.unescape(found[1])


def _csrf(client: Any) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/ui/").text)
    assert found is not None
    return found[1]


def test_a_read_key_can_neither_edit_nor_restore(ui: UiServer) -> None:
    with _client(ui, "acme_write") as writer:
        text = _memory(writer)
        (kept, *_) = re.findall(
            r'name="version" value="(MEMORY\.[^"]+)"', writer.get(f"/ui/ns/{NS}/history").text
        )
    with _client(ui, "acme_read") as client:
        assert client.get(f"/ui/ns/{NS}/edit").status_code == 403
        assert client.get(f"/ui/ns/{NS}/history").status_code == 200  # reading is allowed
        assert 'action="/ui/ns/acme.alice/restore"' not in client.get(f"/ui/ns/{NS}/history").text
        csrf = _csrf(client)
        edit = client.post(
            f"/ui/ns/{NS}/edit",
            data={"csrf": csrf, "version": "", "text": "- taken over\n"},
            headers=SAME_SITE,
        )
        assert edit.status_code == 403 and "write scope" in edit.text
        restore = client.post(
            f"/ui/ns/{NS}/restore",
            data={"csrf": csrf, "version": kept, "base": ""},
            headers=SAME_SITE,
        )
        assert restore.status_code == 403
    with _client(ui, "acme_write") as writer:
        assert _memory(writer) == text


def test_a_version_name_that_leaves_the_history_is_refused(ui: UiServer) -> None:
    with _client(ui, "acme_write") as client:
        text = _memory(client)
        for name in (
            "../MEMORY.md",
            "..%2F..%2Fetc%2Fpasswd",
            "MEMORY.md",
            "consolidation.log.jsonl",
        ):
            answer = client.get(f"/ui/ns/{NS}/history/diff?a={name}&b=current")
            assert answer.status_code == 400, name
            assert "a version is" in answer.text
        missing = client.get(f"/ui/ns/{NS}/history/diff?a=MEMORY.20200101T000000.000000Z.md")
        assert missing.status_code == 404
        restore = client.post(
            f"/ui/ns/{NS}/restore",
            data={"csrf": _csrf(client), "version": "../../MEMORY.md", "base": ""},
            headers=SAME_SITE,
        )
        assert restore.status_code == 400
        assert _memory(client) == text


def test_another_tenants_memory_md_cannot_be_edited_or_restored(ui: UiServer) -> None:
    with _client(ui, "acme_admin") as client:
        csrf = _csrf(client)
        for path, data in (
            ("edit", {"version": "", "text": "- overwritten\n"}),
            ("restore", {"version": "MEMORY.20200101T000000.000000Z.md", "base": ""}),
        ):
            answer = client.post(
                f"/ui/ns/{OTHER_NS}/{path}", data={"csrf": csrf, **data}, headers=SAME_SITE
            )
            assert answer.status_code == 404, path
            assert OTHER_FACT not in answer.text
    with _client(ui, "beta_write") as owner:
        assert "overwritten" not in _memory(owner, OTHER_NS)


def test_a_stale_restore_a_stale_token_a_secret_and_an_oversized_text(ui: UiServer) -> None:
    with _client(ui, "acme_write") as client:
        csrf = _csrf(client)
        text = _memory(client)
        fields = dict(
            re.findall(
                r'name="(version|base)" value="([^"]*)"', client.get(f"/ui/ns/{NS}/history").text
            )
        )
        stale = client.post(
            f"/ui/ns/{NS}/restore",
            data={"csrf": csrf, "version": fields["version"], "base": "not-the-version"},
            headers=SAME_SITE,
        )
        assert stale.status_code == 409 and "nothing was restored" in stale.text
        assert 'class="diff"' in stale.text
        expired = client.post(
            f"/ui/ns/{NS}/edit",
            data={"csrf": "0" * 64, "version": "", "text": "- lost\n"},
            headers=SAME_SITE,
        )
        assert expired.status_code == 403
        assert _memory(client) == text

        version = re.search(r'name="version" value="([^"]*)"', client.get(f"/ui/ns/{NS}/edit").text)
        assert version is not None
        huge = text + "- " + "x" * (300 * 1024) + "\n"
        big = client.post(
            f"/ui/ns/{NS}/edit",
            data={"csrf": csrf, "version": version[1], "text": huge},
            headers=SAME_SITE,
        )
        assert big.status_code == 400 and "the limit is 262,144" in big.text
        assert "x" * (300 * 1024) in big.text  # what the person wrote is still in the editor

        secret = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vXy4zA7cD0f"
        saved = client.post(
            f"/ui/ns/{NS}/edit",
            data={"csrf": csrf, "version": version[1], "text": text + f"- key {secret}\n"},
            headers=SAME_SITE,
            follow_redirects=False,
        )
        assert saved.status_code == 303, saved.text
        shown = client.get(saved.headers["location"])
        assert "1 secret(s) in the text were masked" in shown.text
        assert secret not in _memory(client) and secret not in shown.text


def test_many_versions_and_runs_are_paginated(ui: UiServer) -> None:
    with _client(ui, "acme_write") as client:
        csrf, text = _csrf(client), _memory(client)
        for n in range(31):
            version = re.search(
                r'name="version" value="([^"]*)"', client.get(f"/ui/ns/{NS}/edit").text
            )
            assert version is not None
            saved = client.post(
                f"/ui/ns/{NS}/edit",
                data={"csrf": csrf, "version": version[1], "text": text + f"- edit {n}\n"},
                headers=SAME_SITE,
                follow_redirects=False,
            )
            assert saved.status_code == 303
        first = client.get(f"/ui/ns/{NS}/history")
        assert "page 1 of 2" in first.text and first.text.count("a person") >= 20
        assert "Older versions" in first.text and "Older runs" in first.text
        rows = re.findall(r"<tr>\s*<th scope=\"row\">", first.text)
        older = client.get(f"/ui/ns/{NS}/history?versions=2&runs=2")
        assert older.status_code == 200
        assert "Newer versions" in older.text and "Newer runs" in older.text
        assert len(rows) == 20 + 30  # a page of versions and a page of runs
        assert client.get(f"/ui/ns/{NS}/history?versions=999").status_code == 200
        assert client.get(f"/ui/ns/{NS}/history?versions=-1").status_code == 400
