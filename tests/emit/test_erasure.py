"""Erasure end to end (real Redis, an in-process worker, the emulator through the real
client, SQLite and PostgreSQL): rows leave every linked sheet, ids leave Redis and dead
letters, nothing writes them again, and an unreachable sheet's erasure stays pending and
visible until its owner reconnects."""

from __future__ import annotations

import json

from sqlalchemy import update
from support.cli import run_here
from support.databases import BOTH_DATABASES
from support.notify_hooks import received
from support.waiting import wait_until

from sheetsync import credential_reconnected, crypto, emit_answers_submitted
from sheetsync.emit.erasure import erase, erasure_status
from sheetsync.models import (
    GoogleCredential,
    QuestionType,
    SpreadSheet,
)
from sheetsync.redis_keys import PREFIX

pytestmark = BOTH_DATABASES


def ids_in_redis(world) -> set[str]:
    """Every answer id in any buffer list."""
    client = world.pipeline.redis
    found: set[str] = set()
    for key in client.scan_iter(f"{PREFIX}:{{*}}:buf"):
        found |= {raw.decode() for raw in client.lrange(key, 0, -1)}
    return found


def test_an_erasure_removes_the_rows_from_every_linked_sheet(world, worker):
    form = world.form()
    sheets = [world.sheet(form, "Responses"), world.sheet(form, "Copy")]
    ids = world.answers(form, 4)
    emit_answers_submitted(ids)
    for sheet in sheets:
        wait_until(lambda sheet=sheet: world.ids_in(sheet) == ids)
    first = erase(ids[1:3], services=world.pipeline)
    assert {(p.answer_id, p.outcome) for p in first.places} <= {
        (i, o) for i in ids[1:3] for o in ("erased", "pending")
    }
    wait_until(lambda: erasure_status(ids[1:3], services=world.pipeline).done)
    report = erasure_status([*ids[1:3], "ans_never"], services=world.pipeline)
    assert len(report.places) == 4  # two answers, two sheets
    assert {place.detail for place in report.places} == {"its row was removed"}
    assert report.never_sent == ("ans_never",)
    for sheet in sheets:
        assert world.ids_in(sheet) == [ids[0], ids[3]]
    wait_until(lambda: not world.leftover_keys())
    assert not ids_in_redis(world) & set(ids[1:3])
    assert world.ledger_counts() == {"COMPLETED": 4, "DELETED": 4}


def test_an_unreachable_sheet_keeps_its_erasure_pending_until_the_owner_reconnects(
    world, worker, admin, pipeline_env
):
    env = pipeline_env()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    admin.revoke(f"google-{form.owner_id}")

    cli = run_here(["erase", ids[0], "--wait", "20", "--json"], env, None)
    assert cli.code == 3, cli.stderr  # not done: pending
    report = json.loads(cli.stdout)
    [place] = report["places"]
    assert place["outcome"] == "pending" and not report["done"]
    assert "credential" in place["detail"] or "dead letter" in place["detail"]
    assert world.ids_in(sheet) == ids  # nothing says erased before it is
    wait_until(world.dead_letters)  # parked with the credential's failure
    [entry] = world.dead_letters()
    assert world.ids_of(entry) == [ids[0]]

    token = "refresh-again"
    admin.add_account(f"google-{form.owner_id}", token)
    with world.pipeline.sessions.begin() as session:
        session.execute(
            update(GoogleCredential)
            .where(GoogleCredential.user_id == form.owner_id)
            .values(refresh_token=crypto.encrypt_refresh_token(token, user_id=form.owner_id))
        )
    credential_reconnected(form.owner_id, services=world.pipeline)
    from sheetsync.deadletters import replay

    for claimed in replay.claim_due(world.pipeline.sessions):
        replay.replay(world.pipeline, claimed)
    wait_until(lambda: world.ids_in(sheet) == ids[1:])
    # The run records the deletion after Google applied it: the sheet shows it first.
    wait_until(lambda: erasure_status([ids[0]], services=world.pipeline).done)
    done = run_here(["erase", ids[0], "--check"], env, None)
    assert done.code == 0 and "1 answer in 1 sheet: 1 erased, 0 pending" in done.stdout


def test_an_erasure_takes_the_ids_out_of_dead_letters_and_no_replay_brings_them_back(
    world, worker, pipeline_env
):
    env = pipeline_env()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    with world.pipeline.sessions.begin() as session:
        session.get(GoogleCredential, form.owner_id).status = "INVALID"
    emit_answers_submitted(ids)
    wait_until(lambda: world.ledger_counts() == {"DEAD_LETTERED": 3})
    [entry] = world.dead_letters()

    report = erase(ids[:2], services=world.pipeline)
    assert report.taken_from_dead_letters == 2
    assert report.pending and all(p.outcome == "pending" for p in report.places)
    # The sheet is still unreachable: the deletions wait with their buffer, in a dead
    # letter again, visible as pending; nothing of them is in the sheet.
    wait_until(lambda: world.ids_of(world.dead_letters()[0]) == sorted(ids))
    status = run_here(["erase", "--check", "--json", *ids[:2]], env, None)
    assert status.code == 3
    details = {place["detail"] for place in json.loads(status.stdout)["places"]}
    assert details <= {
        "in a CREDENTIAL dead letter",
        "the owner's Google credential is INVALID: applied on reconnect",
    }

    with world.pipeline.sessions.begin() as session:
        session.get(GoogleCredential, form.owner_id).status = "VALID"
    credential_reconnected(form.owner_id, services=world.pipeline)
    from sheetsync.deadletters import replay

    def replayed():
        for claimed in replay.claim_due(world.pipeline.sessions):
            replay.replay(world.pipeline, claimed)
        return world.ledger_counts() == {"COMPLETED": 1, "DELETED": 2}

    wait_until(replayed, timeout=30, interval=0.5)
    assert world.ids_in(sheet) == [ids[2]]  # never written, never requested
    [place] = erasure_status([ids[0]], services=world.pipeline).places
    assert place.detail == "deleted before its row was written"
    assert entry.id == world.dead_letters()[0].id


def test_erase_reads_ids_from_a_file_and_says_what_it_needs(world, worker, pipeline_env, tmp_path):
    env = pipeline_env()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    listing = tmp_path / "person.txt"
    listing.write_text(f"{ids[0]}\n\n{ids[2]}\n")
    result = run_here(["erase", "--file", str(listing)], env, None)
    assert result.code == 0, result.stderr
    assert "2 answers in 1 sheet: 2 erased, 0 pending" in result.stdout
    assert world.ids_in(sheet) == [ids[1]]
    nothing = run_here(["erase"], env, None)
    assert nothing.code == 1 and "say which answers to erase" in nothing.stderr
    bad = run_here(["erase", "not an id!"], env, None)
    assert bad.code == 1 and len(bad.error_lines) == 1


def test_a_link_that_keeps_rows_blanks_the_personal_info_instead(world, worker):
    form = world.form(pii=1)
    sheet = world.sheet(form)
    with world.pipeline.sessions.begin() as session:
        session.execute(update(SpreadSheet).values(blank_on_delete=True))
    ids = world.answers(form, 2)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    before = world.rows(sheet)
    header = before[0]
    pii = [q for q in form.columns if q.type is QuestionType.PERSONAL_INFO]
    blanked = {header.index("Submitter"), *(header.index(q.title) for q in pii)}
    erase([ids[0]], services=world.pipeline)
    wait_until(lambda: erasure_status([ids[0]], services=world.pipeline).done)
    after = world.rows(sheet)
    assert [row[0] for row in after[1:]] == ids  # the row stays
    row = after[1] + [""] * (len(header) - len(after[1]))
    old = before[1] + [""] * (len(header) - len(before[1]))
    for column, title in enumerate(header):
        if column in blanked:
            assert row[column] == "", title
        else:
            assert row[column] == old[column], title
    assert any(old[column] for column in blanked)  # there was personal info to blank
    [place] = erasure_status([ids[0]], services=world.pipeline).places
    assert place.detail == "its personal-info cells were blanked (the link keeps rows)"


def test_the_owner_is_told_when_an_erasure_cannot_be_applied(
    world, worker, pipeline_env, notify_dir, admin
):
    pipeline_env(owner_hook="support.notify_hooks:record")
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 2)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    admin.revoke(f"google-{form.owner_id}")
    erase([ids[0]], services=world.pipeline)

    def topics() -> set[object]:
        return {notification["topic"] for notification in received(notify_dir)}

    wait_until(lambda: {"credential_invalid", "erasure_pending"} <= topics(), timeout=30)
    [told] = [n for n in received(notify_dir) if n["topic"] == "erasure_pending"]
    assert told["owner"] == form.owner_id and told["spreadsheet_id"] == sheet.spreadsheet_id
    assert ids[0] not in json.dumps(told)  # ids and a fixed message, nothing of the answer
