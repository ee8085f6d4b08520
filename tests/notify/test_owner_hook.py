"""Owner notifications end to end: a real worker process, the emulator, a revoked Google
account. The hook is called once per owner and topic however many flushes fail, carries
ids and a fixed message but no personal info, and a hook that fails or hangs never holds
up the flushes."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import redis
from sqlalchemy import select
from support.alerts import AlertSink
from support.notify_hooks import received
from support.waiting import wait_until

from sheetsync import credential_reconnected, emit_answer_submitted
from sheetsync.crypto import encrypt_answer_value
from sheetsync.deadletters import replay
from sheetsync.dispatch import QUEUE_SCHEDULED
from sheetsync.models import SpreadSheet, SubmissionAnswer
from sheetsync.notify import CREDENTIAL_INVALID, DEAD_LETTERS_REPLAYED
from sheetsync.redis_keys import owner_notified_key

#: A fake resident registration number in a personal-info answer: never in a payload.
CANARY = f"900101-1{secrets.randbelow(10**6):06d}"


def form_with_canary(world: Any, owner: str, answers: int) -> tuple[Any, Any, list[str]]:
    """A form of ``owner`` linked to a sheet; answer 1's personal info is the canary."""
    form = world.form(owner, steps=1, questions_per_step=3, pii=1, jumbotrons=1)
    sheet = world.sheet(form)
    ids = world.answers(form, answers, prefix=f"{owner}_a")
    question = form.pii_question_ids[0]
    with world.pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, ids[0])
        items = [item for item in answer.answer if item["questionId"] != question]
        token = encrypt_answer_value(CANARY, answer_id=ids[0], question_id=question)
        answer.answer = [*items, {"questionId": question, "value": token}]
    return form, sheet, ids


def dead_lettered(world: Any) -> int:
    return world.ledger_counts().get("DEAD_LETTERED", 0)


def broker_idle(env: dict[str, str]) -> bool:
    """No task waits in the scheduled queue or runs unacknowledged."""
    broker = redis.Redis.from_url(env["SHEETSYNC_BROKER_URL"])
    try:
        return not broker.llen(QUEUE_SCHEDULED) and not broker.hlen("unacked")
    finally:
        broker.close()


def fail_in_rounds(world: Any, ids: list[str], rounds: int) -> None:
    """Emit ``ids`` in ``rounds`` bursts, each after the last one's flush parked it: each
    burst is a flush that fails on the broken credential."""
    size = len(ids) // rounds
    for number in range(rounds):
        burst = ids[number * size : (number + 1) * size]
        for answer_id in burst:
            emit_answer_submitted(answer_id)
        wait_until(lambda n=number: dead_lettered(world) >= (n + 1) * size, timeout=30)
        wait_until(lambda: not world.leftover_keys(), timeout=30)


def test_revoked_credential_calls_the_hook_once_then_replay(
    world, worker_processes, notify_dir, admin, pipeline
):
    workers = worker_processes(owner_hook="support.notify_hooks:record")
    workers.start(concurrency=2)
    form, sheet, ids = form_with_canary(world, "owner_n", 30)
    admin.revoke("google-owner_n")

    fail_in_rounds(world, ids, 3)  # three flushes, each fails on the credential
    wait_until(lambda: received(notify_dir), timeout=30)
    wait_until(lambda: broker_idle(workers.env), timeout=30)

    [notification] = received(notify_dir)
    with pipeline.sessions() as session:
        link_id = session.scalar(
            select(SpreadSheet.id).where(SpreadSheet.submission_id == form.submission_id)
        )
    assert notification["topic"] == CREDENTIAL_INVALID
    assert notification["owner"] == "owner_n"
    assert notification["form_id"] == form.submission_id
    assert notification["link_id"] == link_id
    assert notification["spreadsheet_id"] == sheet.spreadsheet_id
    assert "Reconnect Google" in str(notification["message"])
    # One task was ever sent: the later flushes found the claim and sent nothing.
    assert len(re.findall(r"sheetsync\.notify_owner\[[^\]]+\] received", workers.logs())) == 1
    printed = json.dumps(notification) + workers.logs()
    assert CANARY not in printed
    assert "refresh-owner_n" not in json.dumps(notification)

    # The owner reconnects; the replay tells them their answers are on their way.
    admin.add_account("google-owner_n", "refresh-owner_n")
    credential_reconnected("owner_n", services=pipeline)
    assert replay.dispatch_due(pipeline) == 1
    wait_until(lambda: len(world.ids_in(sheet)) == len(ids), timeout=30)
    wait_until(lambda: len(received(notify_dir)) == 2, timeout=30)
    replayed = received(notify_dir)[1]
    assert replayed["topic"] == DEAD_LETTERS_REPLAYED
    assert (replayed["owner"], replayed["link_id"]) == ("owner_n", link_id)
    assert CANARY not in json.dumps(replayed)


def test_webhook_gets_json_once(world, worker_processes, admin, pipeline):
    sink = AlertSink()
    try:
        workers = worker_processes(owner_hook=sink.url)
        workers.start()
        form, _sheet, ids = form_with_canary(world, "owner_w", 20)
        admin.revoke("google-owner_w")
        fail_in_rounds(world, ids, 2)
        wait_until(lambda: sink.received, timeout=30)
        wait_until(lambda: broker_idle(workers.env), timeout=30)
        [body] = sink.received
        assert (body["topic"], body["owner"], body["form_id"]) == (
            CREDENTIAL_INVALID,
            "owner_w",
            form.submission_id,
        )
        assert CANARY not in json.dumps(body)
    finally:
        sink.close()


def test_a_failing_hook_neither_holds_up_flushes_nor_silences_the_next_event(
    world, worker_processes, notify_dir, admin, pipeline
):
    workers = worker_processes(
        owner_hook="support.notify_hooks:explode", owner_hook_tries=2, owner_hook_retry_base_s=0.05
    )
    workers.start()
    _form, _sheet, broken = form_with_canary(world, "owner_x", 10)
    healthy_form = world.form("owner_ok")
    healthy_sheet = world.sheet(healthy_form)
    healthy = world.answers(healthy_form, 10, prefix="ok")
    admin.revoke("google-owner_x")

    for answer_id in broken + healthy:
        emit_answer_submitted(answer_id)
    wait_until(lambda: dead_lettered(world) == 10, timeout=30)
    wait_until(lambda: len(world.ids_in(healthy_sheet)) == 10, timeout=30)

    tries = notify_dir / "tries.txt"
    wait_until(lambda: tries.exists() and len(tries.read_text().split()) == 2, timeout=30)
    # Every try failed: the claim is released, so the next failure tries again.
    wait_until(lambda: not pipeline.redis.exists(owner_notified_key("owner_x", CREDENTIAL_INVALID)))
    more = world.answers(_form, 5, prefix="owner_x_more")
    for answer_id in more:
        emit_answer_submitted(answer_id)
    wait_until(lambda: len(tries.read_text().split()) == 4, timeout=30)


def test_a_hanging_hook_does_not_delay_other_flushes(
    world, worker_processes, notify_dir, admin, pipeline
):
    workers = worker_processes(owner_hook="support.notify_hooks:hang", owner_hook_timeout_s=1)
    workers.start(concurrency=2)
    _form, _sheet, broken = form_with_canary(world, "owner_h", 5)
    admin.revoke("google-owner_h")
    for answer_id in broken:
        emit_answer_submitted(answer_id)
    wait_until(lambda: dead_lettered(world) == 5, timeout=30)
    wait_until((notify_dir / "hanging").exists, timeout=30)

    # The hook hangs in one pool process; answers keep landing through the other.
    healthy_form = world.form("owner_ok2")
    healthy_sheet = world.sheet(healthy_form)
    healthy = world.answers(healthy_form, 10, prefix="ok2")
    for answer_id in healthy:
        emit_answer_submitted(answer_id)
    wait_until(lambda: len(world.ids_in(healthy_sheet)) == 10, timeout=15)
    assert not broker_idle(workers.env), "the hook is still hanging"
