"""``make demo-web``, the real launcher in a fresh directory: a person opens the web app
in a browser, answers a demo form and submits; the thank-you page links to the sheet in
the emulator, where the row appears within seconds. Screenshots of the three pages go to
``.artifacts/`` (demo-form, demo-thanks, demo-sheet); the form and the sheet are pictures
of the docs (``docs/images/`` with SHEETSYNC_TEST_DOCS_IMAGES=1)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from sqlalchemy import create_engine, text
from support.browser import chromium, screenshot
from support.waiting import wait_until

from sheetsync.dev.local import free_port

#: The conference form of sheetsync.dev.demo_data: two PII questions, a jumbotron.
FORM_TITLE = "2024 개발자 컨퍼런스 참가 신청"
#: A phone number no seeded answer has: the personal info typed in the browser.
CANARY = f"010-9{secrets.randbelow(1000):03d}-{secrets.randbelow(10000):04d}"
SUBMITTER = "김데모"
#: The form of the owner who revoked Google access (sheetsync.dev.demo_data).
REVOKED_FORM_TITLE = "동아리 MT 참가 조사"
MAIL_LINE = "would email demo_owner_4@example.com: Your form's sheet: Reconnect Google"
URL_LINE = re.compile(r"Open (http://\S+?)/? to fill in a form")
CONSOLE_LINE = re.compile(r"Console:\s+(http://\S+)")

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not on PATH"
)


@pytest.fixture
def demo_web(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """The launcher running in ``tmp_path`` with no SHEETSYNC_* of the caller's (it starts
    its own redis-server); yields (web app URL, working directory, process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    out = tmp_path / "out.log"
    with open(out, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sheetsync.dev.demo_web", "--port", str(free_port())],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        found = wait_until(lambda: process.poll() is None and URL_LINE.search(out.read_text()), 45)
        yield found.group(1), tmp_path, process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert "stopping everything the demo started" in out.read_text()


def fill_in(browser) -> None:
    browser.find_element(By.ID, "submitter").send_keys(SUBMITTER)
    fields = browser.find_elements(By.CSS_SELECTOR, "#answer-form [data-type], textarea")
    for field in fields:
        kind = field.get_attribute("type")
        if field.get_attribute("data-type") == "PERSONAL_INFO":
            field.send_keys(CANARY)
        elif kind == "date":
            browser.execute_script("arguments[0].value = '2024-06-15'", field)
        elif kind == "number":
            field.send_keys("2")
        elif kind == "url":
            field.send_keys("https://files.example.com/slides.pdf")
        else:
            field.send_keys("개발팀" if kind == "text" else "주차 공간이 있나요?")
    for group in browser.find_elements(By.CSS_SELECTOR, ".options"):
        group.find_elements(By.TAG_NAME, "input")[0].click()


@pytest.mark.browser
def test_a_form_submitted_in_the_browser_lands_in_the_sheet(demo_web) -> None:
    url, workdir, process = demo_web
    with chromium(width=1100, height=900) as browser:
        browser.get(url)
        browser.find_element(By.LINK_TEXT, FORM_TITLE).click()
        assert browser.find_element(By.TAG_NAME, "h1").text == FORM_TITLE
        assert browser.find_elements(By.CSS_SELECTOR, ".jumbotron"), "the display-only question"
        fill_in(browser)
        browser.execute_script("window.scrollTo(0, 0)")
        screenshot(browser, "demo-form", docs=True)
        browser.find_element(By.ID, "submit").click()

        wait_until(lambda: browser.find_elements(By.ID, "answer-id"), timeout=10)
        answer_id = browser.find_element(By.ID, "answer-id").text
        assert re.fullmatch(r"web_[0-9a-f]{16}", answer_id)
        sheet_links = browser.find_elements(By.CSS_SELECTOR, "a.sheet-link")
        assert len(sheet_links) == 2  # the conference form is linked to two spreadsheets
        launcher = (workdir / "out.log").read_text()
        assert "linked sheets, no answers yet (their sheets start empty)" in launcher
        printed = CONSOLE_LINE.search(launcher)
        assert printed is not None, "the launcher prints the console's URL"
        console_url = browser.find_element(By.ID, "console-link").get_attribute("href")
        assert console_url.rstrip("/") == printed.group(1).rstrip("/")
        browser.set_window_size(1100, 500)
        screenshot(browser, "demo-thanks")

        # The sheet page reloads itself every 2 s: the row shows up without a click.
        browser.set_window_size(1700, 500)
        browser.get(sheet_links[0].get_attribute("href"))
        wait_until(lambda: answer_id in browser.page_source, timeout=20, interval=0.5)
        row = browser.find_element(By.XPATH, f"//tr[td[text()='{answer_id}']]")
        assert SUBMITTER in row.text and CANARY in row.text  # decrypted by the worker
        screenshot(browser, "demo-sheet", docs=True)

        # The owner who revoked Google access: their answer is parked, and the demo's
        # owner hook (examples/webapp/notifications.py) mails them, once.
        browser.get(url)
        browser.find_element(By.LINK_TEXT, REVOKED_FORM_TITLE).click()
        browser.find_element(By.ID, "submit").click()
        wait_until(lambda: browser.find_elements(By.ID, "answer-id"), timeout=10)
        worker_log = workdir / ".demo" / "worker.log"
        wait_until(lambda: MAIL_LINE in worker_log.read_text(errors="replace"), timeout=20)

        # The console the thank-you page links to: the parked answer is a dead letter.
        browser.set_window_size(1280, 900)
        browser.get(f"{console_url.rstrip('/')}/dead-letters")
        row = browser.find_element(By.XPATH, "//tr[td[contains(., 'demo_owner_4')]]")
        assert "CREDENTIAL" in row.text
        browser.get(console_url)
        assert "Rows appended" in browser.page_source
        assert "No beat is alive" not in browser.page_source  # the worker runs it (-B)
        screenshot(browser, "demo-console")

    # Stored encrypted, and in no log.
    engine = create_engine(f"sqlite:///{workdir / '.demo' / 'sheetsync.db'}")
    with engine.connect() as connection:
        stored = connection.execute(
            text("SELECT answer FROM submission_answer WHERE id = :id"), {"id": answer_id}
        ).scalar_one()
    engine.dispose()
    assert CANARY not in stored
    logs = "".join(p.read_text(errors="replace") for p in (workdir / ".demo").glob("*.log"))
    assert CANARY not in logs
    assert process.poll() is None, "the demo runs until it is stopped"
