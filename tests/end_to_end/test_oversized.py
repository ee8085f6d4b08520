"""One answer never fails its neighbours (security round 3, item 1): an answer above the
request budget is cut to fit (or fails alone), and a 413 or another unexplained 4xx on an
append fails only the rows that cause it. The emulator refuses a body above its limit as
Google does; here its limit is the budget, so any request built above it fails."""

from __future__ import annotations

from sqlalchemy import select
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.flush.batches import TOO_LARGE
from sheetsync.models import DeadLetterReason, SheetTransaction, SubmissionAnswer, TransactionType

REQUEST_BYTES_MAX = 200_000
EURO = "€"  # 6 bytes in the request: 50,000 of them are 300 kB, within the cell cut
BIG_MARK = "BIGANSWER"


def ledger(world, sheet):
    with world.pipeline.sessions() as session:
        rows = session.scalars(
            select(SheetTransaction).where(SheetTransaction.spread_sheet_id == sheet.spreadsheet_id)
        )
        return {row.submission_answer_id: (row.type, row.error_message) for row in rows}


def make_big(world, form, answer_id):
    """Every question of the answer holds 50,000 euro signs (after a mark to match)."""
    with world.pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, answer_id)
        answer.answer = [
            {"questionId": column.id, "value": BIG_MARK + EURO * 49_990} for column in form.columns
        ]


def setup(world, pipeline_env, admin, **form_options):
    pipeline_env(request_bytes_max=REQUEST_BYTES_MAX)
    admin.set_settings(max_request_bytes=REQUEST_BYTES_MAX)
    form = world.form(pii=0, **form_options)
    sheet = world.sheet(form)
    ids = world.answers(form, 12)
    return form, sheet, ids


def test_an_answer_above_the_request_budget_is_cut_to_fit_and_its_neighbours_land(
    world, pipeline_env, worker, admin
):
    form, sheet, ids = setup(world, pipeline_env, admin)
    make_big(world, form, ids[5])

    emit_answers_submitted(ids)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 12}
    assert world.dead_letters() == []
    big_row = world.rows(sheet)[1 + 5]
    cut = [cell for cell in big_row[3:] if cell.startswith(BIG_MARK)]
    assert cut and all(cell.endswith("chars]") for cell in cut)


def test_an_answer_that_cannot_be_cut_to_fit_fails_alone(world, pipeline_env, worker, admin):
    # 50 questions of 50,000 characters: even cut to their markers, too large for a
    # 10 kB request.
    pipeline_env(request_bytes_max=10_000)
    admin.set_settings(max_request_bytes=10_000)
    form = world.form(pii=0, steps=5, questions_per_step=10)
    sheet = world.sheet(form)
    ids = world.answers(form, 6)
    make_big(world, form, ids[2])

    emit_answers_submitted(ids)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == [i for i in ids if i != ids[2]]
    assert ledger(world, sheet)[ids[2]] == (TransactionType.FAILED, f"answer {ids[2]}: {TOO_LARGE}")
    assert world.dead_letters() == []


def test_a_413_on_an_append_fails_only_the_row_that_causes_it(world, pipeline_env, worker, admin):
    form, sheet, ids = setup(world, pipeline_env, admin)
    make_big(world, form, ids[5])
    admin.add_fault("values.append", 100, "error", status=413, match=BIG_MARK)

    emit_answers_submitted(ids)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == [i for i in ids if i != ids[5]]
    states = ledger(world, sheet)
    kind, reason = states[ids[5]]
    assert kind is TransactionType.FAILED and "413" in reason, reason
    assert {states[i][0] for i in ids if i != ids[5]} == {TransactionType.COMPLETED}
    assert world.dead_letters() == []


def test_an_unexplained_4xx_for_every_row_parks_the_buffer_after_two_lone_rows(
    world, pipeline_env, worker, admin
):
    """A 4xx that refuses every request is the request's fault: the search for the rows
    stops at the first two sent alone (a few requests, not two per row)."""
    _, sheet, ids = setup(world, pipeline_env, admin)
    admin.reset_stats()
    admin.add_fault("values.append", 1000, "error", status=409)

    emit_answers_submitted(ids)
    wait_until(world.dead_letters, timeout=30)

    [letter] = world.dead_letters()
    assert letter.reason == DeadLetterReason.PERMANENT
    assert world.ids_in(sheet) == []
    appends = admin.stats()["requests"]["by_kind"]["values.append"]
    assert appends <= 6, appends  # 12 rows, halved to one: 4 requests, then the second
