"""The web app's side of a chaos run: owners, forms and links; answers whose personal info
is a unique canary, stored and emitted in the app's transactions; and what a person or
the app does meanwhile (re-emits, duplicate links, form edits, reconnecting Google)."""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from chaos.config import ChaosConfig, plan_forms
from sheets_emulator import EmulatorAdmin
from sheetsync import credential_reconnected, crypto, emit_answer_submitted
from sheetsync.dev.seed import (
    SeededForm,
    SeededQuestion,
    answer_value,
    korean_name,
    link_sheet,
    seed_form,
)
from sheetsync.dev.seed import seed_user as seed_owner
from sheetsync.models import (
    CredentialStatus,
    GoogleCredential,
    Plan,
    Question,
    QuestionType,
    SubmissionAnswer,
)
from sheetsync.services import Services

_PLANS = (Plan.PRO, Plan.FREE, Plan.ENTERPRISE, Plan.PRO_PLUS)
_UNANSWERED_SHARE = 0.05
#: Answers a respondent made as bad as they could: every text cell at Google's cell limit
#: in 6-byte characters (megabytes per row, far above the run's request budget), or text
#: with lone UTF-16 surrogates in it.
HOSTILE_SHARE = 0.03
OVERSIZED = "€" * 50_000
SURROGATES = "lone \ud800 high and \udc00 low"


def canary(seed: int, number: int, question: int) -> str:
    """A personal-info value no one else writes: found anywhere but the sheet, it leaked."""
    return f"pii.{seed}.{number}.{question}.{secrets.token_hex(3)}@canary.test"


#: What :func:`canary` writes (and what the PII scan looks for).
CANARY_PATTERN = r"pii\.\d+\.\d+\.\d+\.[0-9a-f]{6}"
#: A refresh token the run issues (a secret the logs must not show either).
REFRESH_TOKEN_PATTERN = r"rt\.\d+\.owner\d+\.\d+\.[0-9a-f]{12}"


@dataclass(frozen=True)
class Link:
    form_id: str
    owner_id: str
    spreadsheet_id: str
    gid: int

    @property
    def sheet(self) -> tuple[str, int]:
        return self.spreadsheet_id, self.gid


@dataclass
class FormModel:
    """What the app knows of one form: its questions in order (edits change them)."""

    seeded: SeededForm
    questions: list[SeededQuestion]
    next_position: int
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def form_id(self) -> str:
        return self.seeded.submission_id

    @property
    def owner_id(self) -> str:
        return self.seeded.owner_id


@dataclass
class Journal:
    """What the web app did, for the accounting."""

    #: Answer id -> (form id, monotonic time its transaction committed).
    emitted: dict[str, tuple[str, float]] = field(default_factory=dict)
    emit_failures: list[tuple[str, str]] = field(default_factory=list)
    reemits: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: (form id, spreadsheet id, gid) -> when a second link to it was accepted.
    duplicate_links: dict[tuple[str, str, int], float] = field(default_factory=dict)
    duplicate_links_refused: int = 0
    canaries: set[str] = field(default_factory=set)
    refresh_tokens: set[str] = field(default_factory=set)
    #: Answer id -> "oversized" or "surrogates": the hostile answers the app stored.
    hostile: dict[str, str] = field(default_factory=dict)
    #: Answer id -> the submitter's name after its latest edit (column B of its row).
    edited: dict[str, str] = field(default_factory=dict)
    #: Answers the app deleted (their rows too), and those of them it erased.
    deleted: set[str] = field(default_factory=set)
    erased: set[str] = field(default_factory=set)


class WebApp:
    def __init__(self, config: ChaosConfig, pipeline: Services, admin: EmulatorAdmin) -> None:
        self.config = config
        self.pipeline = pipeline
        self.admin = admin
        self.journal = Journal()
        self.forms: list[FormModel] = []
        self.links: list[Link] = []
        self.owners = [f"owner{n + 1}" for n in range(config.owners)]
        self._token_generation: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    @staticmethod
    def account(owner_id: str) -> str:
        return f"google-{owner_id}"

    def _new_refresh_token(self, owner_id: str) -> str:
        self._token_generation[owner_id] += 1
        generation = self._token_generation[owner_id]
        token = f"rt.{self.config.seed}.{owner_id}.{generation}.{secrets.token_hex(6)}"
        self.journal.refresh_tokens.add(token)
        return token

    # -- seeding ------------------------------------------------------------------------

    def seed(self) -> None:
        """Owners with Google accounts, forms with PERSONAL_INFO questions, linked sheets."""
        with self.pipeline.sessions.begin() as session:
            for n, owner_id in enumerate(self.owners):
                token = self._new_refresh_token(owner_id)
                self.admin.add_account(self.account(owner_id), token)
                seed_owner(
                    session,
                    owner_id,
                    plan=_PLANS[n % len(_PLANS)],
                    refresh_token=token,
                    google_account_id=self.account(owner_id),
                )
        for number, sheet_count in enumerate(plan_forms(self.config.sheets)):
            owner_id = self.owners[number % len(self.owners)]
            with self.pipeline.sessions.begin() as session:
                seeded = seed_form(
                    session,
                    owner_id=owner_id,
                    submission_id=f"form{number + 1}",
                    steps=2,
                    questions_per_step=3,
                    pii=2,
                    jumbotrons=1,
                )
            last_step = [q for q in seeded.questions if q.id.startswith(seeded.step_ids[-1] + "_")]
            form = FormModel(seeded, list(seeded.questions), len(last_step))
            self.forms.append(form)
            self._link(form, sheet_count, same_spreadsheet=number == 0)

    def _link(self, form: FormModel, count: int, *, same_spreadsheet: bool) -> None:
        account = self.account(form.owner_id)
        tabs = [f"Responses {n + 1}" for n in range(count)]
        if same_spreadsheet:
            spreadsheet_id, gids = self.admin.create_spreadsheet(account, form.form_id, tabs)
            sheets = [(spreadsheet_id, gids[tab]) for tab in tabs]
        else:
            sheets = []
            for tab in tabs:
                spreadsheet_id, gids = self.admin.create_spreadsheet(
                    account, f"{form.form_id} {tab}", [tab]
                )
                sheets.append((spreadsheet_id, gids[tab]))
        with self.pipeline.sessions.begin() as session:
            for spreadsheet_id, gid in sheets:
                link_sheet(session, form.seeded, spreadsheet_id, gid)
                self.links.append(Link(form.form_id, form.owner_id, spreadsheet_id, gid))

    # -- answers ------------------------------------------------------------------------

    def answer_id(self, number: int) -> str:
        return f"ans-{self.config.seed}-{number:05d}"

    def form_for(self, number: int) -> FormModel:
        rng = random.Random(f"{self.config.seed}:form:{number}")
        return self.forms[rng.randrange(len(self.forms))]

    def _items(self, form: FormModel, number: int) -> list[dict[str, Any]]:
        rng = random.Random(f"{self.config.seed}:answer:{number}")
        with form.lock:
            questions = list(form.questions)
        hostile = self._hostile(number)
        items: list[dict[str, Any]] = []
        for position, question in enumerate(questions):
            if question.type is QuestionType.JUMBOTRON:
                if rng.random() < 0.5:
                    items.append({"questionId": question.id, "value": None})
                continue
            if rng.random() < _UNANSWERED_SHARE:
                continue
            value = answer_value(question, rng)
            if hostile == "oversized" and question.type is not QuestionType.PERSONAL_INFO:
                value = OVERSIZED
            elif hostile == "surrogates" and question.type is not QuestionType.PERSONAL_INFO:
                value = SURROGATES
            if question.type is QuestionType.PERSONAL_INFO:
                plain = canary(self.config.seed, number, position)
                with self._lock:
                    self.journal.canaries.add(plain)
                value = crypto.encrypt_answer_value(
                    plain, answer_id=self.answer_id(number), question_id=question.id
                )
            items.append({"questionId": question.id, "value": value})
        return items

    def _hostile(self, number: int) -> str | None:
        rng = random.Random(f"{self.config.seed}:hostile:{number}")
        if rng.random() >= HOSTILE_SHARE:
            return None
        kind = rng.choice(("oversized", "surrogates"))
        with self._lock:
            self.journal.hostile[self.answer_id(number)] = kind
        return kind

    def emit(self, number: int) -> None:
        """Store answer ``number`` and emit it in the same transaction, as the app does."""
        form = self.form_for(number)
        answer_id = self.answer_id(number)
        rng = random.Random(f"{self.config.seed}:name:{number}")
        try:
            with self.pipeline.sessions.begin() as session:
                session.add(
                    SubmissionAnswer(
                        id=answer_id,
                        submission_id=form.form_id,
                        user_name=korean_name(rng),
                        submitted_at=datetime.now(UTC),
                        answer=self._items(form, number),
                    )
                )
                emit_answer_submitted(answer_id, session=session)
        except Exception as exc:  # the app's request failed: recorded, not emitted
            with self._lock:
                self.journal.emit_failures.append((answer_id, f"{type(exc).__name__}: {exc}"))
            return
        with self._lock:
            self.journal.emitted[answer_id] = (form.form_id, time.monotonic())

    def reemit(self, rng: random.Random) -> list[str]:
        """A web retry: emit answers that were already emitted, each in a new request."""
        with self._lock:
            done = sorted(self.journal.emitted)
        chosen = rng.sample(done, k=min(len(done), rng.randint(1, 5)))
        for answer_id in chosen:
            with self.pipeline.sessions.begin() as session:
                emit_answer_submitted(answer_id, session=session)
            with self._lock:
                self.journal.reemits[answer_id].append(time.monotonic())
        return chosen

    # -- what people do meanwhile --------------------------------------------------------

    def add_duplicate_link(self, rng: random.Random) -> str:
        """Link a (form, sheet) a second time, as a double-clicked "link" button does."""
        link = rng.choice(self.links)
        form = next(f for f in self.forms if f.form_id == link.form_id)
        try:
            with self.pipeline.sessions.begin() as session:
                link_sheet(session, form.seeded, *link.sheet)
        except IntegrityError:
            self.journal.duplicate_links_refused += 1
            return f"refused for {link.form_id} -> {link.spreadsheet_id}:{link.gid}"
        self.journal.duplicate_links.setdefault(
            (link.form_id, link.spreadsheet_id, link.gid), time.monotonic()
        )
        return f"accepted for {link.form_id} -> {link.spreadsheet_id}:{link.gid}"

    def edit_form(self, rng: random.Random) -> str:
        """Add a question at the end and rename one: later answers fill the new one."""
        form = rng.choice(self.forms)
        with form.lock:
            position = form.next_position
            kind = QuestionType.PERSONAL_INFO if position % 2 else QuestionType.SHORT_TEXT
            added = SeededQuestion(f"{form.form_id}_x{position}", f"추가 질문 {position}", kind)
            renamed = rng.choice([q for q in form.questions if q.type is not kind])
            with self.pipeline.sessions.begin() as session:
                session.add(
                    Question(
                        id=added.id,
                        step_id=form.seeded.step_ids[-1],
                        position=position,
                        title=added.title,
                        type=kind,
                    )
                )
                session.execute(
                    update(Question)
                    .where(Question.id == renamed.id)
                    .values(title=f"{renamed.title} (수정 {position})")
                )
            form.questions.append(added)
            form.next_position += 1
        return f"{form.form_id}: added {added.id} ({kind.value}), renamed {renamed.id}"

    def revoke(self, owner_id: str) -> None:
        self.admin.revoke(self.account(owner_id))

    def credential_status(self, owner_id: str) -> CredentialStatus | None:
        with self.pipeline.sessions() as session:
            status: CredentialStatus | None = session.scalar(
                select(GoogleCredential.status).where(GoogleCredential.user_id == owner_id)
            )
            return status

    def reconnect(self, owner_id: str) -> None:
        """The owner authorises Google again: a new refresh token, stored encrypted, then
        ``credential_reconnected`` so their dead letters replay."""
        token = self._new_refresh_token(owner_id)
        self.admin.add_account(self.account(owner_id), token)
        with self.pipeline.sessions.begin() as session:
            session.execute(
                update(GoogleCredential)
                .where(GoogleCredential.user_id == owner_id)
                .values(refresh_token=crypto.encrypt_refresh_token(token, user_id=owner_id))
            )
        credential_reconnected(owner_id)
