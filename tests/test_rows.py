"""Row format (SPEC 3.5): what a respondent typed is what the sheet shows."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from factories import seed_form
from sqlalchemy.orm import Session

from sheetsync.crypto import Keyring
from sheetsync.errors import CryptoError, NotFoundError, ValidationError
from sheetsync.models import Question, QuestionType, Step, Submission, User
from sheetsync.rows import FormLayout, RowBuilder, fit_cell, header_row, load_layout
from sheetsync.settings import Settings

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
            {"questionId": "phone", "value": KEYRING.encrypt("010-1234-5678")},
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
            {"questionId": "phone", "value": KEYRING.encrypt(typed)},
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
    assert len(row) == 3 + len(LAYOUT.columns)


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


def test_pii_decrypt_failure_names_answer_and_question_not_value() -> None:
    token = Keyring([os.urandom(32)]).encrypt("010-9999-8888")
    with pytest.raises(CryptoError) as caught:
        build([{"questionId": "phone", "value": token}], answer_id="ans_42")
    message = str(caught.value)
    assert "ans_42" in message and "phone" in message
    assert "010-9999-8888" not in message and token not in message
    assert caught.value.answer_id == "ans_42"  # type: ignore[attr-defined]
    assert caught.value.question_id == "phone"  # type: ignore[attr-defined]


def test_pii_that_was_never_encrypted_is_refused() -> None:
    with pytest.raises(CryptoError, match=r"ans_1.*phone"):
        build([{"questionId": "phone", "value": "010-1234-5678"}])


def test_unknown_question_names_answer_and_question_not_value() -> None:
    with pytest.raises(ValidationError) as caught:
        build([{"questionId": "deleted_q", "value": "secret value"}], answer_id="ans_7")
    message = str(caught.value)
    assert "ans_7" in message and "deleted_q" in message
    assert "secret value" not in message
    assert caught.value.question_id == "deleted_q"  # type: ignore[attr-defined]


def test_item_without_question_id_is_refused() -> None:
    with pytest.raises(ValidationError, match="ans_1 has an item without a questionId"):
        build([{"value": "x"}])


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
            {"questionId": "phone", "value": KEYRING.encrypt("z" * 500)},
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
    assert [c.title for c in layout.columns] == ["A1", "A3", "B2"]
    assert layout.ignored_question_ids == frozenset({"b1"})


def test_load_layout_of_seeded_form(session: Session, pii_keys: tuple[bytes, bytes]) -> None:
    form = seed_form(session, steps=3, questions_per_step=4, pii=2, jumbotrons=1)
    layout = load_layout(session, form.submission_id)
    assert layout.question_ids == tuple(q.id for q in form.columns)
    assert len(layout.columns) == 12
    assert sum(c.type is QuestionType.PERSONAL_INFO for c in layout.columns) == 2
    assert layout.ignored_question_ids == frozenset(form.jumbotron_question_ids)


def test_load_layout_of_a_missing_form(session: Session) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        load_layout(session, "nope")


def test_load_layout_of_an_empty_form(session: Session) -> None:
    session.add(User(id="u1", email="u1@example.com"))
    session.add(Submission(id="empty", title="form", owner_id="u1"))
    session.commit()
    assert load_layout(session, "empty").columns == ()
