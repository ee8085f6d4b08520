"""A Google account id goes into Redis key names (the rate limiter's windows) only when
it is a plain id: ``acct:tickets`` would be account ``acct``'s tickets key. A credential
holding such an id parks its answers in a CREDENTIAL dead letter (a reconnect writes a
fresh id) and touches no key."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.errors import ValidationError
from sheetsync.models import CredentialStatus, DeadLetterReason, GoogleCredential
from sheetsync.redis_keys import PREFIX, is_account_id, rate_account_key


@pytest.mark.parametrize("account", ["104532948276123456789", "owner@example.com", "google-o_1"])
def test_plain_ids_name_their_window(account):
    assert is_account_id(account)
    assert rate_account_key(account, "write") == f"{PREFIX}:rate:write:account:{account}"
    assert rate_account_key(account, "read") == f"{PREFIX}:rate:read:account:{account}"


@pytest.mark.parametrize("account", ["acct:tickets", "", "a b", "a\nb", "a*", "x" * 255])
def test_an_id_a_key_cannot_hold_is_refused(account):
    assert not is_account_id(account)
    with pytest.raises(ValidationError, match="characters a key cannot hold"):
        rate_account_key(account, "write")


def test_a_credential_with_a_colliding_id_parks_its_answers_and_touches_no_key(
    world, pipeline_env, worker
):
    victim = world.form("victim")
    victim_sheet = world.sheet(victim)
    forger = world.form("forger")
    forger_sheet = world.sheet(forger)
    with world.pipeline.sessions.begin() as session:
        session.execute(
            update(GoogleCredential)
            .where(GoogleCredential.user_id == "forger")
            .values(google_account_id="google-victim:tickets")
        )
    victim_ids = world.answers(victim, 3, prefix="v")
    forger_ids = world.answers(forger, 3, prefix="f")

    emit_answers_submitted(victim_ids + forger_ids)

    wait_until(lambda: len(world.ids_in(victim_sheet)) == 3 and world.dead_letters(), timeout=20)
    [parked] = world.dead_letters()
    assert parked.reason is DeadLetterReason.CREDENTIAL and parked.user_id == "forger"
    assert sorted(world.ids_of(parked)) == sorted(forger_ids)
    assert world.ids_in(forger_sheet) == []
    with world.pipeline.sessions() as session:
        assert session.get(GoogleCredential, "forger").status is CredentialStatus.INVALID
        assert session.get(GoogleCredential, "victim").status is CredentialStatus.VALID
    # The forger's malformed id named no window (it would have been "google-victim"'s
    # window with a suffix).
    for kind in ("read", "write"):
        forged_window = f"{PREFIX}:rate:{kind}:account:google-victim:tickets"
        assert world.pipeline.redis.exists(forged_window) == 0
