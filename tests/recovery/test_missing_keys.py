"""A PII key missing at run time is the operator's configuration, never the owner's
credential: the buffer is retried, then parked in a CONFIGURATION dead letter with an
operator alert; the credential stays VALID, no owner is notified, and no CREDENTIAL
dead letter appears. Once the key is back, a replay delivers, and the flush that lands
its last answer marks it DONE: no beat runs in these tests."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from support.notify_hooks import received
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.deadletters import replay, store
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
)
from sheetsync.redis_keys import OWNER_NOTIFIED

HOOK = "support.notify_hooks:record"


def encoded(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode()


def parked_for_configuration(world: Any, ids: list[str], alerts: Any, notify_dir: Path) -> Any:
    """Wait for the one dead letter; check it is the operator's, not the owner's."""
    wait_until(world.dead_letters, timeout=30)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    [entry] = world.dead_letters()
    assert entry.reason is DeadLetterReason.CONFIGURATION
    assert entry.status is DeadLetterStatus.PENDING
    assert "SHEETSYNC_PII_KEYS" in (entry.error_message or "")
    assert world.ids_of(entry) == sorted(ids)
    assert world.ledger_counts() == {"DEAD_LETTERED": len(ids)}
    with world.pipeline.sessions() as session:
        credential = session.get(GoogleCredential, entry.user_id)
        assert credential.status is CredentialStatus.VALID
    wait_until(lambda: any("CONFIGURATION: " in text for text in alerts.texts))
    assert all("SHEETSYNC_PII_KEYS" in text for text in alerts.texts), alerts.texts
    assert not any("CREDENTIAL" in text for text in alerts.texts), alerts.texts
    # The owner hook is claimed in Redis before it is sent: nothing was ever claimed.
    assert list(world.pipeline.redis.scan_iter(f"{OWNER_NOTIFIED}*")) == []
    assert received(notify_dir) == []
    return entry


def test_a_refresh_token_under_a_removed_key(
    world, worker_processes, pii_keys, alerts, notify_dir, pipeline_env
):
    """A real worker whose SHEETSYNC_PII_KEYS lost the key the owner's refresh token (and
    their answers) were sealed with."""
    newest, older = (encoded(key) for key in pii_keys)
    form = world.form("owner_k", steps=1, questions_per_step=2, pii=1)
    sheet = world.sheet(form)
    ids = world.answers(form, 5)  # the refresh token and personal info: under ``newest``
    workers = worker_processes(pii_keys=older, owner_hook=HOOK, retry_max=1)
    workers.start()

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    entry = parked_for_configuration(world, ids, alerts, notify_dir)
    assert "unknown key" in (entry.error_message or "")
    assert world.ids_in(sheet) == []

    # The operator puts the key back and replays: no beat, the flush marks it DONE.
    workers.stop()
    worker_processes(pii_keys=f"{older},{newest}", owner_hook=HOOK).start()
    store.make_due(world.pipeline.sessions, ids=[entry.id])
    assert replay.dispatch_due(world.pipeline) == 1
    wait_until(lambda: world.ids_in(sheet) == ids, timeout=30)
    wait_until(lambda: world.dead_letters()[0].status is DeadLetterStatus.DONE, timeout=30)
    assert world.ledger_counts() == {"COMPLETED": 5}


def test_keys_emptied_under_a_running_worker(world, worker, pipeline_env, alerts, notify_dir):
    """The issue's case: a worker whose keys are empty (a real one now refuses to start,
    tests/test_startup.py; here an in-process worker whose environment is emptied). The
    owner used to get "reconnect Google" for the operator's mistake."""
    pipeline_env(owner_hook=HOOK, retry_max=1)
    form = world.form("owner_e", steps=1, questions_per_step=2, pii=1)
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    pipeline_env(pii_keys="")

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    entry = parked_for_configuration(world, ids, alerts, notify_dir)
    assert "SHEETSYNC_PII_KEYS is empty" in (entry.error_message or "")
    assert world.ids_in(sheet) == []
