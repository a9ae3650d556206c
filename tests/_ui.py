"""The UI tests' servers: ``memdir serve`` over a directory and over PostgreSQL with the keys
of :data:`_server.KEYS`, holding a namespace filled through the real write paths (the sample
transcripts ingested with the offline model, which flushes and consolidates them, and
``memdir add``), and a browser on it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _browser import Page, browser
from _server import Served, memdir, serve_store

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = ROOT / "examples" / "transcripts"
NS = "acme.alice"
OTHER_NS = "beta.bob"
CHINESE_FACT = "用户的猫叫小橘，每天早上七点喂它。"
OTHER_FACT = "Bob keeps the beta launch codes in the red binder."


@dataclass(frozen=True, slots=True)
class UiServer:
    """A served workspace with the UI's seeded namespaces."""

    served: Served

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.served.server.url

    def key(self, name: str) -> str:
        """The secret of the key ``name`` of :data:`_server.KEYS`."""
        return self.served.keys.secrets[name]


def seed(workspace: str) -> None:
    """Fill :data:`NS` and :data:`OTHER_NS` through the CLI, as a user would."""
    memdir("-w", workspace, "--namespace", NS, "ingest", str(TRANSCRIPTS), timeout=300)
    memdir("-w", workspace, "--namespace", NS, "add", CHINESE_FACT)
    memdir("-w", workspace, "--namespace", OTHER_NS, "add", OTHER_FACT)


def ui_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UiServer]:
    """A module fixture's body: a seeded server over ``request.param`` (files, postgres)."""
    for served in serve_store(request, tmp_path_factory):
        seed(served.workspace)
        yield UiServer(served)


def browser_page(url: str) -> Iterator[Page]:
    """A module fixture's body: one browser for a module's tests."""
    with browser() as driver:
        yield Page(driver, url)


def fresh(page: Page) -> Page:
    """``page`` logged out (its cookies cleared), on a blank page."""
    page.driver.get(page.base + "/ui/login")
    page.driver.delete_all_cookies()
    return page


def anonymous_get(ui: UiServer, path: str, **kwargs: Any) -> Any:
    """A GET of ``path`` without a session (redirects not followed)."""
    with ui.served.client() as client:
        return client.get(path, follow_redirects=False, **kwargs)
