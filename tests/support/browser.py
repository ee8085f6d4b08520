"""A real browser for the web tests: Debian's chromium, driven by chromium-driver through
Selenium. ``make browser`` (and ``.ci/run``) install both when missing.

Screenshots go to ``.artifacts/`` at the repository's root, where a person can look at
what the tests saw. The docs' pictures are screenshots too (``docs=True``): with
``SHEETSYNC_TEST_DOCS_IMAGES=1`` they are also written to ``docs/images/``, so one run of the
tests brings them up to date (left off by default: every run would change them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from support.paths import ROOT

#: Where the tests save their screenshots.
ARTIFACTS = ROOT / ".artifacts"
#: Where the docs' pictures live.
DOCS_IMAGES = ROOT / "docs" / "images"
#: Set to 1 to write the docs' pictures to DOCS_IMAGES as well.
DOCS_IMAGES_VARIABLE = "SHEETSYNC_TEST_DOCS_IMAGES"
#: Elements that must never scroll sideways: the page, every card and table wrapper.
_OVERFLOWS = """
const found = [];
const boxes = [document.documentElement, ...document.querySelectorAll(".card, .table-wrap")];
for (const box of boxes) {
  if (box.scrollWidth > box.clientWidth) {
    const table = box.querySelector("table");
    const page = box === document.documentElement;
    const name = page ? "document" : (table && table.id) || box.className;
    found.push(`${name}: ${box.scrollWidth} > ${box.clientWidth}`);
  }
}
return found;
"""

_CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
_DRIVER = ("chromedriver", "chromium-driver")


def _which(names: tuple[str, ...]) -> str | None:
    return next((path for name in names if (path := shutil.which(name))), None)


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[WebDriver]:
    """A headless chromium; fails (never skips) when the browser is missing, since
    ``make browser`` installs it."""
    binary, driver = _which(_CHROMIUM), _which(_DRIVER)
    if binary is None or driver is None:
        pytest.fail("chromium or chromedriver is missing: run `make browser`")
    options = Options()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


def screenshot(browser: WebDriver, name: str, *, docs: bool = False) -> Path:
    """Save the whole page as ``.artifacts/<name>.png``; returns its path. A picture of
    the docs also goes to ``docs/images/`` when SHEETSYNC_TEST_DOCS_IMAGES=1."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    width = browser.get_window_size()["width"]
    browser.set_window_size(width, 600)  # a page shorter than the window is not stretched
    # The window's height includes the browser's own frame (outer - inner height).
    height = browser.execute_script(
        "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight"
    )
    browser.set_window_size(width, max(int(height) + 20, 600))
    browser.save_screenshot(str(path))
    if docs and os.environ.get(DOCS_IMAGES_VARIABLE) == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / path.name)
    return path


def overflows(browser: WebDriver) -> list[str]:
    """What scrolls sideways on the page (the page itself, a card, a table wrapper):
    each as "name: scrollWidth > clientWidth"."""
    return list(browser.execute_script(_OVERFLOWS))


def script_errors(browser: WebDriver) -> list[str]:
    """The browser console's errors since the last call (a refused script, a Content
    Security Policy violation, an exception)."""
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
