"""The pages on edits, deletions and erasure, run as written: their Python blocks against
a real worker, Redis and the emulator, and the erasure page's commands through the real
command line."""

from __future__ import annotations

import json
import shlex

from support.cli import run_here
from support.markdown import code_blocks, page
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.models import QuestionType

EDITS = "integration/edits-and-deletions.md"
ERASURE = "operating/erasure.md"


def test_the_edits_pages_blocks_edit_delete_and_erase_as_they_say(world, worker):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 4)
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    question = next(q for q in form.columns if q.type is QuestionType.SHORT_TEXT)
    edit, delete, erase = code_blocks(page(EDITS), "python")

    items = [{"questionId": question.id, "value": "as the page edits it"}]
    exec(edit.text, {"answer_id": ids[0], "new_items": items})
    column = world.rows(sheet)[0].index(question.title)
    wait_until(lambda: world.rows(sheet)[1][column] == "as the page edits it")

    exec(delete.text, {"answer_id": ids[1]})
    wait_until(lambda: world.ids_in(sheet) == [ids[0], *ids[2:]])

    exec(erase.text, {"person_answer_ids": ids[2:], "print": lambda *args: None})
    wait_until(lambda: world.ids_in(sheet) == [ids[0]])
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 1, "DELETED": 3})


def test_the_erasure_pages_commands_run_as_written(world, worker, pipeline_env, tmp_path):
    env = pipeline_env()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)  # ans_1 ... ans_5, as the page names them
    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids)
    (tmp_path / "person.txt").write_text("ans_3\nans_4\n")
    [commands] = code_blocks(page(ERASURE), "bash")
    lines = [shlex.split(line) for line in commands.text.splitlines() if line.strip()]
    assert [line[:2] for line in lines] == [["sheetsync", "erase"]] * 2

    first = run_here(lines[0][1:], env, tmp_path)
    assert first.code == 0, first.stderr
    assert "2 answers in 1 sheet: 2 erased, 0 pending" in first.stdout
    second = run_here(lines[1][1:], env, tmp_path)
    assert second.code == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["done"] and {p["answer_id"] for p in report["places"]} == {"ans_3", "ans_4"}
    assert {p["detail"] for p in report["places"]} == {"its row was removed"}
    assert world.ids_in(sheet) == ["ans_5"]

    exec(code_blocks(page(ERASURE), "python")[0].text, {"person_answer_ids": ["ans_5"]})
    wait_until(lambda: world.ids_in(sheet) == [])
