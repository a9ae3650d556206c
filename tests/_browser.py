"""A real browser for the UI tests: Debian's chromium, driven by Selenium through
chromium-driver, headless.

:func:`browser` starts one; :class:`Page` wraps it with what the tests do: log in, open a
page, read text, and check that nothing a page showed ran (no dialog opened, no console
error, no script error). Screenshots go to ``$MEMDIR_UI_SCREENSHOTS`` when it is set (the
images of docs/ui.md are taken that way).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS_ENV = "MEMDIR_UI_SCREENSHOTS"


def _require() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:  # .ci/run installs both: a machine without them fails, it does not skip
        pytest.fail(f"the UI tests need Debian's chromium and chromium-driver: {missing}")


@contextmanager
def browser(*, width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless chromium driven by Selenium (closed at the end)."""
    _require()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--no-first-run",
        f"--window-size={width},{height}",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """A browser on one UI server."""

    def __init__(self, driver: Any, base: str) -> None:
        self.driver = driver
        self.base = base.rstrip("/")

    def open(self, path: str) -> Page:
        """Load ``path`` of the server (``/ui/...``) and check that nothing ran."""
        self.driver.get(self.base + path)
        self.assert_nothing_ran()
        return self

    def login(self, key: str) -> Page:
        """Log in with ``key`` through the login form."""
        from selenium.webdriver.common.by import By

        self.open("/ui/login")
        field = self.driver.find_element(By.ID, "key")
        field.clear()
        field.send_keys(key)
        self.go(field, submit=True)
        return self

    def logout(self) -> None:
        """Log out (the form in the header), and wait for the login page."""
        from selenium.webdriver.common.by import By

        self.go(self.driver.find_element(By.CSS_SELECTOR, "form.logout button"))
        self.wait_for_path("/ui/login")

    def wait_for_path(self, prefix: str, timeout: float = 60) -> None:
        """Wait until the page shown is at ``prefix`` (a click's navigation is asynchronous)."""
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, timeout).until(lambda _: self.path.startswith(prefix))

    @property
    def path(self) -> str:
        """The path (and query) of the page shown."""
        url: str = self.driver.current_url
        return url[len(self.base) :] if url.startswith(self.base) else url

    def text(self, css: str = "main") -> str:
        """The visible text of the first element matching ``css``."""
        from selenium.webdriver.common.by import By

        return str(self.driver.find_element(By.CSS_SELECTOR, css).text)

    def find(self, css: str) -> Any:
        """The first element matching ``css``."""
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        """Every element matching ``css``."""
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def click_link(self, text: str) -> Page:
        """Follow the first link whose text contains ``text``."""
        from selenium.webdriver.common.by import By

        self.go(self.driver.find_element(By.PARTIAL_LINK_TEXT, text))
        return self

    def go(self, element: Any, *, submit: bool = False) -> Page:
        """Click ``element`` (or submit its form), wait until the next page has replaced this
        one, and check that nothing ran on it."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        old = self.driver.find_element(By.TAG_NAME, "html")
        if submit:
            element.submit()
        else:
            element.click()

        def replaced(_: Any) -> bool:
            try:
                old.tag_name  # noqa: B018 (asked only to see whether it is still there)
            except WebDriverException:  # stale, or "does not belong to the document"
                return True
            return False

        WebDriverWait(self.driver, 60).until(replaced)
        self.assert_nothing_ran()
        return self

    def assert_nothing_ran(self) -> None:
        """No dialog is open, and the console has no error (a script that ran, a blocked
        inline script reported by the Content-Security-Policy, a failed load)."""
        from selenium.common.exceptions import NoAlertPresentException

        try:
            alert = self.driver.switch_to.alert
            text = alert.text
            alert.dismiss()
        except NoAlertPresentException:
            pass
        else:
            raise AssertionError(f"a dialog opened on {self.path}: {text!r}")
        errors = [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry.get("level") == "SEVERE" and not self._page_status(entry["message"])
        ]
        assert not errors, f"console errors on {self.path}: {errors}"

    def links(self) -> list[str]:
        """The ``href`` of every link of the page, as written."""
        hrefs = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('a[href]'), a => a.getAttribute('href'))"
        )
        return [str(h) for h in hrefs]

    def accessibility_problems(self) -> list[str]:
        """What keeps the page from a keyboard or a screen reader: a form control without a
        label, a link or button without text, no language, not one ``h1``, a positive
        ``tabindex`` (which breaks the keyboard order)."""
        found = self.driver.execute_script(
            """
            const out = [];
            if (!document.documentElement.lang) out.push('no lang on <html>');
            const h1 = document.querySelectorAll('h1').length;
            if (h1 !== 1) out.push(h1 + ' h1 headings');
            for (const el of document.querySelectorAll('input, select, textarea')) {
              if (el.type === 'hidden' || el.type === 'submit') continue;
              const labelled = (el.labels && el.labels.length) || el.getAttribute('aria-label')
                || el.getAttribute('aria-labelledby');
              if (!labelled) out.push('unlabelled ' + el.outerHTML.slice(0, 80));
            }
            for (const el of document.querySelectorAll('a[href], button')) {
              const name = (el.innerText || '').trim() || el.getAttribute('aria-label');
              if (!name) out.push('nameless ' + el.outerHTML.slice(0, 80));
            }
            for (const el of document.querySelectorAll('[tabindex]')) {
              if (parseInt(el.getAttribute('tabindex'), 10) > 0) out.push('tabindex>0');
            }
            return out;
            """
        )
        return [str(p) for p in found]

    def _page_status(self, message: str) -> bool:
        """Whether a console line only reports the status of a page of the server (an error
        page: a 404, a refused login, a 409 conflict; logged by the browser, not a script's
        error). A stylesheet or script that fails to load is still an error."""
        url, _, rest = message.partition(" - ")
        page = url.split("#")[0].split("?")[0]
        return (
            rest.startswith("Failed to load resource: the server responded with a status of")
            and page.startswith(self.base + "/ui")
            and not page.startswith(self.base + "/ui/static/")
        ) or page.endswith("/favicon.ico")

    def screenshot(self, name: str) -> None:
        """Save the page as ``<name>.png`` under ``$MEMDIR_UI_SCREENSHOTS`` (when set)."""
        folder = os.environ.get(SCREENSHOTS_ENV)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(Path(folder) / f"{name}.png"))
