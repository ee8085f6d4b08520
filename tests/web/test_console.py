"""The web console on a live pipeline, in Debian's chromium: pages with real data, a
dead letter replayed through the confirmation, and its rows in the emulator's sheet."""

from __future__ import annotations

import re

import pytest
from celery.contrib.testing.worker import start_worker
from selenium.webdriver.common.by import By
from support.browser import chromium, screenshot
from support.console import running_console
from support.waiting import wait_until

from sheetsync import emit_answer_submitted, emit_answer_updated
from sheetsync.dispatch import QUEUES
from sheetsync.models import DeadLetterReason, DeadLetterStatus
from sheetsync.recovery.reconnect import credential_reconnected
from sheetsync.redis_keys import BufferKey
from sheetsync.services import get_services


def _worker():
    from sheetsync.celery import app as celery_app

    return start_worker(
        celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES), shutdown_timeout=30
    )


@pytest.mark.browser
def test_console_shows_live_data_and_replays_a_dead_letter(world, pipeline_env, admin):
    env = pipeline_env()
    healthy = world.form("owner_ok")
    healthy_sheet = world.sheet(healthy)
    broken = world.form("owner_revoked")
    broken_sheet = world.sheet(broken)
    landed = world.answers(healthy, 5)
    parked = world.answers(broken, 3, prefix="parked")
    admin.revoke("google-owner_revoked")

    with _worker():
        for answer_id in landed + parked:
            emit_answer_submitted(answer_id)
        wait_until(lambda: world.ids_in(healthy_sheet) == landed, timeout=30)
        wait_until(lambda: [e.status for e in world.dead_letters()] == [DeadLetterStatus.PENDING])
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.CREDENTIAL
    # No worker now: these wait in their buffer, for the buffers page.
    waiting = world.answers(healthy, 4, prefix="waiting")
    for answer_id in waiting:
        emit_answer_submitted(answer_id)
    emit_answer_updated(landed[0])  # an edit waiting with them: the overview counts it

    with running_console(env) as console, chromium() as browser:
        console.authorize(browser)

        def shown(path: str, *texts: str) -> bool:
            browser.get(console.url + path)
            page = browser.page_source
            return all(text in page for text in texts)

        def charted() -> bool:
            """The sampler has drawn lines of a few samples (one each 0.5 s), the
            ledger its bars."""
            if not shown("/", 'class="bar"', "owner_ok"):
                return False
            lines = re.findall(r'<polyline class="line" points="([^"]*)"', browser.page_source)
            return len(lines) == 3 and all(len(line.split()) >= 6 for line in lines)

        wait_until(charted, timeout=15)
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "Could not read everything" not in body
        assert "Rows appended" in body and "Dead letters" in body
        changes = browser.find_element(By.ID, "changes-pending").text
        assert "1 edit, 0 deletions" in changes
        screenshot(browser, "console-overview", docs=True)

        assert shown("/buffers", healthy.submission_id, healthy_sheet.spreadsheet_id)
        row = browser.find_element(By.CSS_SELECTOR, f"tr[data-form='{healthy.submission_id}']")
        assert row.find_element(By.CSS_SELECTOR, "td.depth").text == "5"  # 4 and the edit
        # A buffer waiting at Google's quota shows its place and when its turn comes.
        key = BufferKey(
            "owner_ok", healthy.submission_id, healthy_sheet.spreadsheet_id, healthy_sheet.gid
        )
        limiter = get_services().limiter
        limiter.reserve("google-owner_ok", key.base)
        browser.get(console.url + "/buffers")
        row = browser.find_element(By.CSS_SELECTOR, f"tr[data-form='{healthy.submission_id}']")
        assert "at the write quota: next, in" in row.find_element(By.CSS_SELECTOR, ".quota").text
        screenshot(browser, "flow-buffers")
        limiter.leave(key.base)

        assert shown("/links", broken.submission_id, healthy.submission_id)
        broken_row = browser.find_element(
            By.CSS_SELECTOR, f"tr[data-form='{broken.submission_id}']"
        )
        assert "INVALID" in broken_row.text and "CREDENTIAL" in broken_row.text
        # Its owner's credential is INVALID: the link writes nothing, and says so.
        broken_state = broken_row.find_element(By.CSS_SELECTOR, "td.state").text
        assert "not writing" in broken_state and "active" not in broken_state
        healthy_row = browser.find_element(
            By.CSS_SELECTOR, f"tr[data-form='{healthy.submission_id}']"
        )
        assert "active" in healthy_row.find_element(By.CSS_SELECTOR, "td.state").text
        assert " ago" in healthy_row.text  # its last success
        screenshot(browser, "flow-links")

        assert shown("/dead-letters", f'href="/dead-letters/{entry.id}"', "CREDENTIAL")
        screenshot(browser, "flow-dead-letters")

        assert shown(f"/dead-letters/{entry.id}", *parked)
        screenshot(browser, "flow-dead-letter")
        page = browser.page_source
        for answer_id in parked:  # ids only: no answer's values, no token
            assert answer_id in page
        assert "refresh-owner" not in page

        # Before the owner reconnects, the replay's confirmation warns it would not help.
        browser.get(f"{console.url}/dead-letters/{entry.id}/replay")
        warning = browser.find_element(By.ID, "credential-warning").text
        assert "owner_revoked: INVALID" in warning and "reconnect" in warning

        # The owner reconnects; the operator replays from the console.
        admin.add_account("google-owner_revoked", "refresh-owner_revoked")
        credential_reconnected("owner_revoked", services=world.pipeline)
        with _worker():
            browser.get(f"{console.url}/dead-letters/{entry.id}")
            browser.find_element(By.LINK_TEXT, "Replay…").click()
            assert "/replay" in browser.current_url
            assert "Replay dead letter" in browser.find_element(By.TAG_NAME, "h1").text
            assert browser.find_elements(By.ID, "credential-warning") == []  # VALID again
            screenshot(browser, "flow-confirm-replay")
            browser.find_element(By.ID, "confirm").click()
            wait_until(lambda: "Sent to the workers" in browser.page_source, timeout=10)
            assert browser.current_url.endswith(f"/dead-letters/{entry.id}?notice=replay-sent")
            screenshot(browser, "flow-replayed")
            wait_until(lambda: sorted(world.ids_in(broken_sheet)) == sorted(parked), timeout=30)
            wait_until(lambda: sorted(world.ids_in(healthy_sheet)) == sorted(landed + waiting))
            wait_until(
                lambda: (
                    world.complete_replays()
                    and world.dead_letters()[0].status is DeadLetterStatus.DONE
                )
            )
