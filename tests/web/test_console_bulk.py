"""Bulk replay and purge from the console, in chromium: by filter, through the same
confirmation and CSRF rules as one entry's, with the effect read back from the
database and the emulator's sheets."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from celery.contrib.testing.worker import start_worker
from selenium.webdriver.common.by import By
from sqlalchemy import update
from support.browser import chromium, screenshot, script_errors
from support.console import park, running_console
from support.databases import BOTH_DATABASES
from support.waiting import wait_until

from sheetsync import ledger
from sheetsync.deadletters import store
from sheetsync.dispatch import QUEUES
from sheetsync.models import (
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
)

FORM_POST = {"Content-Type": "application/x-www-form-urlencoded"}


def _worker():
    from sheetsync.celery import app as celery_app

    return start_worker(
        celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES), shutdown_timeout=30
    )


def _statuses(world) -> dict[int, DeadLetterStatus]:
    return {entry.id: entry.status for entry in world.dead_letters()}


def _hidden(page: str) -> dict[str, str]:
    """The hidden fields of a confirmation page's form."""
    return dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', page))


@pytest.mark.browser
def test_bulk_replay_and_purge_by_filter(world, pipeline_env):
    env = pipeline_env()
    alpha = world.form("owner_alpha", title="알파 신청서")
    alpha_sheet = world.sheet(alpha)
    beta = world.form("owner_beta", title="베타 설문")
    beta_sheet = world.sheet(beta)
    gamma = world.form("owner_gamma", title="감마 조사")
    gamma_sheet = world.sheet(gamma)
    alpha_ids = world.answers(alpha, 3, prefix="alpha")
    beta_ids = world.answers(beta, 2, prefix="beta")
    transient = DeadLetterReason.TRANSIENT_EXHAUSTED
    replayed = [
        park(world, alpha, alpha_sheet, alpha_ids, transient),
        park(world, beta, beta_sheet, beta_ids, transient),
    ]
    kept = park(world, alpha, alpha_sheet, world.answers(alpha, 2, prefix="conf"),
                DeadLetterReason.CONFIGURATION)  # fmt: skip
    revoked = park(world, gamma, gamma_sheet, world.answers(gamma, 2, prefix="gamma"),
                   DeadLetterReason.CREDENTIAL)  # fmt: skip
    with world.pipeline.sessions.begin() as session:
        session.execute(
            update(GoogleCredential)
            .where(GoogleCredential.user_id == "owner_gamma")
            .values(status="INVALID")
        )

    with running_console(env) as console, chromium() as browser:
        console.authorize(browser)
        browser.get(f"{console.url}/dead-letters?reason={transient}")
        browser.find_element(By.ID, "bulk-replay").click()
        assert browser.current_url.endswith(f"/dead-letters/bulk/replay?reason={transient}")
        count = browser.find_element(By.ID, "bulk-count").text
        assert "2 dead letters" in count and "5 answer ids" in count
        assert not browser.find_elements(By.ID, "credential-warning")  # both owners VALID
        fields = _hidden(browser.page_source)
        assert fields["reason"] == transient and fields["upto"] == str(max(replayed))

        # A post without the page's CSRF token, or from another origin, changes nothing.
        body = f"reason={transient}&upto={fields['upto']}&confirmed=2"
        own = {**FORM_POST, "Origin": console.url}
        forged = console.request("/dead-letters/bulk/replay", data=body.encode(), headers=own)
        assert forged.status == 403
        stolen = f"{body}&csrf_token={fields['csrf_token']}".encode()
        elsewhere = {**FORM_POST, "Origin": "http://evil.example"}
        refused = console.request("/dead-letters/bulk/replay", data=stolen, headers=elsewhere)
        assert refused.status == 403
        assert set(_statuses(world).values()) == {DeadLetterStatus.PENDING}

        # An entry that matches but appears after the confirmation is left out.
        late = park(world, gamma, gamma_sheet, world.answers(gamma, 1, prefix="late"), transient)
        assert late > max(replayed)
        with _worker():
            browser.find_element(By.ID, "confirm").click()
            wait_until(lambda: "sent to the workers" in browser.page_source, timeout=10)
            assert "notice=bulk-replay" in browser.current_url
            assert f"reason={transient}" in browser.current_url  # back on the same filter
            assert "2 dead letters sent to the workers" in browser.page_source
            wait_until(lambda: sorted(world.ids_in(alpha_sheet)) == sorted(alpha_ids), timeout=30)
            wait_until(lambda: sorted(world.ids_in(beta_sheet)) == sorted(beta_ids), timeout=30)
            wait_until(
                lambda: (
                    world.complete_replays()
                    and [_statuses(world)[i] for i in replayed] == [DeadLetterStatus.DONE] * 2
                ),
                timeout=30,
            )
        statuses = _statuses(world)
        assert statuses[kept] is statuses[revoked] is statuses[late] is DeadLetterStatus.PENDING
        assert world.ids_in(gamma_sheet) == []

        # Replaying an owner whose credential is INVALID: the confirmation says so.
        browser.get(f"{console.url}/dead-letters?user=owner_gamma")
        browser.find_element(By.ID, "bulk-replay").click()
        warning = browser.find_element(By.ID, "credential-warning").text
        assert "owner_gamma: INVALID (2 dead letters)" in warning
        screenshot(browser, "console-bulk-replay", docs=True)
        browser.get(f"{console.url}/dead-letters/{revoked}/replay")  # one entry's too
        assert "owner_gamma: INVALID" in browser.find_element(By.ID, "credential-warning").text

        # Bulk purge of owner_alpha's dead letters: the DONE one is left alone.
        browser.get(f"{console.url}/dead-letters?user=owner_alpha")
        browser.find_element(By.ID, "bulk-purge").click()
        count = browser.find_element(By.ID, "bulk-count").text
        assert "1 dead letter that is" in count and "2 answer ids" in count
        assert "leaves alone the 1 DONE" in count
        screenshot(browser, "console-bulk-purge")
        browser.find_element(By.ID, "confirm").click()
        wait_until(lambda: "1 dead letter purged" in browser.page_source, timeout=10)
        statuses = _statuses(world)
        assert statuses[kept] is DeadLetterStatus.PURGED
        assert statuses[revoked] is statuses[late] is DeadLetterStatus.PENDING
        with world.pipeline.sessions() as session:
            states = ledger.states(
                session, ["conf_1", "conf_2"], alpha_sheet.spreadsheet_id, alpha_sheet.gid
            )
        assert set(states.values()) == {TransactionType.FAILED}
        assert script_errors(browser) == []


@BOTH_DATABASES
def test_a_bulk_action_takes_what_was_confirmed_as_it_stands(world, pipeline_env):
    """Between the confirmation and the post, one counted entry is purged elsewhere and a
    matching one appears: the post purges the rest of what was counted, and says so."""
    env = pipeline_env()
    counted = []
    for owner in ("owner_a", "owner_b", "owner_c"):
        form = world.form(owner)
        sheet = world.sheet(form)
        ids = world.answers(form, 2, prefix=owner)
        counted.append(park(world, form, sheet, ids, DeadLetterReason.UNEXPECTED))
    with running_console(env) as console:
        page = console.request("/dead-letters/bulk/purge?reason=UNEXPECTED").body
        fields = _hidden(page)
        assert (fields["upto"], fields["confirmed"]) == (str(max(counted)), "3")
        assert "6 answer ids" in page

        purged, _ = store.purge(world.pipeline.sessions, [counted[1]])  # elsewhere
        assert purged == [counted[1]]
        form = world.form("owner_d")
        late = park(world, form, world.sheet(form), world.answers(form, 1, prefix="d"),
                    DeadLetterReason.UNEXPECTED)  # fmt: skip

        done = console.request(
            "/dead-letters/bulk/purge",
            data=urlencode(fields).encode(),
            headers={**FORM_POST, "Origin": console.url},
        )
        assert done.status == 200  # after the 303 back to the list, same filter
        assert "2 dead letters purged" in done.body
        assert "Left alone: 1 of the 3 confirmed, replayed, purged or changed" in done.body

        # Counts that are not plain digits: one line of refusal, never a crash.
        odd = {**fields, "upto": "\u00b2"}
        refused = console.request(
            "/dead-letters/bulk/purge",
            data=urlencode(odd).encode(),
            headers={**FORM_POST, "Origin": console.url},
        )
        assert refused.status == 400 and refused.body.count("\n") == 1
        shown = console.request("/dead-letters?notice=bulk-purge&done=%C2%B2&confirmed=x")
        assert shown.status == 200 and "0 dead letters purged" in shown.body
    statuses = _statuses(world)
    assert [statuses[i] for i in counted] == [DeadLetterStatus.PURGED] * 3
    assert statuses[late] is DeadLetterStatus.PENDING
