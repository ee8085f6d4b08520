"""The dead-letter store: one open entry per buffer and reason, however many park at once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from sheetsync.deadletters import replay, store
from sheetsync.models import DeadLetterReason, utcnow
from sheetsync.redis_keys import BufferKey


def park(world, form, sheet, ids, reason=DeadLetterReason.CREDENTIAL, delay_s=0.0):
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    with world.pipeline.sessions.begin() as session:
        entry = store.park(session, key, ids, reason, "test", delay_s=delay_s)
        return entry.id


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_concurrent_parks_for_one_buffer_make_one_entry(world, db_url):
    """A flush and several emits park ids of one buffer at the same moment: one entry,
    every id in it."""
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 40)
    start = threading.Barrier(8)

    def parker(chunk: list[str]) -> None:
        start.wait()
        park(world, form, sheet, chunk)

    threads = [threading.Thread(target=parker, args=(ids[n::8],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [entry] = world.dead_letters()
    assert world.ids_of(entry) == sorted(ids)


def test_credential_entries_merge_and_wait_seven_days(world, pipeline):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 4)
    first = park(world, form, sheet, ids[:2], delay_s=7 * 86400)
    second = park(world, form, sheet, ids[1:], delay_s=7 * 86400)
    assert first == second
    [entry] = world.dead_letters()
    assert world.ids_of(entry) == sorted(ids)
    assert timedelta(days=6.9) < entry.next_attempt_at - utcnow() <= timedelta(days=7)
    assert replay.claim_due(pipeline.sessions) == []  # not due
