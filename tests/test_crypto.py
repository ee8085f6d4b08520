"""PII encryption: format, contexts, rotation, failures that never leak the value."""

from __future__ import annotations

import base64
import hashlib
import os
import pickle

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import select
from sqlalchemy.orm import Session
from support.databases import on_both_databases

from sheetsync import crypto
from sheetsync.crypto import (
    EMPTY_KEYS_MESSAGE,
    Keyring,
    answer_value_context,
    refresh_token_context,
)
from sheetsync.dev.seed import seed_answers, seed_form
from sheetsync.errors import CryptoError, VersionOneTokenError
from sheetsync.models import GoogleCredential, SubmissionAnswer
from sheetsync.rotation import check_pii, rotate_pii
from sheetsync.settings import reset_settings

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

SECRET = "010-1234-5678 홍길동"
WHERE = {"answer_id": "ans_1", "question_id": "q_phone"}
CONTEXT = answer_value_context("ans_1", "q_phone")


def _raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def v1_token(key: bytes, plaintext: str) -> str:
    """A token as version 1 wrote it: the header alone is the associated data."""
    header = b"\x01" + hashlib.sha256(key).digest()[:4]
    nonce = os.urandom(12)
    return _token(header + nonce + AESGCM(key).encrypt(nonce, plaintext.encode(), header))


@pytest.mark.parametrize("plaintext", ["", "a", SECRET, "🎉" * 100, "x" * 60_000, "=HYPERLINK()"])
def test_round_trip(pii_keys: tuple[bytes, bytes], plaintext: str) -> None:
    token = crypto.encrypt_answer_value(plaintext, **WHERE)
    assert crypto.decrypt_answer_value(token, **WHERE) == plaintext
    refresh = crypto.encrypt_refresh_token(plaintext, user_id="user_1")
    assert crypto.decrypt_refresh_token(refresh, user_id="user_1") == plaintext


def test_token_format(pii_keys: tuple[bytes, bytes]) -> None:
    newest, _ = pii_keys
    token = crypto.encrypt_answer_value(SECRET, **WHERE)
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    raw = _raw(token)
    assert raw[0] == crypto.TOKEN_VERSION == 2
    assert raw[1:5] == hashlib.sha256(newest).digest()[:4]
    assert len(raw) == 1 + 4 + 12 + len(SECRET.encode()) + 16  # the context is not stored
    # The associated data is the header, then the context.
    decrypted = AESGCM(newest).decrypt(raw[5:17], raw[17:], raw[:5] + CONTEXT)
    assert decrypted.decode() == SECRET


def test_nonces_are_random(pii_keys: tuple[bytes, bytes]) -> None:
    assert crypto.encrypt_answer_value(SECRET, **WHERE) != crypto.encrypt_answer_value(
        SECRET, **WHERE
    )


def test_explicit_keys_override_settings(pii_keys: tuple[bytes, bytes]) -> None:
    other = os.urandom(32)
    token = crypto.encrypt_answer_value(SECRET, **WHERE, keys=[other])
    assert crypto.decrypt_answer_value(token, **WHERE, keys=[other]) == SECRET
    with pytest.raises(CryptoError, match="unknown key"):
        crypto.decrypt_answer_value(token, **WHERE)


@pytest.mark.parametrize(
    ("answer_id", "question_id"),
    [("ans_2", "q_phone"), ("ans_1", "q_email"), ("ans_1q", "_phone"), ("", "ans_1q_phone")],
)
def test_a_token_decrypts_only_in_its_own_context(
    pii_keys: tuple[bytes, bytes], answer_id: str, question_id: str
) -> None:
    token = crypto.encrypt_answer_value(SECRET, **WHERE)
    keyring = Keyring(list(pii_keys))
    with pytest.raises(CryptoError) as caught:
        keyring.decrypt(token, answer_value_context(answer_id, question_id))
    assert str(caught.value) == (
        "personal-info token failed authentication: made for another answer or question, "
        "or tampered or corrupt"
    )
    _assert_no_leak(caught.value, token)


def test_the_purposes_never_mix(pii_keys: tuple[bytes, bytes]) -> None:
    # Same ids on both sides: only the purpose differs.
    answer_token = crypto.encrypt_answer_value(SECRET, answer_id="u1", question_id="u1")
    refresh_token = crypto.encrypt_refresh_token(SECRET, user_id="u1")
    with pytest.raises(CryptoError, match=r"^refresh token failed authentication: made for"):
        crypto.decrypt_refresh_token(answer_token, user_id="u1")
    with pytest.raises(CryptoError, match=r"^personal-info token failed authentication"):
        crypto.decrypt_answer_value(refresh_token, answer_id="u1", question_id="u1")
    assert answer_value_context("u1", "u1") != refresh_token_context("u1")


def test_contexts_are_unambiguous() -> None:
    pairs = [("ab", "c"), ("a", "bc"), ("abc", ""), ("", "abc"), ("a\x00", "b"), ("a", "\x00b")]
    contexts = {answer_value_context(a, q) for a, q in pairs}
    assert len(contexts) == len(pairs)
    assert crypto.answer_context("a") + crypto.question_context("b") == answer_value_context(
        "a", "b"
    )


@pytest.mark.parametrize("missing", [{"answer_id": ""}, {"question_id": ""}, {"answer_id": None}])
def test_a_token_needs_its_ids(pii_keys: tuple[bytes, bytes], missing: dict[str, object]) -> None:
    with pytest.raises(CryptoError, match="must be a non-empty string: the token is bound to it"):
        crypto.encrypt_answer_value(SECRET, **{**WHERE, **missing})  # type: ignore[arg-type]
    with pytest.raises(CryptoError, match="user_id must be a non-empty string"):
        crypto.encrypt_refresh_token(SECRET, user_id="")


def test_version_1_tokens_are_refused_by_default(pii_keys: tuple[bytes, bytes]) -> None:
    newest, older = pii_keys
    for key in (newest, older):
        token = v1_token(key, SECRET)
        with pytest.raises(VersionOneTokenError, match="SHEETSYNC_PII_ACCEPT_V1_TOKENS=true"):
            crypto.decrypt_answer_value(token, **WHERE)
        with pytest.raises(VersionOneTokenError) as refused:
            crypto.decrypt_refresh_token(token, user_id="user_1")
        assert SECRET not in str(refused.value) and token not in str(refused.value)


def test_version_1_tokens_decrypt_while_accepted(
    pii_keys: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHEETSYNC_PII_ACCEPT_V1_TOKENS", "true")
    crypto.reset_keyring()
    reset_settings()
    newest, older = pii_keys
    for key in (newest, older):
        token = v1_token(key, SECRET)
        assert crypto.decrypt_answer_value(token, **WHERE) == SECRET
        assert crypto.decrypt_refresh_token(token, user_id="user_1") == SECRET


def test_a_version_2_token_cannot_pass_for_version_1(pii_keys: tuple[bytes, bytes]) -> None:
    raw = bytearray(_raw(crypto.encrypt_answer_value(SECRET, **WHERE)))
    raw[0] = 1
    keyring = Keyring(list(pii_keys), accept_version_1=True)
    with pytest.raises(CryptoError, match=r"failed authentication \(tampered or corrupt\)"):
        keyring.decrypt(_token(bytes(raw)), crypto.answer_value_context(**WHERE))


def test_upgrade_moves_to_the_newest_key_and_version(pii_keys: tuple[bytes, bytes]) -> None:
    newest, older = pii_keys
    keyring = Keyring([newest, older], accept_version_1=True)
    for old_token in (
        v1_token(older, SECRET),
        v1_token(newest, SECRET),
        Keyring([older]).encrypt(SECRET, CONTEXT),
    ):
        moved = keyring.upgrade(old_token, CONTEXT)
        assert keyring.header(moved) == (2, crypto.key_id(newest))
        assert Keyring([newest]).decrypt(moved, CONTEXT) == SECRET
        assert keyring.upgrade(moved, CONTEXT) == moved  # already there: nothing to do


def test_upgrade_refuses_a_tampered_or_misplaced_token(pii_keys: tuple[bytes, bytes]) -> None:
    keyring = Keyring(list(pii_keys))
    token = keyring.encrypt(SECRET, CONTEXT)
    raw = bytearray(_raw(token))
    raw[-1] ^= 1
    with pytest.raises(CryptoError):
        keyring.upgrade(_token(bytes(raw)), CONTEXT)
    with pytest.raises(CryptoError):
        keyring.upgrade(token, answer_value_context("ans_2", "q_phone"))


def test_every_tampered_byte_is_refused_without_leaking(pii_keys: tuple[bytes, bytes]) -> None:
    token = crypto.encrypt_answer_value(SECRET, **WHERE)
    raw = _raw(token)
    for position in range(len(raw)):
        tampered = bytearray(raw)
        tampered[position] ^= 0x01
        tampered_token = _token(bytes(tampered))
        with pytest.raises(CryptoError) as caught:
            crypto.decrypt_answer_value(tampered_token, **WHERE)
        _assert_no_leak(caught.value, token, tampered_token)


@pytest.mark.parametrize("cut", [1, 5, 16, 30])
def test_truncated_token_is_refused(pii_keys: tuple[bytes, bytes], cut: int) -> None:
    token = crypto.encrypt_answer_value(SECRET, **WHERE)
    with pytest.raises(CryptoError) as caught:
        crypto.decrypt_answer_value(token[:-cut], **WHERE)
    _assert_no_leak(caught.value, token, token[:-cut])


@pytest.mark.parametrize("garbage", ["", "not a token!", "AAAA", SECRET, "ü" * 40, "A" * 60])
def test_garbage_is_refused(pii_keys: tuple[bytes, bytes], garbage: str) -> None:
    with pytest.raises(CryptoError) as caught:
        crypto.decrypt_answer_value(garbage, **WHERE)
    assert str(caught.value).startswith("personal-info token ")
    if garbage:
        assert garbage not in str(caught.value)


def test_non_string_token_is_refused(pii_keys: tuple[bytes, bytes]) -> None:
    with pytest.raises(CryptoError, match=r"^refresh token must be a string, not int$"):
        crypto.decrypt_refresh_token(123, user_id="user_1")  # type: ignore[arg-type]


def test_unknown_key_id(pii_keys: tuple[bytes, bytes]) -> None:
    stranger = os.urandom(32)
    token = crypto.encrypt_answer_value(SECRET, **WHERE, keys=[stranger])
    with pytest.raises(CryptoError, match="unknown key") as caught:
        crypto.decrypt_answer_value(token, **WHERE)
    assert crypto.key_id(stranger).hex() in str(caught.value)
    _assert_no_leak(caught.value, token)


def test_empty_key_list_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHEETSYNC_PII_KEYS", raising=False)
    with pytest.raises(CryptoError) as caught:
        crypto.encrypt_answer_value(SECRET, **WHERE)
    assert str(caught.value) == EMPTY_KEYS_MESSAGE
    assert str(caught.value).startswith("SHEETSYNC_PII_KEYS is empty: set at least one key")
    with pytest.raises(CryptoError, match="is empty"):
        Keyring([])


def test_generated_key_is_accepted_by_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    key = crypto.generate_key()
    assert len(base64.urlsafe_b64decode(key)) == 32
    monkeypatch.setenv("SHEETSYNC_PII_KEYS", key)
    crypto.reset_keyring()
    from sheetsync.settings import reset_settings

    reset_settings()
    token = crypto.encrypt_refresh_token(SECRET, user_id="u")
    assert crypto.decrypt_refresh_token(token, user_id="u") == SECRET


def test_bad_keys_are_refused() -> None:
    with pytest.raises(CryptoError, match="32 bytes"):
        Keyring([b"short"])
    key = os.urandom(32)
    assert Keyring([key, key]).primary_key_id == crypto.key_id(key)


def test_crypto_error_pickles_with_its_fields() -> None:
    error = CryptoError("answer a1, question q1: bad", answer_id="a1", question_id="q1")
    clone = pickle.loads(pickle.dumps(error))
    assert isinstance(clone, CryptoError)
    assert (str(clone), clone.answer_id, clone.question_id) == (str(error), "a1", "q1")  # type: ignore[attr-defined]


def _assert_no_leak(error: CryptoError, *tokens: str) -> None:
    message = str(error)
    assert "\n" not in message
    assert SECRET not in message
    for token in tokens:
        assert token not in message
        assert token[:12] not in message


def test_rotate_pii(session: Session, pii_keys: tuple[bytes, bytes]) -> None:
    newest, older = pii_keys
    old_keyring = Keyring([older])
    form = seed_form(session, keyring=old_keyring)
    other = seed_form(session, owner_id="user_2", keyring=old_keyring)
    seed_answers(session, form, 23, keyring=old_keyring)
    seed_answers(session, other, 4, prefix="other", keyring=old_keyring)
    session.commit()
    pii_ids = form.pii_question_ids + other.pii_question_ids
    plain_before = _plain_pii(session, pii_ids, [older])
    assert plain_before
    assert len(check_pii(session).left) == len(plain_before) + 2

    result = rotate_pii(session, batch_size=5, commit_each_batch=True)

    assert result.answers_scanned == 27
    assert result.values_reencrypted == len(plain_before)
    assert 0 < result.answers_updated <= 27
    assert result.credentials_reencrypted == 2
    assert result.skipped == ()
    # Everything now decrypts with the newest key alone, to the same plaintext.
    assert _plain_pii(session, pii_ids, [newest]) == plain_before
    credentials = session.execute(select(GoogleCredential.user_id, GoogleCredential.refresh_token))
    assert sorted(
        crypto.decrypt_refresh_token(token, user_id=user_id, keys=[newest])
        for user_id, token in credentials
    ) == ["refresh-user_1", "refresh-user_2"]
    assert check_pii(session).left == ()

    again = rotate_pii(session)
    assert (again.values_reencrypted, again.answers_updated, again.credentials_reencrypted) == (
        0,
        0,
        0,
    )


def test_rotate_pii_skips_and_names_the_broken_value(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    question_id = form.pii_question_ids[0]
    session.add(
        SubmissionAnswer(
            id="broken",
            submission_id=form.submission_id,
            answer=[{"questionId": question_id, "value": SECRET}],
        )
    )
    seed_answers(session, form, 3)
    session.commit()

    result = rotate_pii(session)

    [skipped] = result.skipped
    assert (skipped.table, skipped.row_id, skipped.question_id, skipped.state) == (
        "submission_answer",
        "broken",
        question_id,
        "unreadable",
    )
    assert SECRET not in skipped.reason
    assert result.answers_scanned == 4


def _plain_pii(
    session: Session, question_ids: tuple[str, ...], keys: list[bytes] | None = None
) -> dict[tuple[str, str], str]:
    session.expire_all()
    plain = {}
    for answer_id, items in session.execute(select(SubmissionAnswer.id, SubmissionAnswer.answer)):
        for item in items:
            question_id = item["questionId"]
            if question_id in question_ids and item["value"]:
                plain[answer_id, question_id] = crypto.decrypt_answer_value(
                    item["value"], answer_id=answer_id, question_id=question_id, keys=keys
                )
    return plain
