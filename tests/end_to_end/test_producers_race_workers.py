"""Race real producers against real worker processes (the invariants I1-I3 of
docs/ARCHITECTURE.md, "Invariants")."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import SheetTransaction, TransactionType
from sheetsync.recovery import repair
from sheetsync.services import get_services

PRODUCERS = 8
ANSWERS = 5000
FORMS = 10  # each linked to two sheets: 20 sheets


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_producers_race_two_worker_processes(world, worker_processes, db_url):
    workers = worker_processes(flush_delay_s=0.3, flush_threshold=100, lease_s=10)
    pipeline = get_services()
    forms = [world.form(f"owner{n % 3}") for n in range(FORMS)]
    sheets = {
        form.submission_id: [world.sheet(form, "A"), world.sheet(form, "B")] for form in forms
    }
    # Producer p emits answers p, p+8, p+16, ... cycling over the forms.
    per_form: dict[str, list[str]] = {form.submission_id: [] for form in forms}
    plan: list[list[tuple[str, str]]] = [[] for _ in range(PRODUCERS)]
    for number in range(ANSWERS):
        form = forms[number % FORMS]
        [answer_id] = world.answers(form, 1, prefix="race", start=number)
        per_form[form.submission_id].append(answer_id)
        plan[number % PRODUCERS].append((form.submission_id, answer_id))
    workers.start(2)

    errors: list[BaseException] = []

    def produce(items: list[tuple[str, str]]) -> None:
        try:
            for _, answer_id in items:
                emit_answer_submitted(answer_id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=produce, args=(items,)) for items in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    emitted_in = time.monotonic() - started

    def all_landed() -> bool:
        with pipeline.sessions() as session:
            completed = session.scalar(
                select(func.count()).where(SheetTransaction.type == TransactionType.COMPLETED)
            )
        return completed == 2 * ANSWERS

    wait_until(all_landed, timeout=240, interval=0.5)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    repair.sweep(pipeline)  # nothing to repair: a stranded buffer would show here
    assert not world.leftover_keys()

    for form in forms:
        for sheet in sheets[form.submission_id]:
            landed = world.ids_in(sheet)
            assert sorted(landed) == sorted(per_form[form.submission_id]), "each answer once"
            position = {answer_id: n for n, answer_id in enumerate(landed)}
            for items in plan:
                mine = [a for s, a in items if s == form.submission_id]
                assert [position[a] for a in mine] == sorted(position[a] for a in mine), (
                    "a producer's answers keep their emit order"
                )
    print(f"emitted {ANSWERS} answers x 2 sheets in {emitted_in:.1f}s")
