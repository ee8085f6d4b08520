"""The failure classes of docs/ARCHITECTURE.md ("Failures and dead letters") on real
workers and the emulator: transient, credential and permanent failures."""

from __future__ import annotations

import pytest
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.crypto import Keyring
from sheetsync.errors import (
    ConfigError,
    CredentialError,
    CryptoError,
    MissingKeyError,
    PiiKeysError,
)
from sheetsync.flush.failures import FAILURE_OUTCOMES
from sheetsync.models import DeadLetterReason, DeadLetterStatus


@pytest.mark.parametrize(
    ("fault", "count", "options"),
    [
        ("error", 2, {"status": 503}),
        ("error", 2, {"status": 429}),
        # The client gives up after GOOGLE_TIMEOUT_S=1; the append still commits at 1.5 s,
        # so the retry must find it there rather than append again.
        ("hang", 1, {"seconds": 1.5}),
    ],
    ids=["503", "429", "hang"],
)
def test_transient_faults_recover_through_retries(
    world, pipeline_env, admin, fault, count, options
):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES

    pipeline_env(google_timeout_s=1)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 20)
    admin.add_fault("values.append", count, fault, **options)
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        for answer_id in ids:
            emit_answer_submitted(answer_id)
        wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 20}
    assert sum(admin.stats()["faults_fired"].values()) == count


def test_six_failures_in_a_row_become_a_transient_exhausted_dead_letter(
    world, alerts, worker, admin
):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 10)
    admin.add_fault("values.append", 6, "error", status=503)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(world.dead_letters, timeout=30)
    wait_until(lambda: not world.leftover_keys())
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.TRANSIENT_EXHAUSTED
    assert entry.status is DeadLetterStatus.PENDING
    assert world.ids_of(entry) == sorted(ids)
    assert world.ids_in(sheet) == []
    assert world.ledger_counts() == {"DEAD_LETTERED": 10}
    wait_until(lambda: any("TRANSIENT_EXHAUSTED" in text for text in alerts.texts))


def test_deleted_spreadsheet_and_unknown_gid_fail_permanently_others_flow(
    world, alerts, worker, admin
):
    from sheetsync.dev.seed import link_sheet

    form = world.form()
    healthy = world.sheet(form, "Healthy")
    deleted = world.sheet(form, "Deleted")
    admin.delete_spreadsheet(deleted.spreadsheet_id)
    with world.pipeline.sessions.begin() as session:
        link_sheet(session, form, healthy.spreadsheet_id, 987654)  # no such gid
    ids = world.answers(form, 15)

    for answer_id in ids:
        assert len(emit_answer_submitted(answer_id).enqueued) == 3

    wait_until(lambda: world.ids_in(healthy) == ids)
    wait_until(lambda: len(world.dead_letters()) == 2, timeout=30)
    wait_until(lambda: not world.leftover_keys())
    entries = world.dead_letters()
    assert {e.reason for e in entries} == {DeadLetterReason.PERMANENT}
    assert {e.status for e in entries} == {DeadLetterStatus.FAILED}
    assert {(e.spread_sheet_id, e.sheet_id) for e in entries} == {
        (deleted.spreadsheet_id, deleted.gid),
        (healthy.spreadsheet_id, 987654),
    }
    assert all(world.ids_of(e) == sorted(ids) for e in entries)
    assert world.ledger_counts() == {"COMPLETED": 15, "FAILED": 30}
    texts = " ".join(alerts.texts)
    assert "404" in texts and "987654" in texts


def test_a_renamed_tab_is_looked_up_again_not_dead_lettered(world, worker, admin):
    from sheetsync.redis_keys import BufferKey
    from sheetsync.services import get_services

    form = world.form()
    sheet = world.sheet(form)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    # What a cache looks like after the owner renamed the tab "Old name" to "Responses".
    get_services().store.remember_sheet(key, title="Old name", header_ok=0)
    ids = world.answers(form, 5)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: world.ids_in(sheet) == ids)
    wait_until(lambda: not world.leftover_keys())
    assert world.dead_letters() == []
    assert world.ledger_counts() == {"COMPLETED": 5}


def _handler_for(exc: Exception) -> str:
    """The name of the FAILURE_OUTCOMES handler that ends a run raising ``exc``."""
    return next(handler.__name__ for kind, handler in FAILURE_OUTCOMES if isinstance(exc, kind))


def test_a_missing_pii_key_is_a_configuration_failure_not_the_credentials() -> None:
    """PiiKeysError is a CryptoError too; its ConfigError row must come first."""
    assert _handler_for(PiiKeysError("SHEETSYNC_PII_KEYS is empty")) == "retry"
    assert _handler_for(MissingKeyError("unknown key")) == "retry"
    assert _handler_for(CryptoError("refresh token failed authentication")) == "park_credential"
    assert _handler_for(CredentialError("invalid_grant")) == "park_credential"
    with pytest.raises(PiiKeysError) as caught:
        Keyring([])
    assert isinstance(caught.value, ConfigError)
    assert "sheetsync keys generate" in str(caught.value)
