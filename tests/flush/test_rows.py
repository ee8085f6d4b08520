"""Row format (docs/ARCHITECTURE.md, "Columns"): what a respondent typed is what the
sheet shows."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy.orm import Session
from support.databases import on_both_databases

from sheetsync.crypto import Keyring, answer_value_context
from sheetsync.dev.seed import seed_form
from sheetsync.errors import AnswerError, CryptoError, MissingKeyError, NotFoundError
from sheetsync.flush.cells import fit_cell
from sheetsync.flush.layout import FormLayout, load_layout
from sheetsync.flush.rows import RowBuilder, header_row
from sheetsync.flush.times import format_time
from sheetsync.models import Question, QuestionType, Step, Submission, User
from sheetsync.settings import Settings

#: Every test here that uses the database runs on SQLite and PostgreSQL.
pytest_generate_tests = on_both_databases

KEY = os.urandom(32)
KEYRING = Keyring([KEY])
SETTINGS = Settings.load(timezone="Asia/Seoul")
SUBMITTED = datetime(2024, 5, 1, 3, 4, 5, 999_999, tzinfo=UTC)  # 12:04:05 in Seoul

LAYOUT = FormLayout.from_questions(
    "form_1",
    [
        ("intro", "안내", QuestionType.JUMBOTRON),
        ("name", "이름", QuestionType.SHORT_TEXT),
        ("interests", "관심 분야", QuestionType.MULTI_CHOICE),
        ("phone", "연락처", QuestionType.PERSONAL_INFO),
        ("note", "하고 싶은 말", QuestionType.LONG_TEXT),
    ],
)


def seal(plaintext: str, answer_id: str = "ans_1", question_id: str = "phone") -> str:
    """A personal-info token for that answer and question (the web app's call)."""
    return KEYRING.encrypt(plaintext, answer_value_context(answer_id, question_id))


def build(items: list[dict[str, Any]], **kwargs: Any) -> list[str]:
    builder = RowBuilder(LAYOUT, kwargs.pop("settings", SETTINGS), keyring=KEYRING)
    return builder.build(
        kwargs.get("answer_id", "ans_1"),
        kwargs.get("user_name", "홍길동"),
        kwargs.get("submitted_at", SUBMITTED),
        items,
    )


def test_layout_drops_jumbotrons_and_keeps_order() -> None:
    assert LAYOUT.question_ids == ("name", "interests", "phone", "note")
    assert LAYOUT.ignored_question_ids == frozenset({"intro"})
    assert LAYOUT.has_personal_info


def test_full_row() -> None:
    row = build(
        [
            {"questionId": "intro", "value": None},
            {"questionId": "note", "value": "감사합니다"},
            {"questionId": "phone", "value": seal("010-1234-5678")},
            {"questionId": "interests", "value": ["AI", "데이터"]},
            {"questionId": "name", "value": "개발팀"},
        ]
    )
    assert row == [
        "ans_1",
        "홍길동",
        "2024-05-01 12:04:05",
        "개발팀",
        "AI, 데이터",
        "010-1234-5678",
        "감사합니다",
    ]


@pytest.mark.parametrize(
    "typed",
    [
        '=HYPERLINK("http://x","y")',
        "+1 555 0100",
        "0012",
        "@SUM(A1)",
        "-2",
        "'quoted",
        "홍길동 님, 안녕하세요",
        "🎉👍🏽 emoji",
        "line one\nline two\ttab",
        "  padded  ",
        "TRUE",
        "1/2",
    ],
)
def test_values_come_out_exactly_as_typed(typed: str) -> None:
    row = build(
        [
            {"questionId": "name", "value": typed},
            {"questionId": "phone", "value": seal(typed)},
            {"questionId": "interests", "value": [typed]},
        ]
    )
    assert row[3] == typed
    assert row[4] == typed
    assert row[5] == typed


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, ""),
        ("", ""),
        ([], ""),
        (["only"], "only"),
        (["a", "b", "c"], "a, b, c"),
        (["쉼표, 포함", "b"], "쉼표, 포함, b"),
        (3, "3"),
        (0, "0"),
        (2.5, "2.5"),
        (True, "TRUE"),
    ],
)
def test_cell_values(value: Any, cell: str) -> None:
    assert build([{"questionId": "interests", "value": value}])[4] == cell


def test_missing_answers_are_empty_cells() -> None:
    row = build([])
    assert row == ["ans_1", "홍길동", "2024-05-01 12:04:05", "", "", "", ""]


def test_missing_submitter_is_empty() -> None:
    assert build([], user_name=None)[1] == ""


def test_jumbotron_answers_are_ignored() -> None:
    row = build([{"questionId": "intro", "value": "display text"}])
    assert "display text" not in row
    assert len(row) == 3 + len(LAYOUT.questions)


@pytest.mark.parametrize(
    ("zone", "submitted_at", "expected"),
    [
        ("Asia/Seoul", SUBMITTED, "2024-05-01 12:04:05"),
        ("UTC", SUBMITTED, "2024-05-01 03:04:05"),
        ("America/New_York", SUBMITTED, "2024-04-30 23:04:05"),
        ("Asia/Seoul", datetime(2024, 12, 31, 15, 0, tzinfo=UTC), "2025-01-01 00:00:00"),
        (
            "Asia/Seoul",
            datetime(2024, 5, 1, 9, 0, tzinfo=timezone(timedelta(hours=9))),
            "2024-05-01 09:00:00",
        ),
        ("Asia/Seoul", datetime(2024, 5, 1, 0, 0), "2024-05-01 09:00:00"),  # naive = UTC
    ],
)
def test_time_is_formatted_in_the_configured_zone(
    zone: str, submitted_at: datetime, expected: str
) -> None:
    settings = Settings.load(timezone=zone)
    assert build([], settings=settings, submitted_at=submitted_at)[2] == expected


@pytest.mark.parametrize(
    ("zone", "submitted_at", "expected"),
    [
        # New York springs forward at 07:00 UTC on 2024-03-10: 02:00 EST becomes 03:00 EDT.
        ("America/New_York", datetime(2024, 3, 10, 6, 59, 59, tzinfo=UTC), "2024-03-10 01:59:59"),
        ("America/New_York", datetime(2024, 3, 10, 7, 0, 0, tzinfo=UTC), "2024-03-10 03:00:00"),
        # ... and falls back at 06:00 UTC on 2024-11-03: 01:00 to 02:00 happens twice.
        ("America/New_York", datetime(2024, 11, 3, 5, 30, tzinfo=UTC), "2024-11-03 01:30:00"),
        ("America/New_York", datetime(2024, 11, 3, 5, 59, 59, tzinfo=UTC), "2024-11-03 01:59:59"),
        ("America/New_York", datetime(2024, 11, 3, 6, 0, 0, tzinfo=UTC), "2024-11-03 01:00:00"),
        ("America/New_York", datetime(2024, 11, 3, 6, 30, tzinfo=UTC), "2024-11-03 01:30:00"),
        ("America/New_York", datetime(2024, 11, 3, 7, 0, tzinfo=UTC), "2024-11-03 02:00:00"),
        # Lord Howe moves by half an hour, at 15:30 UTC: in the middle of a UTC hour.
        (
            "Australia/Lord_Howe",
            datetime(2024, 10, 5, 15, 29, 59, tzinfo=UTC),
            "2024-10-06 01:59:59",
        ),
        ("Australia/Lord_Howe", datetime(2024, 10, 5, 15, 30, tzinfo=UTC), "2024-10-06 02:30:00"),
        ("Asia/Kathmandu", datetime(2024, 5, 1, 18, 14, 59, tzinfo=UTC), "2024-05-01 23:59:59"),
        ("Asia/Kathmandu", datetime(2024, 5, 1, 18, 15, tzinfo=UTC), "2024-05-02 00:00:00"),
        # Before 1908 Seoul kept local mean time, 8:27:52 ahead of UTC.
        ("Asia/Seoul", datetime(1900, 1, 1, 0, 0, tzinfo=UTC), "1900-01-01 08:27:52"),
        ("UTC", datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "1969-12-31 23:59:59"),
        ("Asia/Seoul", datetime(2024, 2, 28, 15, 0, tzinfo=UTC), "2024-02-29 00:00:00"),
    ],
)
def test_time_across_offset_changes(zone: str, submitted_at: datetime, expected: str) -> None:
    assert format_time(submitted_at, ZoneInfo(zone)) == expected
    settings = Settings.load(timezone=zone)
    assert build([], settings=settings, submitted_at=submitted_at)[2] == expected


def _offset_changes(zone: ZoneInfo, year: int) -> Iterator[datetime]:
    """The UTC hours of ``year`` in which ``zone``'s offset changes."""
    hour = datetime(year, 1, 1, tzinfo=UTC)
    offset = hour.astimezone(zone).utcoffset()
    while hour.year == year:
        following = hour + timedelta(hours=1)
        next_offset = following.astimezone(zone).utcoffset()
        if next_offset != offset:
            yield hour
        hour, offset = following, next_offset


@pytest.mark.parametrize(
    "zone_name",
    [
        "Asia/Seoul",
        "UTC",
        "America/New_York",
        "Europe/London",
        "Australia/Lord_Howe",
        "Asia/Kathmandu",
        "America/St_Johns",
        "Pacific/Chatham",
        "Africa/Casablanca",
    ],
)
def test_format_time_gives_the_local_wall_time_across_offset_changes(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    instants: list[datetime] = []
    for year in (1890, 1950, 2024, 2025, 2100):
        for change in _offset_changes(zone, year):
            # Every 37 s from an hour before the change to two hours after it.
            instants += [change + timedelta(seconds=s) for s in range(-3600, 7200, 37)]
    instants += [datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)]
    other_zones = [UTC, timezone(timedelta(hours=-3, minutes=-30)), ZoneInfo("Asia/Tokyo")]
    for index, instant in enumerate(instants):
        # The same instant as it may arrive: in UTC, in another zone, or naive (= UTC).
        variants = [instant, instant.replace(tzinfo=None)]
        if datetime(1, 1, 2, tzinfo=UTC) < instant < datetime(9999, 12, 30, tzinfo=UTC):
            variants.append(instant.astimezone(other_zones[index % len(other_zones)]))
        for value in variants:
            try:
                expected = wall_time(value, zone)
            except (OverflowError, ValueError) as exc:
                with pytest.raises(type(exc)):
                    format_time(value, zone)
                continue
            assert format_time(value, zone) == expected, value


def wall_time(value: datetime, zone: ZoneInfo) -> str:
    """What a clock in ``zone`` shows at ``value`` (naive: UTC), field by field."""
    local = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(zone)
    return (
        f"{local.year:04d}-{local.month:02d}-{local.day:02d} "
        f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    )


def test_format_time_every_seven_hours_for_eight_years() -> None:
    zone = ZoneInfo("America/New_York")
    hours = [datetime(2000, 1, 1, tzinfo=UTC) + timedelta(hours=7 * n) for n in range(10_000)]
    for value in hours + hours[::-1]:
        assert format_time(value, zone) == wall_time(value, zone)


def test_a_token_under_an_unknown_key_is_a_configuration_error_raised_unchanged() -> None:
    token = Keyring([os.urandom(32)]).encrypt(
        "010-9999-8888", answer_value_context("ans_42", "phone")
    )
    with pytest.raises(MissingKeyError) as caught:
        build([{"questionId": "phone", "value": token}], answer_id="ans_42")
    assert type(caught.value) is MissingKeyError
    assert "SHEETSYNC_PII_KEYS" in str(caught.value)
    assert "010-9999-8888" not in str(caught.value) and token not in str(caught.value)


def test_a_tampered_token_fails_the_answer_naming_answer_and_question_not_value() -> None:
    token = seal("010-9999-8888", "ans_42")
    tampered = token[:-6] + ("AAAAAA" if token[-6:] != "AAAAAA" else "BBBBBB")
    with pytest.raises(AnswerError) as caught:
        build([{"questionId": "phone", "value": tampered}], answer_id="ans_42")
    message = str(caught.value)
    assert message.startswith("answer ans_42, question phone: ")
    assert message.endswith("(CryptoError)")
    assert "010-9999-8888" not in message and tampered[:12] not in message
    assert caught.value.answer_id == "ans_42"  # type: ignore[attr-defined]
    assert caught.value.question_id == "phone"  # type: ignore[attr-defined]
    assert caught.value.error_class == "CryptoError"  # type: ignore[attr-defined]


def test_pii_that_was_never_encrypted_is_refused() -> None:
    with pytest.raises(AnswerError, match=r"^answer ans_1, question phone: .*\(CryptoError\)$"):
        build([{"questionId": "phone", "value": "010-1234-5678"}])


def test_unknown_question_names_answer_and_question_not_value() -> None:
    with pytest.raises(AnswerError) as caught:
        build([{"questionId": "deleted_q", "value": "secret value"}], answer_id="ans_7")
    message = str(caught.value)
    assert message == "answer ans_7, question deleted_q: the form has no such question (KeyError)"
    assert caught.value.question_id == "deleted_q"  # type: ignore[attr-defined]


def test_item_without_question_id_is_refused() -> None:
    with pytest.raises(AnswerError, match=r"^answer ans_1, question -: answer\[0\] has no "):
        build([{"value": "x"}])


def test_item_that_is_not_an_object_is_refused() -> None:
    for item in ["name", None, 5, ["questionId", "name"]]:
        with pytest.raises(AnswerError, match=r"^answer ans_1, question -: answer\[1\] is "):
            build([{"questionId": "name", "value": "x"}, item])  # type: ignore[list-item]


def test_question_id_that_is_not_a_string_is_refused() -> None:
    for question_id in [5, None, ["name"], {"id": "name"}]:
        with pytest.raises(AnswerError, match=r"^answer ans_1, question -: .*\(TypeError\)$"):
            build([{"questionId": question_id, "value": "x"}])


def test_item_without_a_value_is_an_empty_cell() -> None:
    row = build([{"questionId": "name", "value": "x"}, {"questionId": "name"}])
    assert row[3] == ""


def test_later_items_for_the_same_question_win() -> None:
    row = build(
        [
            {"questionId": "note", "value": "first"},
            {"questionId": "note", "value": "second"},
            {"questionId": "interests", "value": ["a"]},
            {"questionId": "interests", "value": None},
        ]
    )
    assert row[6] == "second"
    assert row[4] == ""


def test_items_may_come_from_any_iterable() -> None:
    items = [{"questionId": "name", "value": "개발팀"}, {"questionId": "intro", "value": "x"}]
    assert build(iter(items)) == build(items)  # type: ignore[arg-type]
    assert build(tuple(items)) == build(items)  # type: ignore[arg-type]
    assert build(item for item in items) == build(items)  # type: ignore[arg-type]


def test_rows_are_independent() -> None:
    builder = RowBuilder(LAYOUT, SETTINGS, keyring=KEYRING)
    first = builder.build("a1", "n", SUBMITTED, [{"questionId": "name", "value": "x"}])
    first[3] = "changed"
    second = builder.build("a2", None, SUBMITTED, [{"questionId": "intro", "value": "shown?"}])
    assert second == ["a2", "", "2024-05-01 12:04:05", "", "", "", ""]


def test_long_cells_are_truncated_with_a_marker() -> None:
    settings = Settings.load(cell_chars_max=50_000)
    long_text = "가" * 62_345
    row = build([{"questionId": "note", "value": long_text}], settings=settings)
    cell = row[6]
    assert len(cell) == 50_000
    assert cell.endswith(" chars]")
    assert "… [truncated " in cell
    kept = cell.index("… [truncated ")
    assert cell[:kept] == long_text[:kept]
    assert f"[truncated {62_345 - kept:,} chars]" in cell


def test_long_multi_choice_and_pii_are_truncated_too() -> None:
    settings = Settings.load(cell_chars_max=100)
    row = build(
        [
            {"questionId": "interests", "value": ["x" * 60, "y" * 60]},
            {"questionId": "phone", "value": seal("z" * 500)},
        ],
        settings=settings,
        user_name="n" * 101,
    )
    assert all(len(cell) <= 100 for cell in row)
    assert row[4].endswith("chars]") and row[5].endswith("chars]") and row[1].endswith("chars]")


@pytest.mark.parametrize("length", [99, 100, 101, 150, 1_000, 10_005, 123_456])
@pytest.mark.parametrize("limit", [100, 1_000, 50_000])
def test_fit_cell_never_exceeds_the_limit(length: int, limit: int) -> None:
    text = "x" * length
    fitted = fit_cell(text, limit)
    if length <= limit:
        assert fitted == text
    else:
        assert len(fitted) <= limit
        kept = fitted.index("…")
        assert fitted.endswith(f"[truncated {length - kept:,} chars]")


def test_a_layout_without_pii_needs_no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHEETSYNC_PII_KEYS", raising=False)
    layout = FormLayout.from_questions("f", [("q", "Q", QuestionType.SHORT_TEXT)])
    assert RowBuilder(layout, SETTINGS).build("a", "n", SUBMITTED, [])[3] == ""


def test_a_layout_with_pii_fails_early_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHEETSYNC_PII_KEYS", raising=False)
    with pytest.raises(CryptoError, match="SHEETSYNC_PII_KEYS is empty"):
        RowBuilder(LAYOUT, SETTINGS)


def test_header_row_uses_configured_labels() -> None:
    assert header_row(LAYOUT, SETTINGS) == [
        "Answer ID",
        "Submitter",
        "Submitted at",
        "이름",
        "관심 분야",
        "연락처",
        "하고 싶은 말",
    ]
    custom = Settings.load(
        header_answer_id="응답 ID", header_submitter="제출자", header_submitted_at="제출 시각"
    )
    assert header_row(LAYOUT, custom)[:3] == ["응답 ID", "제출자", "제출 시각"]


def test_load_layout_orders_steps_then_questions(
    session: Session, pii_keys: tuple[bytes, bytes]
) -> None:
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="f1", title="form", owner_id="u1"))
    # Inserted out of order on purpose.
    session.add_all(
        [
            Step(id="s_b", submission_id="f1", position=2, title="B"),
            Step(id="s_a", submission_id="f1", position=1, title="A"),
            Question(id="b2", step_id="s_b", position=2, title="B2", type=QuestionType.NUMBER),
            Question(id="b1", step_id="s_b", position=1, title="B1", type=QuestionType.JUMBOTRON),
            Question(id="a3", step_id="s_a", position=3, title="A3", type=QuestionType.DATE),
            Question(
                id="a1", step_id="s_a", position=1, title="A1", type=QuestionType.PERSONAL_INFO
            ),
        ]
    )
    session.commit()
    layout = load_layout(session, "f1")
    assert layout.question_ids == ("a1", "a3", "b2")
    assert [c.title for c in layout.questions] == ["A1", "A3", "B2"]
    assert layout.ignored_question_ids == frozenset({"b1"})


def test_load_layout_of_seeded_form(session: Session, pii_keys: tuple[bytes, bytes]) -> None:
    form = seed_form(session, steps=3, questions_per_step=4, pii=2, jumbotrons=1)
    layout = load_layout(session, form.submission_id)
    assert layout.question_ids == tuple(q.id for q in form.columns)
    assert len(layout.questions) == 12
    assert sum(c.type is QuestionType.PERSONAL_INFO for c in layout.questions) == 2
    assert layout.ignored_question_ids == frozenset(form.jumbotron_question_ids)


def test_load_layout_of_a_missing_form(session: Session) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        load_layout(session, "nope")


def test_load_layout_of_an_empty_form(session: Session) -> None:
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="empty", title="form", owner_id="u1"))
    session.commit()
    assert load_layout(session, "empty").questions == ()
