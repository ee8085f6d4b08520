"""``sheetsync backfill`` as a subprocess: it records and queues what is missing, once."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from sheetsync.dev.seed import link_sheet, seed_answers, seed_form
from sheetsync.models import SheetTransaction


def test_backfill_queues_a_forms_answers_once_and_says_so_in_json(cli):
    with cli.sessions.begin() as session:
        form = seed_form(session, steps=1, questions_per_step=2, pii=0, jumbotrons=0)
        seed_answers(session, form, 25)
        link = link_sheet(session, form, "spreadsheet_1", 0)
        link_id = link.id

    first = cli.ok("backfill", "--form", form.submission_id, "--no-wait", "--json")
    assert json.loads(first.stdout) == {
        "form": form.submission_id,
        "read": 25,
        "sent": 25,
        "drained": False,
    }
    with cli.sessions() as session:
        assert session.scalar(select(func.count()).select_from(SheetTransaction)) == 25
    buffers = [key for key in cli.redis.scan_iter("sheetsync:{*}:buf")]
    assert len(buffers) == 1 and cli.redis.llen(buffers[0]) == 25

    again = cli.ok("backfill", "--form", form.submission_id, "--link", str(link_id), "--no-wait")
    assert "25 answers read, 0 answers sent" in again.stdout
    assert "every answer was in its sheets already" in again.stderr
    assert cli.redis.llen(buffers[0]) == 25


def test_backfill_of_an_unknown_form_is_one_error_line(cli):
    result = cli("backfill", "--form", "no_such_form")
    assert result.code == 1
    assert result.error_lines == ["error: form no_such_form does not exist"]


def test_backfill_refuses_a_date_it_cannot_read(cli):
    result = cli("backfill", "--form", "f", "--since", "yesterday")
    assert result.code == 2
