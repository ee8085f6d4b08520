"""``sheetsync links``: list links, resume a paused one and escape formulas, through the
console script."""

from __future__ import annotations

import json
from datetime import timedelta

from support.cli import Cli

from sheetsync.dev.seed import link_sheet, seed_form
from sheetsync.models import DeadLetterReason, SpreadSheet, utcnow

PROBLEM = "the column 'Count' (question q_2, was E) is no longer in row 1"


def _links(cli: Cli) -> tuple[int, int]:
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id="user_1", submission_id="form_1")
        paused = link_sheet(session, form, "sheet_abc", 0)
        running = link_sheet(session, form, "sheet_def", 7)
        session.flush()
        paused_link = session.get(SpreadSheet, paused.id)
        assert paused_link is not None
        paused_link.paused_reason = PROBLEM
        paused_link.paused_at = utcnow()
        return paused.id, running.id


def test_list_shows_why_a_link_is_paused(cli: Cli) -> None:
    paused, running = _links(cli)
    listed = json.loads(cli.ok("links", "list", "--json").stdout)["links"]
    assert [(row["id"], row["paused_reason"]) for row in listed] == [
        (paused, PROBLEM),
        (running, None),
    ]
    only = json.loads(cli.ok("links", "list", "--paused", "--json").stdout)["links"]
    assert [row["id"] for row in only] == [paused]
    table = cli.ok("links", "list").stdout
    assert "2 links" in table and "sheet_def" in table and "the column 'Count'" in table


def test_resume_makes_the_links_paused_entries_due(cli: Cli) -> None:
    paused, running = _links(cli)
    later = utcnow() + timedelta(days=36_500)
    parked = cli.add_dead_letter(reason=DeadLetterReason.PAUSED, next_attempt_at=later)
    other_sheet = cli.add_dead_letter(
        reason=DeadLetterReason.PAUSED, spread_sheet_id="sheet_def", next_attempt_at=later
    )

    result = cli.ok("links", "resume", str(paused))

    assert f"link {paused} resumed; 1 dead letter due now" in result.stdout
    assert "sheetsync dlq replay" in result.stderr
    assert cli.entry(parked).next_attempt_at <= utcnow()
    assert cli.entry(other_sheet).next_attempt_at == later
    with cli.sessions() as session:
        link = session.get(SpreadSheet, paused)
        assert link is not None and link.paused_reason is None and link.paused_at is None
    again = json.loads(cli.ok("links", "resume", str(running), "--json").stdout)
    assert again == {"link_id": running, "was_paused": False, "due_dead_letters": 0}


def test_resuming_an_unknown_link_is_one_line(cli: Cli) -> None:
    result = cli("links", "resume", "999")
    assert result.code == 1
    assert result.error_lines == ["error: link 999 does not exist"]


def test_escape_formulas_turns_on_and_off_and_list_shows_it(cli: Cli) -> None:
    paused, running = _links(cli)

    result = cli.ok("links", "escape-formulas", str(running))
    assert f"link {running} escapes formula-like text" in result.stdout
    listed = json.loads(cli.ok("links", "list", "--json").stdout)["links"]
    assert {row["id"]: row["escape_formulas"] for row in listed} == {paused: False, running: True}
    assert "escaped" in cli.ok("links", "list").stdout

    off = json.loads(cli.ok("links", "escape-formulas", str(running), "--off", "--json").stdout)
    assert off == {"link_id": running, "escape_formulas": False, "was": True}
    with cli.sessions() as session:
        link = session.get(SpreadSheet, running)
        assert link is not None and link.escape_formulas is False


def test_escaping_formulas_on_an_unknown_link_is_one_line(cli: Cli) -> None:
    result = cli("links", "escape-formulas", "999")
    assert result.code == 1
    assert result.error_lines == ["error: link 999 does not exist"]


def test_on_delete_keeps_rows_with_blank_pii_or_deletes_them(cli: Cli) -> None:
    paused, running = _links(cli)
    result = cli.ok("links", "on-delete", str(running), "--blank-pii")
    assert f"link {running} blanks a deleted answer's personal info" in result.stdout
    listed = json.loads(cli.ok("links", "list", "--json").stdout)["links"]
    assert {row["id"]: row["blank_on_delete"] for row in listed} == {paused: False, running: True}
    assert "blank PII" in cli.ok("links", "list").stdout
    back = json.loads(cli.ok("links", "on-delete", str(running), "--delete-row", "--json").stdout)
    assert back == {"link_id": running, "blank_on_delete": False, "was": True}
    missing = cli("links", "on-delete", "999", "--blank-pii")
    assert missing.code == 1 and missing.error_lines == ["error: link 999 does not exist"]
