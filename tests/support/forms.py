"""Forms built question by question, edited as their owner edits them, answered with
chosen values; and the sheet read back as a user reads it (google-api-python-client)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import httplib2
from google_auth_httplib2 import AuthorizedHttp
from sqlalchemy import delete, update

from sheets_emulator import EmulatorServer
from sheetsync.dev.seed import SeededForm, SeededQuestion, seed_user
from sheetsync.models import (
    Plan,
    Question,
    QuestionType,
    Step,
    Submission,
    SubmissionAnswer,
    utcnow,
)
from support.google import build_sheets, credentials
from support.world import World

OWNER = "owner1"


class EditableForm:
    """One form of one step; questions given as ``(id, title, type)`` in order."""

    def __init__(self, world: World, questions: Sequence[tuple[str, str, QuestionType]]) -> None:
        self.world = world
        self.form_id = f"form_{len(questions)}_{id(self) % 100_000}"
        self.step_id = f"{self.form_id}_s1"
        world.admin.add_account(f"google-{OWNER}", f"refresh-{OWNER}")
        with world.pipeline.sessions.begin() as session:
            seed_user(session, OWNER, plan=Plan.PRO)
            session.add(Submission(id=self.form_id, title="edited form", owner_id=OWNER))
            session.add(Step(id=self.step_id, submission_id=self.form_id, position=0))
            for position, (question_id, title, kind) in enumerate(questions):
                session.add(self._question(question_id, title, kind, position))
        self.seeded = SeededForm(
            self.form_id,
            OWNER,
            Plan.PRO,
            (self.step_id,),
            tuple(SeededQuestion(q, t, k) for q, t, k in questions),
        )
        self._answers = 0

    def _question(
        self, question_id: str, title: str, kind: QuestionType, position: int
    ) -> Question:
        return Question(
            id=question_id, step_id=self.step_id, position=position, title=title, type=kind
        )

    def add(self, question_id: str, title: str, kind: QuestionType, position: int) -> None:
        """A new question at ``position`` (the others keep theirs: ties sort by id)."""
        with self.world.pipeline.sessions.begin() as session:
            session.add(self._question(question_id, title, kind, position))

    def delete(self, question_id: str) -> None:
        with self.world.pipeline.sessions.begin() as session:
            session.execute(delete(Question).where(Question.id == question_id))

    def rename(self, question_id: str, title: str) -> None:
        with self.world.pipeline.sessions.begin() as session:
            session.execute(update(Question).where(Question.id == question_id).values(title=title))

    def reorder(self, question_ids: Sequence[str]) -> None:
        with self.world.pipeline.sessions.begin() as session:
            for position, question_id in enumerate(question_ids):
                session.execute(
                    update(Question).where(Question.id == question_id).values(position=position)
                )

    def answer(self, values: Mapping[str, Any], *, submitted_at: datetime | None = None) -> str:
        """An answer with ``{question id: value}``; returns its id."""
        self._answers += 1
        answer_id = f"{self.form_id}_a{self._answers}"
        with self.world.pipeline.sessions.begin() as session:
            session.add(
                SubmissionAnswer(
                    id=answer_id,
                    submission_id=self.form_id,
                    user_name=f"person {self._answers}",
                    submitted_at=submitted_at or utcnow(),
                    answer=[{"questionId": q, "value": v} for q, v in values.items()],
                )
            )
        return answer_id


def sheets_api(emulator: EmulatorServer, owner: str = OWNER) -> Any:
    """``service.spreadsheets()`` for the owner's Google account, as a user runs it."""
    http = AuthorizedHttp(credentials(emulator, f"refresh-{owner}"), http=httplib2.Http(timeout=5))
    return build_sheets(emulator, http).spreadsheets()


def read(
    api: Any, spreadsheet_id: str, title: str = "Responses", **options: str
) -> list[list[Any]]:
    """The tab's values, unformatted unless ``valueRenderOption`` says otherwise."""
    options = {"valueRenderOption": "UNFORMATTED_VALUE", **options}
    body = api.values().get(spreadsheetId=spreadsheet_id, range=f"'{title}'", **options).execute()
    rows: list[list[Any]] = body.get("values", [])
    return rows


def by_title(rows: list[list[Any]]) -> dict[str, dict[str, Any]]:
    """``{answer id: {column title: value}}`` for every row with an id in column A; a
    blank cell is left out, so a value under the wrong title shows."""
    header = rows[0]
    found: dict[str, dict[str, Any]] = {}
    for row in rows[1:]:
        if not row or row[0] in ("", None):
            continue
        assert row[0] not in found, f"answer {row[0]} is in the sheet twice"
        found[row[0]] = {
            header[i] if i < len(header) else f"#{i}": cell
            for i, cell in enumerate(row)
            if cell not in ("", None) and i >= 1
        }
    return found
