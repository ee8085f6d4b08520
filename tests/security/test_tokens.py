"""A token decrypts only where it belongs.

A personal-info value decrypts only as the value of its own answer and question, a
refresh token only in its own owner's credential: a token copied anywhere else fails,
alone, with a one-line reason that names no value. ``sheetsync pii rotate`` binds the
tokens written before that (version 1) to their rows, resumes after an interruption,
skips and lists what it cannot read, and never overwrites what the web app saved
meanwhile; ``--check`` says what is left.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Engine, delete, event, select, update
from sqlalchemy.orm import Session
from support.cli import Cli
from support.waiting import wait_until

from sheetsync import crypto, emit_answer_submitted
from sheetsync.crypto import LEGACY_TOKEN_VERSION, Keyring, generate_key
from sheetsync.db import session_factory
from sheetsync.dev.seed import link_sheet, seed_answers, seed_form, seed_user
from sheetsync.errors import CryptoError
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    GoogleCredential,
    Question,
    QuestionType,
    SheetTransaction,
    SubmissionAnswer,
    TransactionType,
)
from sheetsync.rotation import rotate_pii
from sheetsync.settings import reset_settings

MOVED_REASON = (
    "the personal-info token fails authentication: tampered, corrupt, or made for another "
    "answer or question (CryptoError)"
)


class V1Keyring(Keyring):
    """Writes tokens as version 1 did, bound to nothing: the data a database holds from
    before version 2, which rotation must bind to its rows."""

    def __init__(self, key: bytes) -> None:
        super().__init__([key])
        self.cipher = AESGCM(key)

    def encrypt(self, plaintext: str, context: bytes) -> str:
        header = bytes([LEGACY_TOKEN_VERSION]) + self.primary_key_id
        nonce = os.urandom(12)
        raw = header + nonce + self.cipher.encrypt(nonce, plaintext.encode(), header)
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _key(text: str) -> bytes:
    return base64.urlsafe_b64decode(text)


def set_value(sessions: Any, answer_id: str, question_id: str, value: Any) -> None:
    """Store ``value`` as the answer's item for ``question_id``, as a person with write
    access to the table might."""
    with sessions.begin() as session:
        answer = session.get(SubmissionAnswer, answer_id)
        items = [i for i in answer.answer if i.get("questionId") != question_id]
        answer.answer = [*items, {"questionId": question_id, "value": value}]


def ledger(world: Any) -> dict[str, tuple[TransactionType, str | None]]:
    with world.pipeline.sessions() as session:
        return {
            row.submission_answer_id: (row.type, row.error_message)
            for row in session.scalars(select(SheetTransaction))
        }


# -- personal info ---------------------------------------------------------------------


def test_personal_info_moved_to_another_answer_or_question_fails_that_answer_alone(
    world: Any, worker: Any
) -> None:
    form = world.form("owner1")
    sibling = world.form("owner1")  # another form of the same owner
    theirs = world.form("owner2")  # another owner's form
    sheet = world.sheet(form)
    ids = world.answers(form, 8)
    [sibling_answer] = world.answers(sibling, 1, prefix="sibling")
    [their_answer] = world.answers(theirs, 1, prefix="theirs")
    phone, email = form.pii_question_ids
    # Tokens the web app made for one place, each copied into another answer's phone.
    made_for = {
        ids[1]: (ids[0], phone),  # the same form, another answer
        ids[3]: (sibling_answer, sibling.pii_question_ids[0]),  # another form
        ids[5]: (their_answer, theirs.pii_question_ids[0]),  # another user's form
        ids[6]: (ids[6], email),  # another question of the same answer
    }
    plaintexts = {victim: f"010-0000-{n:04d}" for n, victim in enumerate(made_for)}
    tokens = {}
    for victim, (answer_id, question_id) in made_for.items():
        tokens[victim] = crypto.encrypt_answer_value(
            plaintexts[victim], answer_id=answer_id, question_id=question_id
        )
        set_value(world.pipeline.sessions, victim, phone, tokens[victim])

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == [i for i in ids if i not in made_for]
    states = ledger(world)
    for victim in made_for:
        state, reason = states[victim]
        assert state is TransactionType.FAILED
        assert reason == f"answer {victim}, question {phone}: {MOVED_REASON}"
        assert plaintexts[victim] not in reason and tokens[victim][:12] not in reason
    assert all(states[i][0] is TransactionType.COMPLETED for i in ids if i not in made_for)
    cells = {cell for row in world.rows(sheet) for cell in row}
    assert not cells & set(plaintexts.values())


def test_a_moved_personal_info_token_is_refused_in_one_line_naming_no_value(
    pii_keys: tuple[bytes, bytes],
) -> None:
    token = crypto.encrypt_answer_value("010-1234-5678", answer_id="ans_1", question_id="q_1")
    elsewhere = [("ans_2", "q_1"), ("ans_1", "q_2"), ("other_form_ans_1", "other_form_q_1")]
    for answer_id, question_id in elsewhere:
        with pytest.raises(CryptoError) as caught:
            crypto.decrypt_answer_value(token, answer_id=answer_id, question_id=question_id)
        message = str(caught.value)
        assert message == (
            "personal-info token failed authentication: made for another answer or "
            "question, or tampered or corrupt"
        )
        assert "010-1234-5678" not in message and token[:8] not in message
    with pytest.raises(CryptoError, match=r"^refresh token failed authentication"):
        crypto.decrypt_refresh_token(token, user_id="ans_1")


# -- refresh tokens --------------------------------------------------------------------


def test_a_refresh_token_copied_to_another_user_is_a_broken_credential(
    world: Any, worker: Any, admin: Any
) -> None:
    world.form("victim")
    thief_form = world.form("thief")
    # The thief links their form to a spreadsheet the victim's Google account can write:
    # with the victim's refresh token, the thief's answers would land there.
    spreadsheet_id, gids = admin.create_spreadsheet("google-victim", "Thief's", ["Responses"])
    sessions = world.pipeline.sessions
    with sessions.begin() as session:
        link_sheet(session, thief_form, spreadsheet_id, gids["Responses"])
        stolen = session.get(GoogleCredential, "victim").refresh_token
        session.get(GoogleCredential, "thief").refresh_token = stolen
    ids = world.answers(thief_form, 3, prefix="thief")
    admin.reset_stats()

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert admin.sheet_values(spreadsheet_id, gids["Responses"]) == []
    assert admin.stats()["token"]["refreshes"] == 0  # the token never went to Google
    [entry] = world.dead_letters()
    assert (entry.user_id, entry.reason) == ("thief", DeadLetterReason.CREDENTIAL)
    assert entry.error_message == (
        "refresh token failed authentication: made for another user, or tampered or corrupt"
    )
    assert stolen[:8] not in entry.error_message
    assert sorted(world.ids_of(entry)) == sorted(ids)
    assert {state for state, _ in ledger(world).values()} == {TransactionType.DEAD_LETTERED}
    with sessions() as session:
        assert session.get(GoogleCredential, "thief").status is CredentialStatus.INVALID
        assert session.get(GoogleCredential, "victim").status is CredentialStatus.VALID


# -- rotation --------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_cli(request: pytest.FixtureRequest) -> Cli:
    """The console script on SQLite, then on PostgreSQL."""
    if request.param == "postgres":
        # Made before pg_cli clears the SHEETSYNC_* variables, its own among them.
        request.getfixturevalue("postgres_url")
    cli: Cli = request.getfixturevalue("cli" if request.param == "sqlite" else "pg_cli")
    return cli


def check(cli: Cli, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    result = cli("pii", "rotate", "--check", "--json", env=env)
    assert result.code in (0, 1), result.stderr
    return result.code, json.loads(result.stdout)


def all_tokens(cli: Cli) -> Iterator[tuple[str, str, str | None]]:
    """``(token, row id, question id)`` of every personal-info value and refresh token."""
    with cli.sessions() as session:
        pii = set(
            session.scalars(select(Question.id).where(Question.type == QuestionType.PERSONAL_INFO))
        )
        for answer_id, items in session.execute(
            select(SubmissionAnswer.id, SubmissionAnswer.answer)
        ):
            for item in items:
                if item["questionId"] in pii and item.get("value"):
                    yield item["value"], answer_id, item["questionId"]
        for user_id, token in session.execute(
            select(GoogleCredential.user_id, GoogleCredential.refresh_token)
        ):
            yield token, user_id, None


def decrypt(token: str, row_id: str, question_id: str | None, keys: Sequence[bytes]) -> str:
    if question_id is None:
        return crypto.decrypt_refresh_token(token, user_id=row_id, keys=keys)
    return crypto.decrypt_answer_value(token, answer_id=row_id, question_id=question_id, keys=keys)


class Interrupted(Exception):
    """Stands for a crash, a Ctrl-C or a lost connection in the middle of a rotation."""


@pytest.mark.slow
def test_rotation_from_version_1_resumes_after_an_interruption(
    any_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = any_cli
    old = cli.env["SHEETSYNC_PII_KEYS"]
    new = generate_key()
    # An upgrade from version 1 accepts its tokens while the rotation rewrites them.
    both = {"SHEETSYNC_PII_KEYS": f"{new},{old}", "SHEETSYNC_PII_ACCEPT_V1_TOKENS": "true"}
    monkeypatch.setenv("SHEETSYNC_PII_ACCEPT_V1_TOKENS", "true")
    reset_settings()
    crypto.reset_keyring()
    with cli.sessions.begin() as session:
        # Version 1 under the old key (answers and a refresh token), and under the new one.
        form = seed_form(session, owner_id="owner_1", keyring=V1Keyring(_key(old)))
        seed_answers(session, form, 7, keyring=V1Keyring(_key(old)))
        other = seed_form(session, owner_id="owner_2", keyring=V1Keyring(_key(new)))
        seed_answers(session, other, 5, prefix="other", keyring=V1Keyring(_key(new)))
    plain = {(row, q): decrypt(t, row, q, [_key(old), _key(new)]) for t, row, q in all_tokens(cli)}

    code, before = check(cli, both)
    assert code == 1
    tokens = len(plain)
    assert before["left"] == tokens
    answers = before["tables"]["submission_answer"]
    assert answers["old_key"] > 0 and answers["old_version"] > 0 and answers["unreadable"] == 0
    assert before["tables"]["google_credential"] == {
        "old_key": 1,
        "old_version": 1,
        "unreadable": 0,
    }
    assert {(t["id"], t["question_id"]) for t in before["tokens"]} == set(plain)
    human = cli("pii", "rotate", "--check", env=both)
    assert human.code == 1
    assert f"{tokens} tokens left: run `sheetsync pii rotate`" in human.stderr

    # The first batch commits, then the run dies.
    with cli.sessions() as session:
        commit = session.commit
        commits = []

        def commit_once_then_die() -> None:
            if commits:
                raise Interrupted
            commits.append(1)
            commit()

        monkeypatch.setattr(session, "commit", commit_once_then_die)
        with pytest.raises(Interrupted):
            rotate_pii(
                session,
                keyring=Keyring([_key(new), _key(old)], accept_version_1=True),
                batch_size=3,
                commit_each_batch=True,
            )
    code, halfway = check(cli, both)
    assert code == 1 and 0 < halfway["left"] < tokens

    resumed = cli.ok("pii", "rotate", "--batch-size", "3", env=both)
    assert "12 answers scanned" in resumed.stdout

    code, after = check(cli, both)
    assert (code, after["left"], after["tokens"]) == (0, 0, [])
    final = cli.ok("pii", "rotate", "--check", env=both)
    assert "submission_answer: 0 tokens left" in final.stdout
    assert "google_credential: 0 tokens left" in final.stdout
    # Every token is version 2 under the new key, bound to its row, and reads the same.
    new_only = Keyring([_key(new)])
    for token, row_id, question_id in all_tokens(cli):
        assert new_only.header(token) == (2, new_only.primary_key_id)
        assert decrypt(token, row_id, question_id, [_key(new)]) == plain[row_id, question_id]


def test_rotation_skips_and_lists_a_bad_token_and_goes_on(cli: Cli) -> None:
    old = cli.env["SHEETSYNC_PII_KEYS"]
    new = generate_key()
    both = {"SHEETSYNC_PII_KEYS": f"{new},{old}"}
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id="owner_1", pii=1)
        ids = seed_answers(session, form, 6)
        seed_user(session, "owner_2")
    [phone] = form.pii_question_ids
    moved = crypto.encrypt_answer_value("010-5555-0000", answer_id=ids[0], question_id=phone)
    bad = {ids[1]: "010-1234-5678", ids[2]: 12345, ids[3]: moved}  # not a token; moved
    for answer_id, value in bad.items():
        set_value(cli.sessions, answer_id, phone, value)
    with cli.sessions.begin() as session:
        stolen = session.get(GoogleCredential, "owner_1").refresh_token
        session.get(GoogleCredential, "owner_2").refresh_token = stolen

    result = cli("pii", "rotate", env=both)

    assert result.code == 1
    assert "6 answers scanned" in result.stdout
    assert "and 1 refresh token re-encrypted" in result.stdout
    assert result.error_lines[-1] == (
        "error: 4 tokens could not be rotated: fix or clear them (or add their key to "
        "SHEETSYNC_PII_KEYS), then run again"
    )
    skipped = [line for line in result.error_lines if line.startswith("skipped: ")]
    assert sorted(skipped) == sorted(
        [
            f"skipped: submission_answer {ids[1]}, question {phone}: personal-info token is "
            "not valid base64 (truncated or corrupt)",
            f"skipped: submission_answer {ids[2]}, question {phone}: personal info is not a "
            "token (a int)",
            f"skipped: submission_answer {ids[3]}, question {phone}: personal-info token "
            "failed authentication: made for another answer or question, or tampered or "
            "corrupt",
            "skipped: google_credential owner_2: refresh token failed authentication: made "
            "for another user, or tampered or corrupt",
        ]
    )
    for secret in ("010-1234-5678", "010-5555-0000", "refresh-owner_1", moved[:8], stolen[:8]):
        assert secret not in result.stdout + result.stderr
    # It went on: everything else is version 2 under the new key; the bad ones are left.
    code, after = check(cli, both)
    assert code == 1
    assert {(t["id"], t["question_id"], t["state"]) for t in after["tokens"]} == {
        (ids[1], phone, "unreadable"),
        (ids[2], phone, "unreadable"),
        (ids[3], phone, "unreadable"),
        ("owner_2", None, "unreadable"),
    }
    with cli.sessions() as session:
        kept = {a.id: a.answer for a in session.scalars(select(SubmissionAnswer))}
    for answer_id, value in bad.items():
        assert {"questionId": phone, "value": value} in kept[answer_id]


@pytest.mark.parametrize(
    "db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
@pytest.mark.parametrize("table", ["google_credential", "submission_answer"])
def test_rotation_never_overwrites_what_the_web_app_saved_meanwhile(
    engine: Engine, pii_keys: tuple[bytes, bytes], table: str
) -> None:
    newest, older = pii_keys
    old = Keyring([older])
    sessions = session_factory(engine)
    with sessions.begin() as session:
        form = seed_form(session, owner_id="owner_1", pii=1, keyring=old)
        seed_user(session, "owner_2", keyring=old)
        ids = seed_answers(session, form, 3, keyring=old)
    [phone] = form.pii_question_ids
    saved: dict[str, str] = {}

    def web_app_saves(session: Session) -> None:
        """The web app, in a transaction of its own: every owner reconnects Google, or
        every respondent edits their answer (new tokens, under the newest key)."""
        if table == "google_credential":
            for user_id in ("owner_1", "owner_2"):
                saved[user_id] = f"refresh-again-{user_id}"
                token = crypto.encrypt_refresh_token(saved[user_id], user_id=user_id)
                session.execute(
                    update(GoogleCredential)
                    .where(GoogleCredential.user_id == user_id)
                    .values(refresh_token=token)
                )
            return
        for answer_id in ids:
            saved[answer_id] = f"010-9999-{answer_id[-1]}"
            token = crypto.encrypt_answer_value(
                saved[answer_id], answer_id=answer_id, question_id=phone
            )
            session.execute(
                update(SubmissionAnswer)
                .where(SubmissionAnswer.id == answer_id)
                .values(answer=[{"questionId": phone, "value": token}])
            )

    def between_read_and_write(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if saved or not statement.startswith(f"UPDATE {table}"):
            return
        with sessions.begin() as web_app:  # another connection: rotation's is mid-transaction
            web_app_saves(web_app)

    event.listen(engine, "before_cursor_execute", between_read_and_write)
    try:
        with sessions() as session:
            result = rotate_pii(session, batch_size=10, commit_each_batch=True)
    finally:
        event.remove(engine, "before_cursor_execute", between_read_and_write)

    assert saved, "the web app never saved: rotation wrote nothing to that table"
    with sessions() as session:
        for row_id, plaintext in saved.items():
            if table == "google_credential":
                token = session.get(GoogleCredential, row_id).refresh_token
                assert crypto.decrypt_refresh_token(token, user_id=row_id) == plaintext
            else:
                items = session.get(SubmissionAnswer, row_id).answer
                token = next(i["value"] for i in items if i["questionId"] == phone)
                value = crypto.decrypt_answer_value(
                    token, answer_id=row_id, question_id=phone, keys=[newest]
                )
                assert value == plaintext
    # Read again, what the web app saved was already current: nothing left to rewrite.
    rewritten = (
        result.credentials_reencrypted
        if table == "google_credential"
        else result.values_reencrypted
    )
    assert (rewritten, result.skipped) == (0, ())


def test_a_moved_version_1_token_is_refused_by_default(world: Any, worker: Any) -> None:
    """A version 1 token decrypts wherever it is pasted, so none decrypts unless the
    operator accepts them for an upgrade: pasted into an answer, it fails that answer
    alone, as a moved version 2 token does, and no sheet gets the value."""
    form = world.form("owner1")
    sheet = world.sheet(form)
    [victim, clean] = world.answers(form, 2)
    phone = form.pii_question_ids[0]
    key = world.pipeline.settings.pii_key_bytes[0]
    moved = V1Keyring(key).encrypt("010-9999-0000", b"")  # bound to nothing
    set_value(world.pipeline.sessions, victim, phone, moved)

    emit_answer_submitted(victim)
    emit_answer_submitted(clean)
    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.ids_in(sheet) == [clean]
    state, reason = ledger(world)[victim]
    assert state is TransactionType.FAILED
    assert "version 1" in reason and "SHEETSYNC_PII_ACCEPT_V1_TOKENS" in reason
    assert moved[:12] not in reason
    assert world.dead_letters() == []
    cells = {cell for row in world.rows(sheet) for cell in row}
    assert "010-9999-0000" not in cells


def test_check_counts_version_1_tokens_as_work_left(cli: Cli) -> None:
    key = _key(cli.env["SHEETSYNC_PII_KEYS"])
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id="owner_1", keyring=V1Keyring(key))
        seed_answers(session, form, 3, keyring=V1Keyring(key))
    tokens = len(list(all_tokens(cli)))

    code, found = check(cli, {})  # the default: version 1 refused

    assert code == 1 and found["left"] == tokens
    assert found["tables"]["submission_answer"]["old_version"] == tokens - 1
    assert found["tables"]["google_credential"]["old_version"] == 1
    refused = cli("pii", "rotate")
    assert refused.code == 1  # nothing bound without the operator's say-so
    code, still = check(cli, {})
    assert still["left"] == tokens


def test_rotation_finds_the_values_of_a_deleted_personal_info_question(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = cli.env["SHEETSYNC_PII_KEYS"]
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id="owner_1")
        seed_answers(session, form, 4)
        deleted = form.pii_question_ids[1]
        session.execute(delete(Question).where(Question.id == deleted))
    values = [(t, row, q) for t, row, q in raw_tokens(cli) if q == deleted]
    assert values  # the answers still hold them
    plain = {row: decrypt(t, row, deleted, [_key(old)]) for t, row, _ in values}
    new = generate_key()
    both = {"SHEETSYNC_PII_KEYS": f"{new},{old}"}

    code, before = check(cli, both)
    assert code == 1
    assert {(t["id"], t["question_id"]) for t in before["tokens"]} >= {
        (row, deleted) for _, row, _ in values
    }
    cli.ok("pii", "rotate", env=both)

    code, after = check(cli, both)
    assert (code, after["left"]) == (0, 0)
    for token, row, question_id in raw_tokens(cli):
        if question_id == deleted:
            assert decrypt(token, row, deleted, [_key(new)]) == plain[row]


def raw_tokens(cli: Cli) -> Iterator[tuple[str, str, str]]:
    """``(value, answer id, question id)`` of every non-empty string answer value."""
    with cli.sessions() as session:
        for answer_id, items in session.execute(
            select(SubmissionAnswer.id, SubmissionAnswer.answer)
        ):
            for item in items:
                if isinstance(item.get("value"), str) and item["value"]:
                    yield item["value"], answer_id, item["questionId"]
