"""A hung push thread with a full queue: the request drops its push and returns, and the
reconciler pushes the ids it dropped (docs/ARCHITECTURE.md, "Emit" and "Repairs")."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import redis
from sqlalchemy import update
from support.databases import BOTH_DATABASES
from support.waiting import wait_until
from support.world import World

from sheetsync import emit_answer_submitted, wait_for_pushes
from sheetsync.buffers.store import BufferStore
from sheetsync.emit import answers, push_thread
from sheetsync.models import SheetTransaction, utcnow
from sheetsync.recovery import repair
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.settings import Settings

#: How long the held push thread waits before it sends anyway (a request that waited
#: for it would take this long).
HOLD_S = 10.0


class HeldSend:
    """The real send (``answers.push_now``), held until released: a hung push thread."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.sending = threading.Event()
        self.threads: set[str] = set()

    def __call__(self, services: Services, pushes: push_thread.Pushes) -> bool:
        self.threads.add(threading.current_thread().name)
        self.sending.set()
        self.release.wait(HOLD_S)
        return answers.push_now(services, pushes)


def emit_and_commit(pipeline: Services, answer_id: str) -> Any:
    with pipeline.sessions.begin() as session:
        return emit_answer_submitted(answer_id, session=session)


def buffered(pipeline: Services, key: BufferKey) -> list[str]:
    return [raw.decode() for raw in pipeline.redis.lrange(key.buf, 0, -1)]


@pytest.mark.timing
def test_a_full_queue_drops_the_push_and_the_reconciler_lands_the_ids(
    world: World, pipeline: Services, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 4)
    held = HeldSend()
    monkeypatch.setattr(push_thread, "_thread", push_thread.PushThread(held, max_waiting=2))

    emit_and_commit(pipeline, ids[0])
    assert held.sending.wait(5)  # the thread took the first commit, and hangs
    for answer_id in ids[1:3]:
        emit_and_commit(pipeline, answer_id)  # the queue is full now
    started = time.monotonic()
    [key] = emit_and_commit(pipeline, ids[3]).enqueued
    took = time.monotonic() - started

    assert took < HOLD_S / 10, f"the request waited {took:.2f} s for the hung push thread"
    assert held.threads == {"sheetsync-push"}
    held.release.set()
    assert wait_for_pushes()
    assert ids[3] not in buffered(pipeline, key)  # dropped: committed ENQUEUED, not pushed
    wait_until(lambda: world.ids_in(sheet) == ids[:3])
    # Settled and trimmed: the reconciler, reading between the two, would push them again.
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 3, "ENQUEUED": 1})
    wait_until(lambda: not buffered(pipeline, key))
    assert repair.reconcile(pipeline).answers == 1  # RECONCILE_AFTER_S is 0 in tests
    wait_until(lambda: world.ids_in(sheet) == ids)


@BOTH_DATABASES
def test_the_reconciler_finds_a_dropped_push_behind_newer_ids(
    world: World, pipeline: Services, monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    """A busy buffer holds ids newer than RECONCILE_AFTER_S: their number must not hide
    older ids that never reached it (the dropped pushes of an overloaded web app)."""
    form = world.form()
    world.sheet(form)
    dropped, *newer = world.answers(form, 3)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise redis.ConnectionError("Connection refused")

    with monkeypatch.context() as patched:  # its push never reached Redis
        patched.setattr(BufferStore, "push", refuse)
        [key] = emit_answer_submitted(dropped).enqueued
    with pipeline.sessions.begin() as session:  # committed two minutes ago
        session.execute(
            update(SheetTransaction)
            .where(SheetTransaction.submission_answer_id == dropped)
            .values(updated_at=utcnow() - timedelta(minutes=2))
        )
    for answer_id in newer:
        emit_and_commit(pipeline, answer_id)
    assert wait_for_pushes()
    assert buffered(pipeline, key) == newer  # no worker: they wait in the buffer

    settings = Settings.load(reconcile_after_s=60)
    beat = Services.build(settings, engine=pipeline.engine, client=pipeline.redis)
    assert repair.reconcile(beat).answers == 1
    assert buffered(pipeline, key) == [*newer, dropped]
