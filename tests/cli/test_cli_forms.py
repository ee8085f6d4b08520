"""``sheetsync forms``: list forms, and show a form's questions with their ids, types and
columns, through the console script."""

from __future__ import annotations

import json

from sqlalchemy import delete, update
from sqlalchemy.orm import Session
from support.cli import Cli

from sheetsync.dev.seed import SeededForm, link_sheet, seed_form
from sheetsync.flush.columns import column_map, plan_header, save, sync_with_form
from sheetsync.flush.layout import load_layout
from sheetsync.models import Question, QuestionType, SpreadSheet, Step, Submission, utcnow
from sheetsync.settings import get_settings

#: Owner text a terminal must not act on, and rich must not read as markup.
HOSTILE = "Phone [bold]red[/] \x1b[2J\x1b]0;pwned\x07 번호"


def _first_write(session: Session, link_id: int, form_id: str) -> None:
    """The column map as a link's first write leaves it (row 1 was empty, every title is
    written there now), made by the flush's own functions, without Google."""
    sync_with_form(session, link_id, load_layout(session, form_id), get_settings())
    save(session, link_id, plan_header([], column_map(session, link_id)), set())


def _form(cli: Cli) -> tuple[SeededForm, int, int]:
    """form_1: step 1 holds a JUMBOTRON, a SHORT_TEXT and a SINGLE_CHOICE question, step 2
    a PERSONAL_INFO and a LONG_TEXT one; linked to two sheets, the first written once."""
    with cli.sessions.begin() as session:
        form = seed_form(
            session,
            owner_id="user_1",
            submission_id="form_1",
            steps=2,
            questions_per_step=2,
            pii=1,
        )
        first = link_sheet(session, form, "sheet_abc", 0)
        second = link_sheet(session, form, "sheet_def", 7)
        session.flush()
        _first_write(session, first.id, form.submission_id)
        return form, first.id, second.id


def test_show_lists_the_questions_in_form_order_with_their_columns(cli: Cli) -> None:
    form, first, second = _form(cli)
    with cli.sessions.begin() as session:
        # Step 2 moved first, and a question added to it since the first write.
        session.execute(update(Step).where(Step.id == "form_1_s1").values(position=5))
        session.execute(update(Step).where(Step.id == "form_1_s2").values(position=0))
        session.add(
            Question(
                id="q_added", step_id="form_1_s2", position=9, title="Added",
                type=QuestionType.DATE,
            )
        )  # fmt: skip
        session.flush()
        sync_with_form(session, first, load_layout(session, "form_1"), get_settings())

    shown = json.loads(cli.ok("forms", "show", "form_1", "--json").stdout)

    assert (shown["id"], shown["owner"]) == ("form_1", "user_1")
    assert [(link["id"], link["spreadsheet"], link["gid"]) for link in shown["links"]] == [
        (first, "sheet_abc", 0),
        (second, "sheet_def", 7),
    ]
    questions = shown["questions"]
    # Form order: steps by position, then questions by position.
    assert [q["id"] for q in questions] == [
        "form_1_s2_q1",
        "form_1_s2_q2",
        "q_added",
        "form_1_s1_q1",
        "form_1_s1_q2",
        "form_1_s1_q3",
    ]
    by_id = {q["id"]: q for q in questions}
    [jumbotron] = form.jumbotron_question_ids
    [secret] = form.pii_question_ids
    assert by_id[jumbotron]["display_only"] and by_id[jumbotron]["columns"] == []
    assert by_id[secret]["personal_info"] and by_id[secret]["type"] == "PERSONAL_INFO"
    # The first write put the questions after A-C in the form's order then, and moving a
    # step moves no column; the second link has no map yet, and the added question waits
    # for row 1.
    answerable = [q.id for q in form.columns]
    for n, question_id in enumerate(answerable):
        assert by_id[question_id]["columns"] == [{"link": first, "column": "DEFG"[n]}]
    assert by_id["q_added"]["columns"] == [{"link": first, "column": None}]
    assert (by_id["q_added"]["step"], by_id["q_added"]["position"]) == (0, 9)
    assert by_id["q_added"]["step_id"] == "form_1_s2" and by_id["q_added"]["type"] == "DATE"

    table = cli.ok("forms", "show", "form_1").stdout
    assert "form form_1: 2024 개발자 컨퍼런스 참가 신청" in table
    assert f"owner user_1; 2 links: {first} (sheet_abc, gid 0), {second} (sheet_def, gid 7)" in (
        table
    )
    assert f"link {first}" in table and f"link {second}" in table
    assert "personal info (encrypted)" in table and "display-only (no column)" in table
    assert "pending" in table
    row = next(line for line in table.splitlines() if secret in line)
    assert "PERSONAL_INFO" in row and " F " in row and " - " in row


def test_titles_are_shown_as_text_clipped_and_escaped(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        seed_form(session, submission_id="form_1", steps=1, questions_per_step=1, pii=0)
        session.execute(update(Question).values(title=HOSTILE + " " + "x" * 200))
        session.execute(update(Submission).values(title=HOSTILE))

    result = cli.ok("forms", "show", "form_1")

    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "[bold]red[/]" in result.stdout  # never read as markup
    assert "\\x1b[2J" in result.stdout
    assert "x" * 200 not in result.stdout and "…" in result.stdout  # clipped
    listed = cli.ok("forms", "list").stdout
    assert "\x1b" not in listed and "[bold]red[/]" in listed
    whole = json.loads(cli.ok("forms", "show", "form_1", "--json").stdout)
    assert whole["title"] == HOSTILE
    assert whole["questions"][-1]["title"] == HOSTILE + " " + "x" * 200


def test_a_type_this_version_does_not_know_is_shown_as_stored(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        form = seed_form(session, submission_id="form_1", steps=1, questions_per_step=1, pii=0)
        [question] = form.columns
        session.connection().exec_driver_sql(
            "UPDATE question SET type = 'SIGNATURE' WHERE id = ?", (question.id,)
        )
    shown = json.loads(cli.ok("forms", "show", "form_1", "--json").stdout)
    assert [q["type"] for q in shown["questions"]] == ["JUMBOTRON", "SIGNATURE"]
    assert "SIGNATURE" in cli.ok("forms", "show", "form_1").stdout


def test_a_form_without_questions_or_links(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        seed_form(session, submission_id="form_1", steps=1, questions_per_step=1, pii=0)
        session.execute(delete(Question))
    shown = json.loads(cli.ok("forms", "show", "form_1", "--json").stdout)
    assert (shown["links"], shown["questions"]) == ([], [])
    result = cli.ok("forms", "show", "form_1")
    assert "owner user_1; 0 links" in result.stdout and "no questions" in result.stdout


def test_an_unknown_form_is_one_line(cli: Cli) -> None:
    result = cli("forms", "show", "form_nope")
    assert result.code == 1
    assert result.error_lines == ["error: form form_nope does not exist"]
    hostile = cli("forms", "show", "form\x1b[2J")
    assert hostile.code == 1
    assert hostile.error_lines == ["error: form form\\x1b[2J does not exist"]


def test_list_counts_questions_and_links_by_owner(cli: Cli) -> None:
    form, _, _ = _form(cli)
    with cli.sessions.begin() as session:
        seed_form(session, owner_id="user_2", submission_id="form_2", steps=1, questions_per_step=3)
        paused = link_sheet(session, form, "sheet_ghi", 3)
        session.flush()
        session.execute(
            update(SpreadSheet)
            .where(SpreadSheet.id == paused.id)
            .values(paused_reason="row 1", paused_at=utcnow())
        )

    listed = json.loads(cli.ok("forms", "list", "--json").stdout)
    assert listed == {
        "total": 2,
        "forms": [
            {
                "id": "form_1",
                "title": "2024 개발자 컨퍼런스 참가 신청",
                "owner": "user_1",
                "questions": len(form.questions),
                "links": 3,
            },
            {
                "id": "form_2",
                "title": "2024 개발자 컨퍼런스 참가 신청",
                "owner": "user_2",
                "questions": 4,  # three, and a JUMBOTRON
                "links": 0,
            },
        ],
    }
    mine = json.loads(cli.ok("forms", "list", "--owner", "user_2", "--json").stdout)
    assert [f["id"] for f in mine["forms"]] == ["form_2"] and mine["total"] == 1
    first = cli.ok("forms", "list", "--limit", "1")
    assert "2 forms" in first.stdout and "form_1" in first.stdout and "form_2" not in first.stdout
    assert "showing 1 of 2 forms" in first.stderr
    assert "sheetsync forms show FORM" in first.stderr
    assert cli.ok("forms", "list", "--owner", "nobody").stdout.strip() == "no forms match"
    shown = json.loads(cli.ok("forms", "show", "form_1", "--json").stdout)
    assert [link["paused"] for link in shown["links"]] == [False, False, True]
    assert ", paused)" in cli.ok("forms", "show", "form_1").stdout


def test_no_forms(cli: Cli) -> None:
    assert cli.ok("forms", "list").stdout.strip() == "no forms"
    assert json.loads(cli.ok("forms", "list", "--json").stdout) == {"total": 0, "forms": []}
