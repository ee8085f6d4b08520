"""PII encryption: format, rotation, failures that never leak the value."""

from __future__ import annotations

import base64
import hashlib
import os
import pickle

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from support.databases import on_both_databases

from sheetsync import crypto
from sheetsync.crypto import EMPTY_KEYS_MESSAGE, Keyring, rotate_pii
from sheetsync.dev.seed import seed_answers, seed_form
from sheetsync.errors import CryptoError
from sheetsync.models import GoogleCredential, SubmissionAnswer

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

SECRET = "010-1234-5678 홍길동"


def _raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize("plaintext", ["", "a", SECRET, "🎉" * 100, "x" * 60_000, "=HYPERLINK()"])
def test_round_trip(pii_keys: tuple[bytes, bytes], plaintext: str) -> None:
    assert crypto.decrypt(crypto.encrypt(plaintext)) == plaintext


def test_token_format(pii_keys: tuple[bytes, bytes]) -> None:
    newest, _ = pii_keys
    token = crypto.encrypt(SECRET)
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    raw = _raw(token)
    assert raw[0] == crypto.TOKEN_VERSION
    assert raw[1:5] == hashlib.sha256(newest).digest()[:4]
    assert len(raw) == 1 + 4 + 12 + len(SECRET.encode()) + 16


def test_nonces_are_random(pii_keys: tuple[bytes, bytes]) -> None:
    assert crypto.encrypt(SECRET) != crypto.encrypt(SECRET)


def test_explicit_keys_override_settings(pii_keys: tuple[bytes, bytes]) -> None:
    other = os.urandom(32)
    token = crypto.encrypt(SECRET, keys=[other])
    assert crypto.decrypt(token, keys=[other]) == SECRET
    with pytest.raises(CryptoError, match="unknown key"):
        crypto.decrypt(token)


def test_rotation_old_key_still_decrypts_and_reencrypt_moves_to_newest(
    pii_keys: tuple[bytes, bytes],
) -> None:
    newest, older = pii_keys
    old_token = crypto.encrypt(SECRET, keys=[older])
    assert crypto.decrypt(old_token) == SECRET

    moved = crypto.reencrypt(old_token)
    keyring = Keyring([newest, older])
    assert keyring.token_key_id(moved) == crypto.key_id(newest)
    assert crypto.decrypt(moved, keys=[newest]) == SECRET
    # Already under the newest key: nothing to do.
    assert crypto.reencrypt(moved) == moved


def test_reencrypt_refuses_a_tampered_token_under_the_newest_key(
    pii_keys: tuple[bytes, bytes],
) -> None:
    raw = bytearray(_raw(crypto.encrypt(SECRET)))
    raw[-1] ^= 1
    with pytest.raises(CryptoError):
        crypto.reencrypt(_token(bytes(raw)))


def test_every_tampered_byte_is_refused_without_leaking(pii_keys: tuple[bytes, bytes]) -> None:
    token = crypto.encrypt(SECRET)
    raw = _raw(token)
    for position in range(len(raw)):
        tampered = bytearray(raw)
        tampered[position] ^= 0x01
        tampered_token = _token(bytes(tampered))
        with pytest.raises(CryptoError) as caught:
            crypto.decrypt(tampered_token)
        _assert_no_leak(caught.value, token, tampered_token)


@pytest.mark.parametrize("cut", [1, 5, 16, 30])
def test_truncated_token_is_refused(pii_keys: tuple[bytes, bytes], cut: int) -> None:
    token = crypto.encrypt(SECRET)
    with pytest.raises(CryptoError) as caught:
        crypto.decrypt(token[:-cut])
    _assert_no_leak(caught.value, token, token[:-cut])


@pytest.mark.parametrize("garbage", ["", "not a token!", "AAAA", SECRET, "ü" * 40])
def test_garbage_is_refused(pii_keys: tuple[bytes, bytes], garbage: str) -> None:
    with pytest.raises(CryptoError) as caught:
        crypto.decrypt(garbage)
    if garbage:
        assert garbage not in str(caught.value)


def test_non_string_token_is_refused(pii_keys: tuple[bytes, bytes]) -> None:
    with pytest.raises(CryptoError, match="must be a string"):
        crypto.decrypt(123)  # type: ignore[arg-type]


def test_unknown_key_id(pii_keys: tuple[bytes, bytes]) -> None:
    stranger = os.urandom(32)
    token = crypto.encrypt(SECRET, keys=[stranger])
    with pytest.raises(CryptoError, match="unknown key") as caught:
        crypto.decrypt(token)
    assert crypto.key_id(stranger).hex() in str(caught.value)
    _assert_no_leak(caught.value, token)


def test_empty_key_list_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHEETSYNC_PII_KEYS", raising=False)
    with pytest.raises(CryptoError) as caught:
        crypto.encrypt(SECRET)
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
    assert crypto.decrypt(crypto.encrypt(SECRET)) == SECRET


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
    plain_before = _plain_pii(session, form.pii_question_ids + other.pii_question_ids)
    assert plain_before

    result = rotate_pii(session, batch_size=5, commit_each_batch=True)

    assert result.answers_scanned == 27
    assert result.values_reencrypted == len(plain_before)
    assert 0 < result.answers_updated <= 27
    assert result.credentials_reencrypted == 2
    # Everything now decrypts with the newest key alone, to the same plaintext.
    assert _plain_pii(session, form.pii_question_ids + other.pii_question_ids, [newest]) == (
        plain_before
    )
    tokens = session.scalars(select(GoogleCredential.refresh_token)).all()
    assert sorted(crypto.decrypt(t, keys=[newest]) for t in tokens) == [
        "refresh-user_1",
        "refresh-user_2",
    ]

    again = rotate_pii(session)
    assert (again.values_reencrypted, again.answers_updated, again.credentials_reencrypted) == (
        0,
        0,
        0,
    )


def test_rotate_pii_names_the_broken_value(session: Session, pii_keys: tuple[bytes, bytes]) -> None:
    form = seed_form(session)
    question_id = form.pii_question_ids[0]
    session.add(
        SubmissionAnswer(
            id="broken",
            submission_id=form.submission_id,
            answer=[{"questionId": question_id, "value": SECRET}],
        )
    )
    session.commit()
    with pytest.raises(CryptoError) as caught:
        rotate_pii(session)
    message = str(caught.value)
    assert "broken" in message and question_id in message
    assert SECRET not in message


def _plain_pii(
    session: Session, question_ids: tuple[str, ...], keys: list[bytes] | None = None
) -> dict[tuple[str, str], str]:
    session.expire_all()
    plain = {}
    for answer_id, items in session.execute(select(SubmissionAnswer.id, SubmissionAnswer.answer)):
        for item in items:
            if item["questionId"] in question_ids and item["value"]:
                plain[answer_id, item["questionId"]] = crypto.decrypt(item["value"], keys=keys)
    return plain
