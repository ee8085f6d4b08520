"""A revoked Google account mid-burst: one dead letter, an alert, and one command back."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import select
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    SheetTransaction,
    TransactionType,
)

SHEETSYNC = str(Path(sys.executable).with_name("sheetsync"))


def sheetsync(env, *args):
    return subprocess.run(
        [SHEETSYNC, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_revoked_mid_burst_then_reconnect_and_replay(world, pipeline_env, alerts, admin):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES

    env = pipeline_env(flush_threshold=100, batch_size=100)
    env = {**__import__("os").environ, **env}
    pipeline = world.pipeline
    form = world.form("owner_r")
    sheet = world.sheet(form)
    ids = world.answers(form, 2000)
    admin.set_quotas(write_per_account=40, read_per_account=40, window_s=60)  # a slow sheet

    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        producer = threading.Thread(target=lambda: [emit_answer_submitted(i) for i in ids])
        producer.start()
        wait_until(lambda: len(world.ids_in(sheet)) >= 200, timeout=60)
        admin.revoke("google-owner_r")
        producer.join()

        def settled() -> bool:
            with pipeline.sessions() as session:
                return (
                    not session.scalar(
                        select(SheetTransaction.id)
                        .where(SheetTransaction.type == TransactionType.ENQUEUED)
                        .limit(1)
                    )
                    and not world.leftover_keys()
                )

        wait_until(settled, timeout=120, interval=0.25)
        landed = world.ids_in(sheet)
        [entry] = world.dead_letters()
        assert entry.reason is DeadLetterReason.CREDENTIAL
        assert entry.status is DeadLetterStatus.PENDING
        assert 0 < len(landed) < 2000
        assert world.ids_of(entry) == sorted(set(ids) - set(landed))
        wait_until(lambda: any("CREDENTIAL" in text and "owner_r" in text for text in alerts.texts))
        with pipeline.sessions() as session:
            assert session.get(GoogleCredential, "owner_r").status is CredentialStatus.INVALID

        # The owner reconnects: the account works again, the operator replays.
        admin.add_account("google-owner_r", "refresh-owner_r")
        admin.set_quotas(write_per_account=1000, read_per_account=1000)
        reconnect = sheetsync(env, "credentials", "reconnect", "owner_r")
        assert reconnect.returncode == 0, reconnect.stderr
        replay = sheetsync(env, "dlq", "replay", "--user", "owner_r")
        assert replay.returncode == 0, replay.stderr

        wait_until(lambda: len(world.ids_in(sheet)) == 2000, timeout=60)
        wait_until(
            lambda: (
                world.complete_replays() and world.dead_letters()[0].status is DeadLetterStatus.DONE
            )
        )
    final = world.ids_in(sheet)
    assert sorted(final) == sorted(ids), "every answer exactly once"
    assert world.ledger_counts() == {"COMPLETED": 2000}
