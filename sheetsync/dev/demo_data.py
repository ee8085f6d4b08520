"""The demo's dataset: 2,050 answers to 4 forms of 4 owners on 3 plans, linked to 5 sheets.

Seeded with :mod:`sheetsync.dev.seed`: several steps, PERSONAL_INFO (stored encrypted) and
JUMBOTRON (display-only) questions, Korean text and multi-choice answers. Each owner's
Google account is registered in the emulator with a fresh refresh token, which is stored
encrypted in their GoogleCredential, and owns the spreadsheets of their forms.

One owner has revoked sheetsync's access to their Google account (:attr:`DemoOwner.revoked`):
the demo revokes it in the emulator, so the first flush of their answers meets Google's
``invalid_grant`` and the answers end in a dead letter.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sheets_emulator import EmulatorAdmin
from sheetsync.dev import seed
from sheetsync.models import Plan
from sheetsync.services import Services


@dataclass(frozen=True)
class DemoOwner:
    user_id: str
    plan: Plan
    #: Whether the owner revokes sheetsync's access to their Google account in the demo.
    revoked: bool = False


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
_REVOKED_OWNER = DemoOwner("demo_owner_4", Plan.FREE, revoked=True)

#: The dataset. The conference form is linked to two spreadsheets; the last form's owner
#: revokes Google access, so its answers end in a dead letter.
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
    DemoForm(
        answer_prefix="trip",
        title="동아리 MT 참가 조사",
        owner=_REVOKED_OWNER,
        answers=50,
        spreadsheets=("MT 참가자",),
        steps=1,
        questions_per_step=4,
        pii=1,
        jumbotrons=0,
    ),
)


def demo_owners() -> list[DemoOwner]:
    """The owners of :data:`DEMO_FORMS`, each once, in order."""
    return list(dict.fromkeys(form.owner for form in DEMO_FORMS))


def expected_rows() -> int:
    """Rows the sheets hold at the end: every answer of an owner who did not revoke
    Google access, once per sheet its form is linked to."""
    return sum(
        form.answers * len(form.spreadsheets) for form in DEMO_FORMS if not form.owner.revoked
    )


def expected_dead_lettered() -> int:
    """(answer, sheet) pairs that end in a PENDING dead letter: those of revoked owners."""
    return sum(form.answers * len(form.spreadsheets) for form in DEMO_FORMS if form.owner.revoked)


@dataclass(frozen=True)
class DemoAccount:
    """An owner's Google account in the emulator, and the refresh token it accepts."""

    account_id: str
    refresh_token: str


@dataclass(frozen=True)
class DemoSeed:
    """What :func:`seed_demo` made."""

    sheets: list[DemoSheet]
    #: Every answer id, interleaved across forms as submissions would arrive.
    answer_ids: list[str]
    ids_by_form: dict[DemoForm, list[str]]
    accounts: dict[DemoOwner, DemoAccount]


def seed_demo(services: Services, admin: EmulatorAdmin, *, answers: bool = True) -> DemoSeed:
    """Seed the database and the emulator (every account valid, revoked ones included:
    :func:`revoke_access` revokes them); with ``answers=False`` the forms and their
    links only (``make demo-web``: a person submits the answers).

    Google account ids are new for every run, so a shared Redis never mixes the rate
    windows of two runs.
    """
    run = secrets.token_hex(3)
    accounts = {
        owner: DemoAccount(f"google-{owner.user_id}-{run}", secrets.token_urlsafe(24))
        for owner in demo_owners()
    }
    sheets: list[DemoSheet] = []
    ids_by_form: dict[DemoForm, list[str]] = {}
    with services.sessions.begin() as session:
        for owner, account in accounts.items():
            admin.add_account(account.account_id, account.refresh_token)
            seed.seed_user(
                session,
                owner.user_id,
                plan=owner.plan,
                refresh_token=account.refresh_token,
                google_account_id=account.account_id,
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
            account_id = accounts[form.owner].account_id
            for title in form.spreadsheets:
                spreadsheet_id, gids = admin.create_spreadsheet(account_id, title, [SHEET_TITLE])
                gid = gids[SHEET_TITLE]
                seed.link_sheet(session, seeded, spreadsheet_id, gid)
                sheets.append(
                    DemoSheet(form, seeded.submission_id, account_id, title, spreadsheet_id, gid)
                )
            ids_by_form[form] = (
                seed.seed_answers(
                    session, seeded, form.answers, prefix=form.answer_prefix, seed=number
                )
                if answers
                else []
            )
    return DemoSeed(sheets, interleaved(list(ids_by_form.values())), ids_by_form, accounts)


def revoke_access(admin: EmulatorAdmin, seeded: DemoSeed) -> list[DemoOwner]:
    """The revoked owners withdraw sheetsync's access: their refresh tokens now get
    ``invalid_grant`` from the emulator. Returns them."""
    revoked = [owner for owner in seeded.accounts if owner.revoked]
    for owner in revoked:
        admin.revoke(seeded.accounts[owner].account_id)
    return revoked


def restore_access(admin: EmulatorAdmin, seeded: DemoSeed) -> list[DemoOwner]:
    """The revoked owners authorise Google again (the emulator accepts their refresh
    tokens once more); sheetsync still needs ``credentials reconnect``. Returns them."""
    revoked = [owner for owner in seeded.accounts if owner.revoked]
    for owner in revoked:
        account = seeded.accounts[owner]
        admin.add_account(account.account_id, account.refresh_token)
    return revoked


def interleaved(per_form: list[list[str]]) -> list[str]:
    """All ids in one stream, each form's spread evenly over it (order kept per form)."""
    ranked = [
        (position / len(ids), form, answer_id)
        for form, ids in enumerate(per_form)
        for position, answer_id in enumerate(ids)
    ]
    return [answer_id for *_, answer_id in sorted(ranked)]
