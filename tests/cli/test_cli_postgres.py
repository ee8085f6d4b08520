"""The commands whose SQL differs by backend, on PostgreSQL."""

from __future__ import annotations

import json

import pytest
from support.cli import Cli

from sheetsync.dev.seed import seed_user
from sheetsync.models import CredentialStatus, DeadLetterReason, DeadLetterStatus, utcnow

pytestmark = pytest.mark.postgres


def test_dead_letters_on_postgres(pg_cli: Cli) -> None:
    cli = pg_cli
    with cli.sessions.begin() as session:
        seed_user(session, "alice", credential_status=CredentialStatus.INVALID)
    alice = cli.add_dead_letter(user_id="alice", answer_ids=["a_1", "a_2", "a_3"])
    failed = cli.add_dead_letter(
        user_id="bob", status=DeadLetterStatus.FAILED, reason=DeadLetterReason.PERMANENT
    )

    listed = json.loads(cli.ok("dlq", "list", "--json").stdout)
    assert [(e["id"], e["answer_count"]) for e in listed["entries"]] == [(alice, 3), (failed, 2)]
    mine = json.loads(cli.ok("dlq", "list", "--user", "alice", "--json").stdout)
    assert [e["id"] for e in mine["entries"]] == [alice]
    assert json.loads(cli.ok("dlq", "show", str(alice), "--json").stdout)["answer_ids"] == [
        "a_1",
        "a_2",
        "a_3",
    ]

    status = json.loads(cli.ok("status", "--json").stdout)
    assert status["dead_letters"]["by_status"] == {"FAILED": 1, "PENDING": 1}

    reconnected = cli.ok("credentials", "reconnect", "alice")
    assert "1 dead letter is due now" in reconnected.stdout
    assert cli.entry(alice).next_attempt_at <= utcnow()

    sent = cli.ok("dlq", "replay", "--user", "alice")
    assert f"sent 1 dead letter to the workers (id {alice})" in sent.stdout
    assert cli.entry(alice).status is DeadLetterStatus.REPLAYING

    cli.ok("dlq", "purge", str(failed), "--yes")
    assert cli.entry(failed).status is DeadLetterStatus.PURGED
    assert cli("dlq", "show", "999").error_lines == ["error: dead letter 999 does not exist"]
