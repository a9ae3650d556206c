"""Stored XSS: fifty payloads planted through ``memdir add``, an ingested conversation
(messages and the transcript's file name) and a consolidation into MEMORY.md, then every
page of the namespace crawled in a real chromium: no dialog opens, no console error, and no
element a payload would make appears (each store)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urldefrag, urljoin, urlsplit

import pytest

from _browser import Page, browser
from _server import Served, memdir, serve_store
from _xss import DANGEROUS_ELEMENTS, PAYLOADS

NS = "acme.xss"
MAX_PAGES = 90
FILE_NAME = "\"><img src=x onerror=alert('file')>.json"


def _plant(workspace: str, tmp: Path) -> None:
    memdir("-w", workspace, "--namespace", NS, "add", "\n".join(PAYLOADS[:25]))
    messages = [{"role": "system", "content": "You are a coding assistant."}]
    for n, payload in enumerate(PAYLOADS[25:]):
        messages.append({"role": "user", "content": f"Please remember the label {payload}"})
        messages.append({"role": "assistant", "content": f"Noted ({n}): {payload}"})
    transcript = tmp / FILE_NAME
    transcript.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    memdir("-w", workspace, "--namespace", NS, "ingest", str(transcript), timeout=300)
    memdir("-w", workspace, "--namespace", NS, "consolidate")


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    for served in serve_store(request, tmp_path_factory):
        _plant(served.workspace, tmp_path_factory.mktemp("xss"))
        yield served


def _check(page: Page, path: str) -> None:
    page.open(path)  # no dialog, no console error
    made = page.all(DANGEROUS_ELEMENTS)
    assert not made, f"{path}: {[e.get_attribute('outerHTML')[:80] for e in made]}"


def test_no_planted_payload_runs_on_any_page(served: Served) -> None:
    base = served.server.url
    start = [
        "/ui/",
        f"/ui/ns/{NS}/",
        *(f"/ui/ns/{NS}/search?q={quote(q)}" for q in ("alert", "script", "onerror", "label")),
    ]
    seen: set[str] = set()
    queue = deque(start)
    with browser() as driver:
        page = Page(driver, base).login(served.keys.secrets["acme_read"])
        while queue and len(seen) < MAX_PAGES:
            path = queue.popleft()
            if path in seen:
                continue
            seen.add(path)
            _check(page, path)
            for href in page.links():
                target = urldefrag(urljoin(base + path, href))[0]
                parts = urlsplit(target)
                if parts.netloc != urlsplit(base).netloc:
                    raise AssertionError(f"{path} links off the site: {href!r}")
                local = parts.path + (f"?{parts.query}" if parts.query else "")
                if local.startswith(f"/ui/ns/{NS}/") and local not in seen:
                    queue.append(local)
    assert len(seen) >= 5, seen


def test_a_payload_in_the_address_is_not_reflected_as_markup(served: Served) -> None:
    with browser() as driver:
        page = Page(driver, served.server.url)
        for payload in PAYLOADS[:10]:
            _check(page, f"/ui/login?next={quote(payload)}")
        page.login(served.keys.secrets["acme_read"])
        for payload in PAYLOADS:
            _check(page, f"/ui/ns/{NS}/search?q={quote(payload)}")
        _check(page, f"/ui/ns/{NS}/why?at={quote(PAYLOADS[1])}")
        _check(page, f"/ui/ns/{quote(PAYLOADS[0])}/")
