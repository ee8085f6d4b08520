"""The demo's dataset: 2,000 answers to 3 forms of 3 owners on 3 plans, linked to 4 sheets.

Seeded with :mod:`sheetsync.dev.seed`: several steps, PERSONAL_INFO (stored encrypted) and
JUMBOTRON (display-only) questions, Korean text and multi-choice answers. Each owner's
Google account is registered in the emulator with a fresh refresh token, which is stored
encrypted in their GoogleCredential, and owns the spreadsheets of their forms.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sheetsync.dev import seed
from sheetsync.dev.emulator import EmulatorAdmin
from sheetsync.models import Plan
from sheetsync.pipeline import Pipeline


@dataclass(frozen=True)
class DemoOwner:
    user_id: str
    plan: Plan


@dataclass(frozen=True)
class DemoForm:
    """One form; each entry of ``spreadsheets`` is a spreadsheet linked to it."""

    answer_prefix: str
    title: str
    owner: DemoOwner
    answers: int
    spreadsheets: tuple[str, ...]
    steps: int
    questions_per_step: int
    pii: int
    jumbotrons: int


@dataclass(frozen=True)
class DemoSheet:
    """One linked sheet, as seeded."""

    form: DemoForm
    submission_id: str
    google_account: str
    title: str
    spreadsheet_id: str
    gid: int


#: The sheet every demo spreadsheet has (Google Forms' Korean default).
SHEET_TITLE = "설문지 응답 시트1"

_CONFERENCE_OWNER = DemoOwner("demo_owner_1", Plan.PRO)
_CLUB_OWNER = DemoOwner("demo_owner_2", Plan.FREE)
_SURVEY_OWNER = DemoOwner("demo_owner_3", Plan.ENTERPRISE)

#: The dataset. The conference form is linked to two spreadsheets.
DEMO_FORMS = (
    DemoForm(
        answer_prefix="conf",
        title="2024 개발자 컨퍼런스 참가 신청",
        owner=_CONFERENCE_OWNER,
        answers=1_000,
        spreadsheets=("컨퍼런스 참가자", "컨퍼런스 참가자 (운영팀 공유)"),
        steps=3,
        questions_per_step=4,
        pii=2,
        jumbotrons=1,
    ),
    DemoForm(
        answer_prefix="club",
        title="독서 모임 신입 회원 모집",
        owner=_CLUB_OWNER,
        answers=400,
        spreadsheets=("독서 모임 지원자",),
        steps=2,
        questions_per_step=3,
        pii=1,
        jumbotrons=2,
    ),
    DemoForm(
        answer_prefix="csat",
        title="2024 고객 만족도 조사",
        owner=_SURVEY_OWNER,
        answers=600,
        spreadsheets=("고객 만족도 응답",),
        steps=4,
        questions_per_step=3,
        pii=2,
        jumbotrons=1,
    ),
)


def demo_owners() -> list[DemoOwner]:
    """The owners of :data:`DEMO_FORMS`, each once, in order."""
    return list(dict.fromkeys(form.owner for form in DEMO_FORMS))


def expected_answers() -> int:
    return sum(form.answers for form in DEMO_FORMS)


def expected_rows() -> int:
    """Rows the sheets hold at the end: every answer once per sheet its form is linked to."""
    return sum(form.answers * len(form.spreadsheets) for form in DEMO_FORMS)


def seed_demo(pipeline: Pipeline, admin: EmulatorAdmin) -> tuple[list[DemoSheet], list[str]]:
    """Seed the database and the emulator; returns the sheets and every answer id,
    interleaved across forms as submissions would arrive.

    Google account ids are new for every run, so a shared Redis never mixes the rate
    windows of two runs.
    """
    run = secrets.token_hex(3)
    accounts = {owner: f"google-{owner.user_id}-{run}" for owner in demo_owners()}
    sheets: list[DemoSheet] = []
    per_form: list[list[str]] = []
    with pipeline.sessions.begin() as session:
        for owner, account in accounts.items():
            refresh_token = secrets.token_urlsafe(24)
            admin.add_account(account, refresh_token)
            seed.seed_user(
                session,
                owner.user_id,
                plan=owner.plan,
                refresh_token=refresh_token,
                google_account_id=account,
            )
        for number, form in enumerate(DEMO_FORMS):
            seeded = seed.seed_form(
                session,
                owner_id=form.owner.user_id,
                plan=form.owner.plan,
                title=form.title,
                steps=form.steps,
                questions_per_step=form.questions_per_step,
                pii=form.pii,
                jumbotrons=form.jumbotrons,
            )
            account = accounts[form.owner]
            for title in form.spreadsheets:
                spreadsheet_id, gids = admin.create_spreadsheet(account, title, [SHEET_TITLE])
                gid = gids[SHEET_TITLE]
                seed.link_sheet(session, seeded, spreadsheet_id, gid)
                sheets.append(
                    DemoSheet(form, seeded.submission_id, account, title, spreadsheet_id, gid)
                )
            per_form.append(
                seed.seed_answers(
                    session, seeded, form.answers, prefix=form.answer_prefix, seed=number
                )
            )
    return sheets, interleaved(per_form)


def interleaved(per_form: list[list[str]]) -> list[str]:
    """All ids in one stream, each form's spread evenly over it (order kept per form)."""
    ranked = [
        (position / len(ids), form, answer_id)
        for form, ids in enumerate(per_form)
        for position, answer_id in enumerate(ids)
    ]
    return [answer_id for *_, answer_id in sorted(ranked)]
