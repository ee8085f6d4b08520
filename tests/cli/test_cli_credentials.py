"""`sheetsync credentials`, through the console script."""

from __future__ import annotations

from datetime import timedelta

from support.cli import Cli

from sheetsync.dev.seed import seed_user
from sheetsync.models import (
    CredentialStatus,
    DeadLetterStatus,
    GoogleCredential,
    utcnow,
)


def test_reconnect_makes_the_owners_entries_due(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        seed_user(session, "owner_1", credential_status=CredentialStatus.INVALID)
    later = utcnow() + timedelta(days=7)
    mine = cli.add_dead_letter(user_id="owner_1", next_attempt_at=later)
    done = cli.add_dead_letter(
        user_id="owner_1", status=DeadLetterStatus.DONE, next_attempt_at=later
    )
    theirs = cli.add_dead_letter(user_id="owner_2", next_attempt_at=later)

    result = cli.ok("credentials", "reconnect", "owner_1")

    assert "credential of owner_1 is VALID; 1 dead letter is due now" in result.stdout
    assert "sheetsync dlq replay --user owner_1" in result.stderr
    with cli.sessions() as session:
        credential = session.get(GoogleCredential, "owner_1")
        assert credential is not None
        assert credential.status is CredentialStatus.VALID
    entry = cli.entry(mine)
    assert entry.status is DeadLetterStatus.PENDING
    assert entry.next_attempt_at <= utcnow()
    assert cli.entry(done).next_attempt_at == later
    assert cli.entry(theirs).next_attempt_at == later


def test_reconnect_of_a_user_without_credential_is_one_line(cli: Cli) -> None:
    result = cli("credentials", "reconnect", "ghost")
    assert result.code == 1
    assert result.error_lines == ["error: user ghost has no Google credential"]
