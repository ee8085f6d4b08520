"""The web app's side of a sheetsync integration, top to bottom.

It migrates the database, creates a form owner with their Google credential, a form and
its link to a sheet, then stores one answer and emits it in the same transaction, and
waits until a worker has written the row. Run the emulator and a worker first, all three
with the same SHEETSYNC_* environment (docs/getting-started.md, "A minimal integration to
run"):

    sheetsync emulator                       # terminal 1
    celery -A sheetsync.celery worker        # terminal 2
    python examples/minimal.py               # terminal 3

It writes no file of its own: the database is SHEETSYNC_DATABASE_URL's. On the way out it
removes from Redis the keys its answer left there (each names one of its made-up ids);
the worker's own keys stay until the worker's Redis database is cleared.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from itertools import zip_longest

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sheets_emulator import EmulatorAdmin, EmulatorError
from sheetsync import check_settings, crypto, db, emit_answer_submitted, redis_urls
from sheetsync.errors import SheetSyncError
from sheetsync.models import (
    GoogleCredential,
    Plan,
    Question,
    QuestionType,
    SheetTransaction,
    SpreadSheet,
    Step,
    Submission,
    SubmissionAnswer,
    TransactionType,
    User,
)
from sheetsync.ops import heartbeats
from sheetsync.redis_keys import (
    ALERTED,
    BUFFER_INDEX,
    DUE_INDEX,
    RATE_KINDS,
    BufferKey,
    rate_account_key,
    rate_queue_keys,
)
from sheetsync.settings import get_settings
from sheetsync.text import mask_url

#: Covers the debounce (SHEETSYNC_FLUSH_DELAY_S, 10 s by default) and a worker's start.
TIMEOUT_S = float(os.environ.get("EXAMPLE_TIMEOUT_S", "60"))
#: How long to wait for an emulator that is still starting.
EMULATOR_WAIT_S = 15.0
#: How long the worker may take to finish with the sheet's buffer once the row is in.
SETTLE_S = 5.0
SHEETS_SCOPE = "https://www.googleapis.com/auth/spreadsheets"


def new_id(kind: str) -> str:
    """A fresh id (sheetsync takes ``[A-Za-z0-9_-]{1,128}``), so the example can run again."""
    return f"{kind}_{uuid.uuid4().hex[:12]}"


def wait_for_emulator(url: str, timeout_s: float = EMULATOR_WAIT_S) -> None:
    """Give an emulator started a moment ago (`sheetsync emulator &`) time to listen."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_emulator/health", timeout=1):  # noqa: S310
                return
        except OSError:
            time.sleep(0.1)


def main() -> int:
    emulator_url = os.environ.get("SHEETSYNC_GOOGLE_API_ENDPOINT", "")
    if not emulator_url or "googleapis.com" in emulator_url:
        print("error: set SHEETSYNC_GOOGLE_API_ENDPOINT to the emulator's URL", file=sys.stderr)
        return 1
    check_settings()  # at start-up: a bad SHEETSYNC_* setting stops here, in one line
    db.upgrade()  # what `sheetsync db upgrade` does; nothing changes when already at head
    sessions = db.get_sessionmaker()

    # Development only, against the emulator: register the owner's Google account and
    # create their spreadsheet. With real Google, the owner's OAuth consent gives you the
    # refresh token and their Google account id, and the spreadsheet's URL its id and gid.
    wait_for_emulator(emulator_url)  # if it never answers, the first call below says so
    emulator = EmulatorAdmin(emulator_url)
    google_account_id, refresh_token = new_id("google"), new_id("refresh")
    emulator.add_account(google_account_id, refresh_token)
    spreadsheet_id, gids = emulator.create_spreadsheet(google_account_id, "Sign-ups", ["Answers"])
    gid = gids["Answers"]  # the tab's id, `#gid=` in the sheet's URL

    # The form, its owner and the link: written once, when the owner links a sheet.
    owner_id, form_id = new_id("user"), new_id("form")
    name, phone, topics, note = (new_id("question") for _ in range(4))
    with sessions.begin() as session:
        session.add(User(id=owner_id, email="owner@example.com", plan=Plan.FREE))
        session.add(
            GoogleCredential(
                user_id=owner_id,
                google_account_id=google_account_id,
                # Never stored in the clear, and bound to its owner: copied to another
                # user's credential, it does not decrypt.
                refresh_token=crypto.encrypt_refresh_token(refresh_token, user_id=owner_id),
                scopes=SHEETS_SCOPE,
            )
        )
        about_you = [
            Question(
                id=new_id("question"), position=0, title="Welcome!", type=QuestionType.JUMBOTRON
            ),
            Question(id=name, position=1, title="Name", type=QuestionType.SHORT_TEXT),
            Question(id=phone, position=2, title="Phone", type=QuestionType.PERSONAL_INFO),
        ]
        more = [
            Question(id=topics, position=0, title="Topics", type=QuestionType.MULTI_CHOICE),
            Question(id=note, position=1, title="Anything else?", type=QuestionType.LONG_TEXT),
        ]
        session.add(
            Submission(
                id=form_id,
                title="Meetup sign-up",
                owner_id=owner_id,
                steps=[
                    Step(id=new_id("step"), position=0, title="About you", questions=about_you),
                    Step(id=new_id("step"), position=1, title="More", questions=more),
                ],
            )
        )
        session.add(
            SpreadSheet(
                submission_id=form_id,
                spread_sheet_id=spreadsheet_id,
                sheet_id=gid,
                create_user_id=owner_id,
            )
        )

    # The request that stores an answer: the answer and its ENQUEUED ledger rows commit
    # together, and the ids go to Redis only after the commit. The answer's id is chosen
    # first: personal info is encrypted for one answer and question, and decrypts nowhere
    # else.
    answer_id = new_id("answer")
    phone_token = crypto.encrypt_answer_value(
        "010-0000-0000", answer_id=answer_id, question_id=phone
    )
    with sessions.begin() as session:
        answer = SubmissionAnswer(
            id=answer_id,
            submission_id=form_id,
            user_name="Example Respondent",
            submitted_at=datetime.now(UTC),  # aware; stored as UTC
            answer=[
                {"questionId": name, "value": "Example Respondent"},
                {"questionId": phone, "value": phone_token},
                {"questionId": topics, "value": ["Data", "Security"]},
                {"questionId": note, "value": None},
            ],
        )
        session.add(answer)
        # In the same transaction: one statement (given the object, not just its id).
        emitted = emit_answer_submitted(answer, session=session)
    # Where sheetsync buffers this sheet's answer ids in Redis.
    buffer = BufferKey(owner_id, form_id, spreadsheet_id, gid)
    try:
        if not emitted.enqueued:  # the link is malformed, or not the form owner's
            print(f"error: answer {answer_id} was not queued: {emitted.invalid}", file=sys.stderr)
            return 1
        return print_the_row(emulator, sessions, answer_id, spreadsheet_id, gid)
    finally:
        forget_own_keys(buffer, google_account_id)


def print_the_row(
    emulator: EmulatorAdmin,
    sessions: sessionmaker[Session],
    answer_id: str,
    spreadsheet_id: str,
    gid: int,
) -> int:
    """Wait for the answer's row in the sheet and print it (0), or say why it is not (1)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        values = emulator.sheet_values(spreadsheet_id, gid)
        row = next((row for row in values[1:] if row and row[0] == answer_id), None)
        if row is not None:
            # This is the example's own made-up data; a real app never prints personal info.
            print(f"answer {answer_id} is in spreadsheet {spreadsheet_id}, gid {gid}:")
            for label, cell in zip_longest(values[0], row, fillvalue=""):  # blanks are trimmed
                print(f"  {label}: {cell}")
            return 0
        time.sleep(0.2)
    print(
        f"error: answer {answer_id} did not reach the sheet within {TIMEOUT_S:.0f} s: "
        + why_not_in_the_sheet(sessions, answer_id),
        file=sys.stderr,
    )
    return 1


def why_not_in_the_sheet(sessions: sessionmaker[Session], answer_id: str) -> str:
    """The likeliest reason, from what the ledger and Redis say, most telling first."""
    with sessions() as session:
        entry = session.scalars(
            select(SheetTransaction).where(SheetTransaction.submission_answer_id == answer_id)
        ).first()
    if entry is not None and entry.type is not TransactionType.ENQUEUED:
        return (
            f"a worker recorded it {entry.type.value} ({entry.error_message}); "
            "`sheetsync dlq list` and `sheetsync status` say more"
        )
    settings = get_settings()
    redis_url = mask_url(settings.redis_url)
    try:
        with redis_urls.client(settings.redis_url, socket_timeout=2) as client:
            workers = [beat.name for beat in heartbeats.live(client) if beat.role == "worker"]
    except redis.RedisError as exc:
        return (
            f"Redis at {redis_url} does not answer ({type(exc).__name__}): start it; the "
            "answer waits ENQUEUED, and beat's reconciler pushes it once Redis is back"
        )
    if not workers:
        return (
            f"no worker is running on Redis at {redis_url}: start `celery -A sheetsync.celery "
            "worker` with the same SHEETSYNC_* settings (a worker that cannot start says why "
            "in one line; one on another SHEETSYNC_REDIS_URL never sees this answer)"
        )
    return (
        f"worker {', '.join(workers)} runs but did not write it: its log says why (another "
        "SHEETSYNC_DATABASE_URL or SHEETSYNC_PII_KEYS, or the Sheets API at "
        f"{settings.google_api_endpoint} unreachable)"
    )


def forget_own_keys(buffer: BufferKey, google_account_id: str) -> None:
    """Development only: remove what this run left in Redis, so that running the example
    again and again adds nothing there. Every key removed names one of its made-up ids
    (the sheet's buffer, the Google account's rate windows, an alert's mark), and so does
    every index entry and quota share; nothing else is touched. It first gives the worker
    a moment to finish with the buffer (its flush job gone). Best effort: Redis may be
    down."""
    settings = get_settings()
    try:
        with redis_urls.client(settings.redis_url, socket_timeout=2) as client:
            deadline = time.monotonic() + SETTLE_S
            while client.exists(buffer.job) and time.monotonic() < deadline:
                time.sleep(0.1)
            names = [*client.scan_iter(match=f"{buffer.base}:*", count=1000)]
            names += [
                name
                for name in client.scan_iter(match=f"{ALERTED}*", count=1000)
                if buffer.base.encode() in name
            ]
            for kind in RATE_KINDS:
                names.append(rate_account_key(google_account_id, kind))
            client.delete(*names)
            for index in (BUFFER_INDEX, DUE_INDEX):
                client.zrem(index, buffer.base)
            for kind in RATE_KINDS:  # the account's turn at the project's quota
                client.zrem(rate_queue_keys(kind).debts, google_account_id)
    except redis.RedisError:
        pass  # Redis is down: what is there stays (why_not_in_the_sheet said so)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (SheetSyncError, EmulatorError) as error:  # a bad setting; the emulator unreachable
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
