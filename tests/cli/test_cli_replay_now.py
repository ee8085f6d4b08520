"""`sheetsync dlq replay --now` against the Sheets API emulator, in this process."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from support.cli import Cli

from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync.dev.seed import link_sheet, seed_answers, seed_form
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    SheetTransaction,
    TransactionType,
    utcnow,
)

OWNER = "owner_1"
ACCOUNT = "google-owner_1"


@dataclass
class Parked:
    entry_id: int
    answer_ids: list[str]
    spreadsheet_id: str
    gid: int
    env: dict[str, str]
    admin: EmulatorAdmin


@pytest.fixture
def parked(cli: Cli, emulator: EmulatorServer, admin: EmulatorAdmin) -> Parked:
    """25 answers of a form parked in one CREDENTIAL dead letter, due in 7 days."""
    admin.add_account(ACCOUNT, f"refresh-{OWNER}")
    spreadsheet_id, gids = admin.create_spreadsheet(ACCOUNT, "Answers", ["Responses"])
    gid = gids["Responses"]
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id=OWNER)
        link_sheet(session, form, spreadsheet_id, gid)
        answer_ids = seed_answers(session, form, 25)
    entry_id = cli.add_dead_letter(
        user_id=OWNER,
        submission_id=form.submission_id,
        spread_sheet_id=spreadsheet_id,
        sheet_id=gid,
        answer_ids=answer_ids,
        next_attempt_at=utcnow() + timedelta(days=7),
    )
    env = {
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-tests",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
        "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
        # Generous: a loaded test machine must not turn a slow answer into a failure.
        "SHEETSYNC_GOOGLE_TIMEOUT_S": "30",
        "SHEETSYNC_BATCH_SIZE": "10",
    }
    return Parked(entry_id, answer_ids, spreadsheet_id, gid, env, admin)


def test_replay_now_appends_the_rows_once(cli: Cli, parked: Parked) -> None:
    result = cli.ok("dlq", "replay", str(parked.entry_id), "--now", env=parked.env)

    assert "DONE" in result.stdout
    assert "25/25" in result.stdout
    assert "25 rows appended" in result.stdout
    rows = parked.admin.sheet_values(parked.spreadsheet_id, parked.gid)
    assert rows[0][:3] == ["Answer ID", "Submitter", "Submitted at"]
    assert [row[0] for row in rows[1:]] == parked.answer_ids
    assert cli.entry(parked.entry_id).status is DeadLetterStatus.DONE
    with cli.sessions() as session:
        states = {t.type for t in session.query(SheetTransaction)}
    assert states == {TransactionType.COMPLETED}

    # Nothing is left to replay, and nothing is appended twice.
    again = cli.ok("dlq", "replay", str(parked.entry_id), "--now", env=parked.env)
    assert f"dead letter {parked.entry_id} is DONE: skipped" in again.stderr
    assert len(parked.admin.sheet_values(parked.spreadsheet_id, parked.gid)) == 26


def test_replay_now_with_a_revoked_account_fails_in_one_line(cli: Cli, parked: Parked) -> None:
    parked.admin.revoke(ACCOUNT)

    result = cli("dlq", "replay", str(parked.entry_id), "--now", env=parked.env)

    assert result.code == 1
    assert "0 rows appended, 25 answers parked again (CREDENTIAL)" in result.stdout
    assert "0/25" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: 1 dead letter replayed, 1 did not finish (id {parked.entry_id}): "
        "see the summary above"
    )
    entry = cli.entry(parked.entry_id)
    assert entry.status is DeadLetterStatus.PENDING
    assert entry.reason is DeadLetterReason.CREDENTIAL
    assert entry.attempts == 1
    assert entry.next_attempt_at > utcnow() + timedelta(days=6)
    with cli.sessions() as session:
        credential = session.get(GoogleCredential, OWNER)
        assert credential is not None
        assert credential.status is CredentialStatus.INVALID
    assert parked.admin.sheet_values(parked.spreadsheet_id, parked.gid) == []


def test_replay_now_waits_for_the_rate_limiter(cli: Cli, parked: Parked) -> None:
    # Two writes a second: the header and 3 appends of 10 cannot all go at once.
    limits = {"SHEETSYNC_RATE_LIMIT_PER_ACCOUNT": "2", "SHEETSYNC_RATE_WINDOW_S": "1"}
    parked.admin.reset_stats()

    result = cli.ok("dlq", "replay", str(parked.entry_id), "--now", env={**parked.env, **limits})

    assert "25/25" in result.stdout
    rows = parked.admin.sheet_values(parked.spreadsheet_id, parked.gid)
    assert [row[0] for row in rows[1:]] == parked.answer_ids
    assert cli.entry(parked.entry_id).status is DeadLetterStatus.DONE
    # The replay waited for its slots: on the emulator's clock (the one Google's windows
    # are on), no three writes fell within one second, and none was refused.
    stats = parked.admin.stats(times=True)
    writes = stats["served_times_by_access"]["write"]
    assert len(writes) >= 4
    assert min(later - first for first, later in zip(writes, writes[2:])) >= 1.0
    assert stats["rate_limited"]["total"] == 0
