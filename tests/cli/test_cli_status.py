"""`sheetsync status` through the real console script."""

from __future__ import annotations

import json
import time

import pytest
from support.cli import Cli

from sheetsync.dev.seed import seed_user
from sheetsync.models import (
    AnswerChange,
    DeadLetterReason,
    DeadLetterStatus,
    SheetTransaction,
    TransactionType,
)
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services


def test_status_json_shows_buffers_dead_letters_and_limits(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        seed_user(session, "owner_1", google_account_id="acct-1")
        seed_user(session, "owner_2", google_account_id="acct-idle")
    cli.add_dead_letter(user_id="owner_1")
    cli.add_dead_letter(
        user_id="owner_1", status=DeadLetterStatus.FAILED, reason=DeadLetterReason.PERMANENT
    )
    key = BufferKey("owner_1", "form_1", "sheet_abc", 7)
    pipeline = Services.build()
    try:
        dispatches = pipeline.store.push([(key, "sheetsync_priority")], ["a_1", "a_2", "a_3"])
        assert len(dispatches) == 1
        pipeline.limiter.take("acct-1", "write")
        pipeline.limiter.take("acct-1", "write")
        pipeline.limiter.take("acct-1", "read")
    finally:
        pipeline.close()

    report = json.loads(cli.ok("status", "--json").stdout)

    assert report["redis_url"].endswith("/13")
    buffers = report["buffers"]
    assert buffers["total"] == 1
    (item,) = buffers["items"]
    assert item["base"] == key.base
    assert (item["user_id"], item["submission_id"], item["spread_sheet_id"], item["sheet_id"]) == (
        "owner_1",
        "form_1",
        "sheet_abc",
        7,
    )
    assert item["depth"] == 3
    assert 0 <= item["oldest_age_s"] < 60
    job = item["job"]
    assert job["state"] == "scheduled"
    assert job["token"] == dispatches[0].token
    assert job["queue"] == "sheetsync_priority"
    assert job["promoted"] is False
    assert 0 < job["due_in_s"] <= 10  # the default debounce
    assert job["lease_left_s"] is None

    dead = report["dead_letters"]
    assert dead["total"] == 2
    assert dead["by_status"] == {"FAILED": 1, "PENDING": 1}
    assert dead["by_reason"] == {"CREDENTIAL": 1, "PERMANENT": 1}
    assert dead["pending_due_now"] == 0

    limiter = report["limiter"]
    assert limiter["project"] == {"used": 2, "limit": 300}
    assert limiter["project_reads"] == {"used": 1, "limit": 300}
    assert limiter["accounts"] == [
        {
            "account": "acct-1",
            "client": "default",
            "used": 2,
            "limit": 60,
            "reads": 1,
            "read_limit": 60,
        },
        {
            "account": "acct-idle",
            "client": "default",
            "used": 0,
            "limit": 60,
            "reads": 0,
            "read_limit": 60,
        },
    ]


def test_status_tables_for_people(cli: Cli) -> None:
    pipeline = Services.build()
    try:
        pipeline.store.push([(BufferKey("owner_1", "form_9", "sheet_abc", 0), "q")], ["a_1"])
    finally:
        pipeline.close()
    cli.add_dead_letter()
    text = cli.ok("status").stdout
    assert "buffers: 1" in text
    assert "form_9" in text
    assert "scheduled" in text
    assert "dead letters: 1" in text
    assert "rate limits" in text


def test_status_counts_the_edits_and_deletions_sheets_have_yet_to_follow(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        for n, change in enumerate([AnswerChange.DELETE, AnswerChange.DELETE, AnswerChange.UPDATE]):
            session.add(
                SheetTransaction(
                    submission_answer_id=f"ans_{n}",
                    spread_sheet_id="sheet_abc",
                    sheet_id=0,
                    type=TransactionType.COMPLETED,
                    change=change,
                )
            )
    report = json.loads(cli.ok("status", "--json").stdout)
    assert report["changes_pending"] == {"UPDATE": 1, "DELETE": 2}
    text = cli.ok("status").stdout
    assert "changes pending: 1 edit, 2 deletions (erasures among them)" in text


def test_status_with_nothing_going_on(cli: Cli) -> None:
    report = json.loads(cli.ok("status", "--json").stdout)
    assert report["changes_pending"] == {"UPDATE": 0, "DELETE": 0}
    assert report["buffers"]["total"] == 0
    assert report["dead_letters"]["total"] == 0
    assert report["limiter"]["project"]["used"] == 0


def test_status_shows_each_waiting_buffers_place_at_the_quota(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_write = {"SHEETSYNC_RATE_LIMIT_PER_PROJECT": "1"}
    monkeypatch.setenv("SHEETSYNC_RATE_LIMIT_PER_PROJECT", "1")
    first, second = (BufferKey("owner_1", "form_1", f"sheet_{n}", 0) for n in range(2))
    pipeline = Services.build()
    try:
        pipeline.store.push([(first, "q"), (second, "q")], ["a_1"])
        pipeline.limiter.take("acct-0")  # the project's write window is full for a minute
        first_wait = pipeline.limiter.reserve("acct-1", first.base)
        reserved_at = time.monotonic()
        pipeline.limiter.reserve("acct-2", second.base)
    finally:
        pipeline.close()

    report = json.loads(cli.ok("status", "--json", env=one_write).stdout)
    # The wait shrinks while the command starts (seconds on a slow machine): what status
    # says lies between the wait at the reservation and that wait less the time since.
    since_s = time.monotonic() - reserved_at
    places = {item["base"]: item["quota"] for item in report["buffers"]["items"]}
    assert places[first.base]["kind"] == "write"
    assert places[first.base]["state"] == "queued"
    assert places[first.base]["ahead"] == 0
    assert first_wait - since_s - 1 <= places[first.base]["expected_in_s"] <= first_wait + 1
    assert places[second.base]["ahead"] == 1
    assert places[second.base]["expected_in_s"] > places[first.base]["expected_in_s"]
    assert report["limiter"]["waiting"]["write"] == {"queued": 2, "parked": 0}

    text = cli.ok("status", env=one_write).stdout
    assert "write: next, in" in text
    assert "write: 1 ahead, in" in text


def test_status_shows_the_downgrades_written_on_purpose(cli: Cli) -> None:
    """Issue 29, C: what the processes warn about at start, `status` shows too."""
    env = {
        "SHEETSYNC_BROKER_URL": "rediss://:hunter2-secret@127.0.0.1:1/0?ssl_cert_reqs=none",
        "SHEETSYNC_PII_ACCEPT_V1_TOKENS": "true",
        "SHEETSYNC_DEVELOPMENT": "true",
    }
    assert json.loads(cli.ok("status", "--json").stdout)["downgrades"] == []

    report = json.loads(cli.ok("status", "--json", env=env).stdout)
    [broker, accepted, development] = report["downgrades"]
    assert broker.startswith("SHEETSYNC_BROKER_URL has ssl_cert_reqs=none: ")
    assert accepted.startswith("SHEETSYNC_PII_ACCEPT_V1_TOKENS=true: ")
    assert development.startswith("SHEETSYNC_DEVELOPMENT=true: ")

    text = cli.ok("status", env=env).stdout
    for line in report["downgrades"]:
        assert f"warning: {line}" in text
    assert "hunter2" not in text
    assert "warning:" not in cli.ok("status").stdout
