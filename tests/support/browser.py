"""A real browser for the web tests: Debian's chromium, driven by chromium-driver through
Selenium. ``make browser`` (and ``.ci/run``) install both when missing.

Screenshots go to ``.artifacts/`` at the repository's root, where a person can look at
what the tests saw.
"""

from __future__ import annotations

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
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


def screenshot(browser: WebDriver, name: str) -> Path:
    """Save the whole page as ``.artifacts/<name>.png``; returns its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    height = browser.execute_script("return document.documentElement.scrollHeight")
    width = browser.get_window_size()["width"]
    browser.set_window_size(width, max(int(height) + 120, 600))
    browser.save_screenshot(str(path))
    return path
