"""A link that escapes formulas writes a respondent's formula-like text after an
apostrophe, read back as Google stores it; other links write it as typed (RAW, so Google
Sheets itself never runs it either way)."""

from __future__ import annotations

from sqlalchemy import update
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.models import SpreadSheet, SubmissionAnswer

FORMULA = '=HYPERLINK("http://attacker.test","click")'


def test_only_the_escaping_link_writes_formula_like_text_after_an_apostrophe(world, worker):
    form = world.form(pii=0)
    escaping, plain = world.sheet(form, "Escaped"), world.sheet(form, "Plain")
    with world.pipeline.sessions.begin() as session:
        session.execute(
            update(SpreadSheet)
            .where(SpreadSheet.spread_sheet_id == escaping.spreadsheet_id)
            .values(escape_formulas=True)
        )
    [answer_id] = world.answers(form, 1)
    question = form.columns[0].id
    with world.pipeline.sessions.begin() as session:
        answer = session.get(SubmissionAnswer, answer_id)
        others = [i for i in answer.answer if i.get("questionId") != question]
        answer.answer = [*others, {"questionId": question, "value": FORMULA}]

    emit_answers_submitted([answer_id])
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    def cells(sheet):
        [row] = world.rows(sheet)[1:]
        return row

    assert "'" + FORMULA in cells(escaping) and FORMULA not in cells(escaping)
    assert FORMULA in cells(plain)
    assert cells(escaping)[0] == cells(plain)[0] == answer_id
