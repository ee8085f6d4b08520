"""Every console page at 1280 px with long names everywhere: nothing scrolls sideways,
forms show by title, accounts by distinct owner labels, and no page carries personal
info (emails, Google account ids, submitters' names, refresh tokens)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from selenium.webdriver.common.by import By
from sqlalchemy import select, update
from support.browser import chromium, overflows, screenshot, script_errors
from support.console import park, running_console
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import (
    DeadLetterReason,
    GoogleCredential,
    SpreadSheet,
    SubmissionAnswer,
    User,
    utcnow,
)

#: Two owners whose ids share a long prefix (the limiter's meters once cut both to the
#: same text), and one with an id near the longest allowed.
TWINS = ("conference_operations_team_owner_1", "conference_operations_team_owner_2")
LONG_OWNER = "tenant_7f3a9c2e_" + "owner_with_a_very_long_identifier_" * 2 + "0001"
LONG_TITLE = "2025 하반기 전국 대학생 개발자 컨퍼런스 참가 신청서 (세션 선택, 숙박, 식사 포함)"
SAME_TITLE = "동아리 MT 참가 조사"
LONG_MESSAGE = "Sheets API 400 INVALID_ARGUMENT: " + "the range does not fit the sheet; " * 14


@pytest.mark.browser
def test_every_page_fits_1280_px_with_readable_labels_and_no_personal_info(
    world, pipeline_env, admin
):
    env = pipeline_env()
    conference = world.form(TWINS[0], title=LONG_TITLE)
    conference_sheets = [world.sheet(conference), world.sheet(conference)]
    club = world.form(TWINS[1], title=SAME_TITLE)
    club_sheet = world.sheet(club)
    twin_club = world.form(LONG_OWNER, title=SAME_TITLE)  # same title, another form
    twin_sheet = world.sheet(twin_club)
    orphan = world.form("owner_without_credential", credential_status=None)
    orphan_sheet = world.sheet(orphan)

    # Answers waiting in their buffers, with no worker: overdue jobs on the overview.
    for form in (conference, club, twin_club, orphan):
        for answer_id in world.answers(form, 3, prefix=f"wait_{form.submission_id}"):
            emit_answer_submitted(answer_id)
    # Dead letters of every kind, with Google's longest messages.
    entries = [
        park(world, conference, conference_sheets[0], world.answers(conference, 4, prefix="t"),
             DeadLetterReason.TRANSIENT_EXHAUSTED, LONG_MESSAGE),
        park(world, club, club_sheet, world.answers(club, 2, prefix="p"),
             DeadLetterReason.PERMANENT, LONG_MESSAGE),
        park(world, twin_club, twin_sheet, world.answers(twin_club, 2, prefix="c"),
             DeadLetterReason.CREDENTIAL, "Google OAuth invalid_grant: Google refused the token",
             delay_s=7 * 86400),
        park(world, orphan, orphan_sheet, world.answers(orphan, 1, prefix="o"),
             DeadLetterReason.CONFIGURATION, LONG_MESSAGE),
    ]  # fmt: skip
    with world.pipeline.sessions.begin() as session:
        session.execute(
            update(GoogleCredential)
            .where(GoogleCredential.user_id == LONG_OWNER)
            .values(status="INVALID")
        )
        session.execute(
            update(SpreadSheet)
            .where(SpreadSheet.spread_sheet_id == conference_sheets[1].spreadsheet_id)
            .values(paused_reason=LONG_MESSAGE, paused_at=utcnow() - timedelta(minutes=3))
        )
        names = set(session.scalars(select(SubmissionAnswer.user_name)))
        emails = set(session.scalars(select(User.email)))
        accounts = set(session.scalars(select(GoogleCredential.google_account_id)))
    # Both twins' Google accounts made requests in the rate window.
    for owner, requests in ((TWINS[0], 40), (TWINS[1], 25)):
        for _ in range(requests):
            world.pipeline.limiter.take(f"google-{owner}")
    personal = names | emails | accounts | {f"refresh-{owner}" for owner in (*TWINS, LONG_OWNER)}
    assert len(names) >= 3 and len(accounts) == 3

    pages = [
        "/",
        "/buffers",
        "/links",
        "/dead-letters",
        "/dead-letters?status=FAILED",
        *(f"/dead-letters/{entry_id}" for entry_id in entries),
        f"/dead-letters/{entries[2]}/replay",
        f"/dead-letters/{entries[0]}/purge",
        "/dead-letters/bulk/replay",
        f"/dead-letters/bulk/replay?user={LONG_OWNER}",
        "/dead-letters/bulk/purge?reason=PERMANENT",
    ]
    with running_console(env) as console, chromium(1280, 900) as browser:
        console.authorize(browser)
        browser.get(console.url + "/")
        # The overview's buffers are overdue (no worker) before the pictures are taken.
        wait_until(
            lambda: browser.get(console.url + "/") or browser.page_source.count("(no worker)") >= 4,
            timeout=15,
        )
        overflowing: dict[str, list[str]] = {}
        for path in pages:
            browser.set_window_size(1280, 900)
            browser.get(console.url + path)
            body = browser.find_element(By.TAG_NAME, "body").text
            assert "Could not read everything" not in body, path
            if found := overflows(browser):
                overflowing[path] = found
            page = browser.page_source
            leaked = sorted(value for value in personal if value and value in page)
            assert leaked == [], (path, leaked)
            name = re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")[:48]
            screenshot(browser, f"layout-{name or 'overview'}")
        assert overflowing == {}
        assert script_errors(browser) == []

        # The meters name each Google account by its owner, in full: two labels, distinct.
        browser.set_window_size(1280, 900)
        browser.get(console.url + "/")
        labels = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, ".meter-label")]
        assert labels[0] == "project"
        assert sorted(labels[1:]) == list(TWINS)
        screenshot(browser, "layout-meters")

        # Forms by title, with the id that tells two forms of one title apart.
        browser.get(console.url + "/dead-letters")
        for form, entry_id in zip((conference, club, twin_club), entries, strict=False):
            cell = browser.find_element(By.CSS_SELECTOR, f"tr[data-entry='{entry_id}'] td.form")
            title = LONG_TITLE if form is conference else SAME_TITLE
            assert cell.find_element(By.CSS_SELECTOR, ".name").get_attribute("title") == title
            assert cell.find_element(By.CSS_SELECTOR, ".sub").text == form.submission_id
        screenshot(browser, "console-dead-letters", docs=True)

        # Links: a paused one, one whose owner's credential is INVALID, one with none.
        browser.get(console.url + "/links")
        rows = [
            (row.get_attribute("data-form"), row.find_element(By.CSS_SELECTOR, "td.state").text)
            for row in browser.find_elements(By.CSS_SELECTOR, "#links tbody tr")
        ]
        states = {form: state for form, state in rows if form != conference.submission_id}
        assert states[twin_club.submission_id].startswith("not writing")
        assert "INVALID" in states[twin_club.submission_id]
        assert "no Google credential" in states[orphan.submission_id]
        assert states[club.submission_id] == "active"
        active, paused = sorted(state for form, state in rows if form == conference.submission_id)
        assert paused.startswith("paused") and active == "active"
        screenshot(browser, "console-links", docs=True)
