"""``memdir ui``: the web UI for one person on loopback, without a key, as a real process."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _browser import Page, browser
from _server import launched, memdir

READY = re.compile(r"memdir ui: open (http://\S+)/ui/")
FACT = "The release train leaves on Thursdays"
NAMESPACED = "Alice reviews the 发布 checklist"


@pytest.fixture(scope="module")
def local_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ws = str(tmp_path_factory.mktemp("local") / "ws")
    memdir("-w", ws, "add", FACT)
    memdir("-w", ws, "consolidate")
    memdir("-w", ws, "--namespace", "acme.alice", "add", NAMESPACED)
    with launched(["ui", "-w", ws, "--port", "0"], READY) as url:
        yield url


def test_the_workspace_and_its_namespaces_are_shown_without_a_key(local_ui: str) -> None:
    with browser() as driver:
        page = Page(driver, local_ui).open("/ui/")
        table = page.text("table.overview")
        assert "this workspace" in table and "acme.alice" in table
        page.click_link("this workspace")
        assert FACT in page.text(".doc")
        page.open("/ui/ns/acme.alice/ledgers")
        page.open("/ui/login")
        assert page.path == "/ui/", "no login in memdir ui"


def test_a_page_asked_for_by_another_name_is_refused(local_ui: str) -> None:
    """A page of another site that rebinds its name to 127.0.0.1 cannot read memory."""
    answer = httpx.get(f"{local_ui}/ui/", headers={"Host": "evil.example"})
    assert answer.status_code == 403
    assert "acme.alice" not in answer.text
    assert httpx.get(f"{local_ui}/ui/", headers={"Host": "localhost"}).status_code == 200


def test_a_form_from_another_site_is_refused(local_ui: str) -> None:
    answer = httpx.post(f"{local_ui}/ui/logout", headers={"Sec-Fetch-Site": "cross-site"})
    assert answer.status_code == 403


def test_it_listens_on_loopback_only(tmp_path: Path) -> None:
    done = memdir("ui", "-w", str(tmp_path / "ws"), "--host", "0.0.0.0", check=False)
    assert done.returncode != 0
    assert "loopback" in done.stderr


def test_the_rest_api_still_needs_a_key(local_ui: str) -> None:
    answer = httpx.get(f"{local_ui}/v1/namespaces/acme.alice/search", params={"q": "checklist"})
    assert answer.status_code == 401
