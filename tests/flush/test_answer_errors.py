"""Every failure of one answer is that answer's alone.

:meth:`RowBuilder.build` raises :class:`AnswerError` for whatever is wrong with one
answer, with the message ``answer <id>, question <id or ->: <what> (<error class>)`` and
never the value or any part of a token; a token under an unknown key is a configuration
error and propagates unchanged. :func:`fetch_answers` never fails a batch because of one
row's data: it hands that answer over as a :class:`MalformedAnswer`.
"""

from __future__ import annotations

import logging
import os
import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session
from support.databases import on_both_databases

import sheetsync.flush.layout
from sheetsync.crypto import Keyring, answer_value_context, refresh_token_context
from sheetsync.db import is_postgres
from sheetsync.dev.seed import DEFAULT_FIRST_SUBMITTED_AT, seed_answers, seed_form
from sheetsync.errors import AnswerError, ConfigError, MissingKeyError
from sheetsync.flush.hydrate import (
    AnswerRecord,
    MalformedAnswer,
    _decode_answer,
    _generic,
    fetch_answers,
)
from sheetsync.flush.layout import FormLayout, load_layout
from sheetsync.flush.rows import RowBuilder
from sheetsync.models import QuestionType
from sheetsync.settings import Settings

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

KEYRING = Keyring([os.urandom(32)])
SETTINGS = Settings.load(timezone="Asia/Seoul")
SUBMITTED = datetime(2024, 5, 1, 3, 4, 5, tzinfo=UTC)
SECRET = "010-1234-5678"
TOKEN = KEYRING.encrypt(SECRET, answer_value_context("ans_1", "phone"))

LAYOUT = FormLayout.from_questions(
    "form_1",
    [
        ("intro", "안내", QuestionType.JUMBOTRON),
        ("name", "이름", QuestionType.SHORT_TEXT),
        ("topics", "관심 분야", QuestionType.MULTI_CHOICE),
        ("phone", "연락처", QuestionType.PERSONAL_INFO),
        ("rating", "별점", "RATING"),  # added by the web app after this version
    ],
)


def refused(answer: object, *, builder: RowBuilder | None = None) -> AnswerError:
    """The AnswerError both paths of build raise for answer ``ans_1`` (the same one)."""
    builder = builder or RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    errors = []
    for build in (builder.build, builder._build_checked):
        with pytest.raises(AnswerError) as caught:
            build("ans_1", "홍길동", SUBMITTED, answer)
        errors.append(caught.value)
    assert str(errors[0]) == str(errors[1]) and errors[0].fields == errors[1].fields
    return errors[0]


def assert_reason(
    error: AnswerError, question_id: str | None, error_class: str, *hidden: str
) -> None:
    """The message's shape and fields; none of ``hidden`` (values, tokens) in it."""
    message = str(error)
    assert message.startswith(f"answer ans_1, question {question_id or '-'}: "), message
    assert message.endswith(f" ({error_class})"), message
    assert error.fields == {
        "answer_id": "ans_1",
        "question_id": question_id,
        "error_class": error_class,
    }
    for value in (SECRET, TOKEN, TOKEN[:8], TOKEN[-8:], *hidden):
        assert value not in message, (value, message)


# -- the document ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        (None, "null"),
        (42, "a number"),
        (-0.5, "a number"),
        (True, "a boolean"),
        ("[{'questionId': 'name'}]", "a string"),
        ({"questionId": "name", "value": SECRET}, "an object"),
    ],
)
def test_a_document_that_is_not_a_list_fails_the_answer(document: Any, kind: str) -> None:
    error = refused(document)
    assert str(error) == (
        f"answer ans_1, question -: the answer is {kind}, not a list of items (TypeError)"
    )
    assert_reason(error, None, "TypeError")


@pytest.mark.parametrize(
    ("column", "error_class"),
    [("answer", "JSONDecodeError"), ("answer", "RecursionError"), ("submitted_at", "DataError")],
)
def test_a_row_hydration_could_not_read_fails_the_answer(column: str, error_class: str) -> None:
    error = refused(MalformedAnswer(column, error_class))
    assert str(error) == f"answer ans_1, question -: column {column} cannot be read ({error_class})"
    assert_reason(error, None, error_class)


@pytest.mark.parametrize(
    ("item", "what", "error_class"),
    [
        (SECRET, "answer[1] is a string, not an object", "TypeError"),
        (None, "answer[1] is null, not an object", "TypeError"),
        (7, "answer[1] is a number, not an object", "TypeError"),
        (["questionId", "name"], "answer[1] is a list, not an object", "TypeError"),
        ({"value": SECRET}, "answer[1] has no questionId", "KeyError"),
        (
            {"questionId": 7, "value": SECRET},
            "answer[1] has a questionId that is a number",
            "TypeError",
        ),
        ({"questionId": None}, "answer[1] has a questionId that is null", "TypeError"),
        ({"questionId": ["name"]}, "answer[1] has a questionId that is a list", "TypeError"),
    ],
)
def test_an_item_without_a_string_question_id_fails_the_answer(
    item: Any, what: str, error_class: str
) -> None:
    error = refused([{"questionId": "name", "value": "ok"}, item])
    assert str(error) == f"answer ans_1, question -: {what} ({error_class})"
    assert_reason(error, None, error_class)


def test_a_value_for_a_question_the_form_does_not_have_fails_the_answer() -> None:
    error = refused([{"questionId": "deleted_q", "value": SECRET}])
    assert (
        str(error) == "answer ans_1, question deleted_q: the form has no such question (KeyError)"
    )
    assert_reason(error, "deleted_q", "KeyError")


def test_an_answer_error_pickles_with_its_fields() -> None:
    error = refused([{"questionId": "deleted_q", "value": SECRET}])
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is AnswerError
    assert str(copy) == str(error) and copy.fields == error.fields


def test_a_long_question_id_is_cut_in_the_reason() -> None:
    error = refused([{"questionId": "q" * 100_000, "value": "x"}])
    assert len(str(error)) < 300
    assert error.question_id == "q" * 128 + "…"  # type: ignore[attr-defined]


# -- personal info ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (12345, "a number"),
        (0, "a number"),
        (2.5, "a number"),
        (True, "a boolean"),
        (False, "a boolean"),
        ({"token": TOKEN}, "an object"),
        ({}, "an object"),
        ([TOKEN, 12345], "a list with a number in it"),
        ([TOKEN, None], "a list with null in it"),
        ([[TOKEN]], "a list with a list in it"),
    ],
)
def test_personal_info_that_is_not_a_token_or_a_list_of_tokens_fails_the_answer(
    value: Any, kind: str
) -> None:
    error = refused([{"questionId": "phone", "value": value}])
    assert str(error) == (
        f"answer ans_1, question phone: personal info is {kind}, "
        "not a token or a list of tokens (TypeError)"
    )
    assert_reason(error, "phone", "TypeError", "12345", "True", "False")


def _tampered(token: str) -> str:
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


@pytest.mark.parametrize(
    "value",
    [SECRET, _tampered(TOKEN), TOKEN[:-10], TOKEN + "AAAA", [TOKEN, _tampered(TOKEN)], [""]],
    ids=["never-encrypted", "tampered", "cut", "extended", "one-tampered", "empty-part"],
)
def test_a_corrupt_or_tampered_token_fails_the_answer(value: Any) -> None:
    error = refused([{"questionId": "phone", "value": value}])
    assert str(error) == TOKEN_REFUSED
    hidden = [part for part in (value if isinstance(value, list) else [value]) if part]
    assert_reason(error, "phone", "CryptoError", *hidden, *(part[:12] for part in hidden))


TOKEN_REFUSED = (
    "answer ans_1, question phone: the personal-info token fails authentication: tampered, "
    "corrupt, or made for another answer or question (CryptoError)"
)
MOVED_SECRET = "010-9876-5432"


@pytest.mark.parametrize(
    "context",
    [
        answer_value_context("ans_2", "phone"),  # another answer to the same form
        answer_value_context("other_form_ans_1", "other_form_phone"),  # another form's
        answer_value_context("ans_1", "name"),  # another question of the same answer
        answer_value_context("ans_1", "phone2"),
        refresh_token_context("ans_1"),  # an owner's refresh token
    ],
    ids=["other-answer", "other-form", "other-question", "similar-question", "refresh-token"],
)
def test_a_token_moved_from_elsewhere_fails_the_answer(context: bytes) -> None:
    moved = KEYRING.encrypt(MOVED_SECRET, context)
    for value in (moved, [TOKEN, moved]):
        error = refused([{"questionId": "phone", "value": value}])
        assert str(error) == TOKEN_REFUSED
        assert_reason(error, "phone", "CryptoError", MOVED_SECRET, moved, moved[:12])


def test_empty_personal_info_is_an_empty_cell() -> None:
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    for value in ("", None, []):
        row = builder.build("a", None, SUBMITTED, [{"questionId": "phone", "value": value}])
        assert row[5] == ""


def test_a_token_under_an_unknown_key_propagates_unchanged() -> None:
    context = answer_value_context("ans_1", "phone")
    token = Keyring([os.urandom(32)]).encrypt(SECRET, context)
    with pytest.raises(MissingKeyError) as expected:
        KEYRING.decrypt(token, context)
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    for value in (token, [KEYRING.encrypt("ok", context), token]):
        for build in (builder.build, builder._build_checked):
            with pytest.raises(MissingKeyError) as caught:
                build("ans_1", None, SUBMITTED, [{"questionId": "phone", "value": value}])
            assert type(caught.value) is MissingKeyError
            assert str(caught.value) == str(expected.value)


class _BrokenKeyring(Keyring):
    def __init__(self, error: Exception) -> None:
        super().__init__([os.urandom(32)])
        self.error = error

    def decrypt(self, token: str, context: bytes) -> str:
        raise self.error


def test_a_configuration_error_while_decrypting_propagates() -> None:
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=_BrokenKeyring(ConfigError("no keys")))
    with pytest.raises(ConfigError, match=r"^no keys$"):
        builder.build("ans_1", None, SUBMITTED, [{"questionId": "phone", "value": TOKEN}])


# -- values a cell cannot show ---------------------------------------------------------


@pytest.mark.parametrize(
    ("question_id", "value", "kind"),
    [
        ("name", {"text": SECRET}, "an object"),
        ("name", {}, "an object"),
        ("topics", ["AI", {"text": SECRET}], "a list with an object in it"),
        ("topics", ["AI", [SECRET]], "a list with a list in it"),
        ("rating", {"stars": 5}, "an object"),
    ],
)
def test_a_value_no_cell_can_show_fails_the_answer(question_id: str, value: Any, kind: str) -> None:
    error = refused([{"questionId": question_id, "value": value}])
    assert str(error) == (
        f"answer ans_1, question {question_id}: the value is {kind}, "
        "which a cell cannot show (TypeError)"
    )
    assert_reason(error, question_id, "TypeError", "stars")


def test_a_display_only_question_takes_any_value() -> None:
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    for value in ({"html": "<b>x</b>"}, [{"a": 1}], 5, None, "text", [[1]]):
        row = builder.build("a", None, SUBMITTED, [{"questionId": "intro", "value": value}])
        assert row == ["a", "", "2024-05-01 12:04:05", "", "", "", ""]


# -- anything else ---------------------------------------------------------------------


def test_an_unexpected_exception_fails_the_answer_naming_its_class() -> None:
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=_BrokenKeyring(RuntimeError(SECRET)))
    error = refused(
        [{"questionId": "name", "value": "x"}, {"questionId": "phone", "value": TOKEN}],
        builder=builder,
    )
    assert str(error) == (
        "answer ans_1, question phone: unexpected error while building the row (RuntimeError)"
    )
    assert_reason(error, "phone", "RuntimeError")
    assert error.__cause__ is None and error.__suppress_context__


@pytest.mark.parametrize(
    ("submitted_at", "error_class"),
    [
        (datetime.max.replace(tzinfo=UTC), "OverflowError"),  # past 9999 in Seoul
        (None, "AttributeError"),
        ("2024-05-01", "AttributeError"),
    ],
)
def test_a_time_that_cannot_be_shown_fails_the_answer(submitted_at: Any, error_class: str) -> None:
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    errors = []
    for build in (builder.build, builder._build_checked):
        with pytest.raises(AnswerError) as caught:
            build("ans_1", None, submitted_at, [])
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert errors[0].startswith("answer ans_1, question -: ")
    assert errors[0].endswith(f"({error_class})")


# -- a question type this version does not know ----------------------------------------


def test_an_unknown_question_type_is_a_text_column() -> None:
    assert [column.type for column in LAYOUT.questions] == [
        QuestionType.SHORT_TEXT,
        QuestionType.MULTI_CHOICE,
        QuestionType.PERSONAL_INFO,
        "RATING",
    ]
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    for value, cell in [
        ("5", "5"),
        ("=1+1", "=1+1"),
        (["a", "b"], "a, b"),
        (4.5, "4.5"),
        (None, ""),
    ]:
        row = builder.build("a", None, SUBMITTED, [{"questionId": "rating", "value": value}])
        assert row[6] == cell


def test_types_given_by_name_are_the_known_types() -> None:
    layout = FormLayout.from_questions(
        "f", [("i", "I", "JUMBOTRON"), ("p", "P", "PERSONAL_INFO"), ("t", "T", "SHORT_TEXT")]
    )
    assert layout.ignored_question_ids == frozenset({"i"})
    assert [column.type for column in layout.questions] == [
        QuestionType.PERSONAL_INFO,
        QuestionType.SHORT_TEXT,
    ]
    assert layout.has_personal_info


def test_load_layout_reads_an_unknown_type_as_text(
    session: Session,
    pii_keys: tuple[bytes, bytes],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sheetsync.flush.layout, "_warned_types", set())
    form = seed_form(session, steps=2, questions_per_step=3, pii=1, jumbotrons=1)
    ids = seed_answers(session, form, 2)
    rated = next(q for q in form.columns if q.type is QuestionType.SHORT_TEXT)
    session.execute(text("UPDATE question SET type = 'RATING' WHERE id = :id"), {"id": rated.id})
    session.commit()

    with caplog.at_level(logging.WARNING, logger="sheetsync.flush.layout"):
        layout = load_layout(session, form.submission_id)
        load_layout(session, form.submission_id)

    assert layout.question_ids == tuple(q.id for q in form.columns)
    types = {column.question_id: column.type for column in layout.questions}
    assert types[rated.id] == "RATING"
    assert all(types[q.id] is q.type for q in form.columns if q.id != rated.id)
    assert layout.ignored_question_ids == frozenset(form.jumbotron_question_ids)
    assert layout.has_personal_info
    assert [r.getMessage() for r in caplog.records] == [
        "question type 'RATING' is unknown to this version: written as text"
    ]
    records = fetch_answers(session, ids)
    builder = RowBuilder(layout)
    index = 3 + layout.question_ids.index(rated.id)
    for record in records.values():
        row = builder.build(record.id, record.user_name, record.submitted_at, record.answer)
        [value] = [i["value"] for i in record.answer if i["questionId"] == rated.id]
        assert row[index] == value


# -- hydration: one row never fails the batch ------------------------------------------


def _store_raw(session: Session, answer_id: str, column: str, raw: object) -> None:
    """Overwrite one column of an answer with exactly ``raw``, as another writer might."""
    postgres = is_postgres(session.get_bind())
    cast = {"answer": "CAST(:raw AS json)", "submitted_at": "CAST(:raw AS timestamptz)"}
    value = cast[column] if postgres else ":raw"
    session.execute(
        text(f"UPDATE submission_answer SET {column} = {value} WHERE id = :id"),
        {"raw": raw, "id": answer_id},
    )


def _outcomes(session: Session, records: dict[str, AnswerRecord]) -> dict[str, object]:
    """Each record's row, or its AnswerError's message."""
    form_id = next(iter(records.values())).submission_id
    builder = RowBuilder(load_layout(session, form_id))
    outcomes: dict[str, object] = {}
    for record in records.values():
        try:
            outcomes[record.id] = builder.build(
                record.id, record.user_name, record.submitted_at, record.answer
            )
        except AnswerError as exc:
            outcomes[record.id] = str(exc)
    return outcomes


DOCUMENTS: list[tuple[str, object, str]] = [
    ("null", None, "the answer is null, not a list of items (TypeError)"),
    ("42", 42, "the answer is a number, not a list of items (TypeError)"),
    ("-1.5", -1.5, "the answer is a number, not a list of items (TypeError)"),
    ("true", True, "the answer is a boolean, not a list of items (TypeError)"),
    ('"just text"', "just text", "the answer is a string, not a list of items (TypeError)"),
    ('{"questionId": "x"}', {"questionId": "x"}, "the answer is an object, not a list of items"),
    ("[1, 2]", [1, 2], "answer[0] is a number, not an object (TypeError)"),
    ("[[]]", [[]], "answer[0] is a list, not an object (TypeError)"),
]


@pytest.mark.parametrize(("raw", "decoded", "reason"), DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_a_document_that_is_not_a_list_of_items_fails_alone(
    session: Session, pii_keys: tuple[bytes, bytes], raw: str, decoded: object, reason: str
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    _store_raw(session, ids[1], "answer", raw)
    session.commit()

    records = fetch_answers(session, ids)

    assert list(records) == ids
    assert records[ids[1]].answer == decoded
    assert type(records[ids[1]].answer) is type(decoded)
    outcomes = _outcomes(session, records)
    assert isinstance(outcomes[ids[0]], list) and isinstance(outcomes[ids[2]], list)
    reason_recorded = outcomes[ids[1]]
    assert isinstance(reason_recorded, str)
    assert reason_recorded.startswith(f"answer {ids[1]}, question -: {reason}")


@pytest.mark.parametrize(
    "raw", ['{"broken": ', "[1,", "", "NaN?", "[{\"questionId\": 'single'}]", "\x00"]
)
def test_sqlite_text_that_is_not_json_fails_alone(
    session: Session, pii_keys: tuple[bytes, bytes], raw: str
) -> None:
    if is_postgres(session.get_bind()):
        pytest.skip("PostgreSQL's json refuses it on the way in")
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    _store_raw(session, ids[1], "answer", raw)
    session.commit()

    records = fetch_answers(session, ids)

    assert list(records) == ids
    assert records[ids[1]].answer == MalformedAnswer("answer", "JSONDecodeError")
    assert records[ids[1]].submitted_at.tzinfo is UTC
    stored = {i: records[i].answer for i in (ids[0], ids[2])}
    assert all(isinstance(items, list) and items for items in stored.values())
    outcomes = _outcomes(session, records)
    assert outcomes[ids[1]] == (
        f"answer {ids[1]}, question -: column answer cannot be read (JSONDecodeError)"
    )
    assert isinstance(outcomes[ids[0]], list) and isinstance(outcomes[ids[2]], list)


def test_a_document_deeper_than_the_decoders_go_fails_alone(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    _store_raw(session, ids[0], "answer", "[" * 5000 + "]" * 5000)
    session.commit()

    records = fetch_answers(session, ids)

    assert records[ids[0]].answer == MalformedAnswer("answer", "RecursionError")
    assert all(isinstance(records[i].answer, list) for i in ids[1:])


def test_sqlite_times_that_cannot_be_read_fail_alone(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    if is_postgres(session.get_bind()):
        pytest.skip("SQLite only: PostgreSQL types its timestamps")
    form = seed_form(session)
    ids = seed_answers(session, form, 5)
    for answer_id, raw in zip(ids[1:4], ["not a time", 1714521600, "2024-13-45 99:00:00"]):
        _store_raw(session, answer_id, "submitted_at", raw)
    session.commit()

    records = fetch_answers(session, ids)

    assert list(records) == ids
    assert [records[i].answer for i in ids[1:4]] == [
        MalformedAnswer("submitted_at", "ValueError"),
        MalformedAnswer("submitted_at", "TypeError"),
        MalformedAnswer("submitted_at", "ValueError"),
    ]
    assert records[ids[0]].submitted_at == DEFAULT_FIRST_SUBMITTED_AT
    assert records[ids[4]].submitted_at == DEFAULT_FIRST_SUBMITTED_AT + timedelta(seconds=28)
    outcomes = _outcomes(session, records)
    assert outcomes[ids[2]] == (
        f"answer {ids[2]}, question -: column submitted_at cannot be read (TypeError)"
    )
    assert isinstance(outcomes[ids[0]], list) and isinstance(outcomes[ids[4]], list)


@pytest.mark.parametrize(
    "raw",
    ["infinity", "-infinity", "10000-01-01 00:00:00+00", "0044-03-15 12:00:00+00 BC"],
)
def test_postgres_times_python_cannot_hold_fail_alone(
    session: Session, pii_keys: tuple[bytes, bytes], raw: str
) -> None:
    if not is_postgres(session.get_bind()):
        pytest.skip("PostgreSQL only")
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    _store_raw(session, ids[1], "submitted_at", raw)
    session.commit()

    records = fetch_answers(session, ids)

    assert list(records) == ids
    assert records[ids[1]].answer == MalformedAnswer("submitted_at", "DataError")
    assert records[ids[2]].submitted_at == DEFAULT_FIRST_SUBMITTED_AT + timedelta(seconds=14)
    assert _outcomes(session, records)[ids[1]] == (
        f"answer {ids[1]}, question -: column submitted_at cannot be read (DataError)"
    )


def test_postgres_a_time_past_9999_in_utc_fails_alone_in_any_session_zone(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    if not is_postgres(session.get_bind()):
        pytest.skip("PostgreSQL only")
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    _store_raw(session, ids[1], "submitted_at", "10000-01-01 02:00:00+00")
    session.commit()
    # Printed as 9999-12-31 21:00:00-05, which Python reads but cannot hold in UTC.
    session.execute(text("SET LOCAL TimeZone = 'America/New_York'"))

    records = fetch_answers(session, ids)

    assert records[ids[1]].answer == MalformedAnswer("submitted_at", "OverflowError")
    assert records[ids[0]].submitted_at == DEFAULT_FIRST_SUBMITTED_AT
    assert records[ids[0]].submitted_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("[NaN]", None),  # json.loads reads it: checked below
        (None, None),  # SQL NULL, as JSON null
        (42, 42),  # what SQLite's numeric affinity makes of the text 42
        (2.5, 2.5),
        (b'[{"questionId": "q", "value": "v"}]', [{"questionId": "q", "value": "v"}]),
        ("[1,", MalformedAnswer("answer", "JSONDecodeError")),
        (b"\xff[]", MalformedAnswer("answer", "UnicodeDecodeError")),
        ("[" * 5000 + "]" * 5000, MalformedAnswer("answer", "RecursionError")),
        ("[1" + "0" * 5000 + "]", MalformedAnswer("answer", "ValueError")),  # int too long
        (object(), MalformedAnswer("answer", "TypeError")),
    ],
)
def test_decoding_one_answer_never_raises(raw: object, decoded: object) -> None:
    result = _decode_answer(raw)
    if raw == "[NaN]":
        assert isinstance(result, list) and result[0] != result[0]
    else:
        assert result == decoded


def test_the_generic_path_fails_one_answer_alone(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    postgres = is_postgres(session.get_bind())
    form = seed_form(session)
    ids = seed_answers(session, form, 3)
    _store_raw(session, ids[1], "answer", '{"questionId": 1}' if postgres else '{"broken": ')
    session.commit()

    records = _generic(session.connection(), ids)

    assert list(records) == ids
    expected = {"questionId": 1} if postgres else MalformedAnswer("answer", "JSONDecodeError")
    assert records[ids[1]].answer == expected
    assert all(isinstance(records[i].answer, list) for i in (ids[0], ids[2]))
