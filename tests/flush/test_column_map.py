"""Matching row 1 with a link's column map (pure), and typed cells' parsing."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select
from support.databases import BOTH_DATABASES

from sheetsync.flush import columns
from sheetsync.flush.columns import column_letters, plan_header
from sheetsync.flush.layout import load_layout
from sheetsync.flush.typed import link_zone, parse_date, parse_number, serial_date_time
from sheetsync.models import SheetColumn, SpreadSheet
from sheetsync.settings import Settings

FIXED = ["Answer ID", "Submitter", "Submitted at"]


def _column(
    question_id: str,
    kind: str,
    title: str,
    position: int | None,
    written: str | None,
    formatted: bool,
) -> SheetColumn:
    """A column of a link's map, as the header check reads it (no database needed)."""
    return SheetColumn(
        question_id=question_id,
        type=kind,
        title=title,
        position=position,
        written_title=written,
        formatted=formatted,
    )


def _map(*questions: tuple[str, str, int | None, str | None]) -> list[SheetColumn]:
    columns = [_column(f"#{i}", "FIXED", title, i, title, True) for i, title in enumerate(FIXED)]
    columns += [
        _column(question_id, "SHORT_TEXT", title, position, written, True)
        for question_id, title, position, written in questions
    ]
    return columns


WRITTEN = _map(("q1", "Team", 3, "Team"), ("q2", "Count", 4, "Count"))


def test_a_matching_row_needs_nothing() -> None:
    plan = plan_header([*FIXED, "Team", "Count"], WRITTEN)
    assert plan.problem is None and plan.writes == {}
    assert plan.positions == {"#0": 0, "#1": 1, "#2": 2, "q1": 3, "q2": 4}


def test_a_moved_column_is_followed_and_nothing_is_rewritten() -> None:
    plan = plan_header([*FIXED, "Count", "mine", "Team"], WRITTEN)
    assert plan.problem is None and plan.writes == {}
    assert (plan.positions["q1"], plan.positions["q2"]) == (5, 3)


def test_an_empty_row_gets_every_title_back() -> None:
    plan = plan_header([], WRITTEN)
    assert plan.writes == {0: "Answer ID", 1: "Submitter", 2: "Submitted at", 3: "Team", 4: "Count"}


def test_a_new_column_takes_the_next_free_one_after_a_persons_heading() -> None:
    columns = [*WRITTEN, _column("q3", "NUMBER", "Age", None, None, False)]
    plan = plan_header([*FIXED, "Team", "Count", "", "notes"], columns)
    assert plan.positions["q3"] == 7 and plan.writes == {7: "Age"}


def test_a_title_written_before_a_crash_is_adopted() -> None:
    columns = [*WRITTEN, _column("q3", "NUMBER", "Age", None, None, False)]
    plan = plan_header([*FIXED, "Team", "Count", "Age"], columns)
    assert plan.positions["q3"] == 5 and plan.writes == {}


def test_a_rename_rewrites_the_cell_and_survives_a_crash_after_it() -> None:
    renamed = _map(("q1", "Department", 3, "Team"), ("q2", "Count", 4, "Count"))
    assert plan_header([*FIXED, "Team", "Count"], renamed).writes == {3: "Department"}
    assert plan_header([*FIXED, "Department", "Count"], renamed).writes == {}


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (["Answer ID", "Submitter", "When", "Team", "Count"], "column C of row 1"),
        ([*FIXED, "Team", "How many"], "'Count' (question q2, was E) is no longer in row 1"),
        ([*FIXED, "Team", "x", "Count", "Count"], "'Count' (question q2, was E) is in row 1 2"),
        (["x", "", "y"], "column A of row 1"),
    ],
)
def test_a_row_that_cannot_be_matched_is_a_problem(row: list[str], problem: str) -> None:
    plan = plan_header(row, WRITTEN)
    assert plan.problem is not None and problem in plan.problem


def test_column_letters() -> None:
    assert [column_letters(i) for i in (0, 25, 26, 701, 702)] == ["A", "Z", "AA", "ZZ", "AAA"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10", 10),
        ("-3", -3),
        ("2.50", 2.5),
        ("1e3", 1000.0),
        ("0", 0),
        ("0.5", 0.5),
        ("0012", "0012"),
        ("+1 555", "+1 555"),
        ("=1+1", "=1+1"),
        ("@x", "@x"),
        ("1,000", "1,000"),
        (" 7", " 7"),
        ("NaN", "NaN"),
        ("1e999", "1e999"),
        (str(2**53), str(2**53)),
    ],
)
def test_numbers_parse_only_when_plain(text: str, value: object) -> None:
    assert parse_number(text) == value
    assert type(parse_number(text)) is type(value)


def test_dates_are_serials_in_the_zone() -> None:
    seoul = ZoneInfo("Asia/Seoul")
    assert parse_date("1899-12-31", seoul) == 1
    assert parse_date("2024-05-01", seoul) == 45413
    assert parse_date("2024-05-01T12:00:00", seoul) == 45413.5  # naive: as typed
    assert parse_date("2024-05-01T03:00:00+00:00", seoul) == 45413.5  # moved to Seoul
    assert parse_date("2024-02-30", seoul) == "2024-02-30"
    assert parse_date("tomorrow", seoul) == "tomorrow"
    moment = datetime(2024, 5, 1, 3, 0, 0, 400_000, tzinfo=UTC)
    assert serial_date_time(moment, seoul) == 45413.5
    assert serial_date_time(moment.replace(tzinfo=None), ZoneInfo("UTC")) == 45413.125


def test_the_spreadsheets_zone_wins_unless_forced() -> None:
    fallback = Settings.load(timezone="Asia/Seoul")
    forced = Settings.load(timezone="Asia/Seoul", force_timezone=True)
    assert link_zone(fallback, "Europe/Paris") == ZoneInfo("Europe/Paris")
    assert link_zone(fallback, None) == ZoneInfo("Asia/Seoul")
    assert link_zone(fallback, "Mars/Olympus") == ZoneInfo("Asia/Seoul")
    assert link_zone(forced, "Europe/Paris") == ZoneInfo("Asia/Seoul")


@BOTH_DATABASES
def test_concurrent_runs_of_one_link_add_each_column_once(world) -> None:
    """Two runs of one link (a hand-off to a new owner, say) seeing a new question at
    the same moment: the link's lock makes the second see the first's columns."""
    form = world.form()
    world.sheet(form)
    with world.pipeline.sessions() as session:
        link = session.scalars(select(SpreadSheet)).one()
        layout = load_layout(session, form.submission_id)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            start.wait()
            with world.pipeline.sessions.begin() as session:
                columns.sync_with_form(session, link.id, layout, world.pipeline.settings)
                time.sleep(0.2)  # hold the lock while the other run waits for it
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    with world.pipeline.sessions() as session:
        mapped = list(session.scalars(select(SheetColumn.question_id)))
    assert sorted(mapped) == sorted([*columns.FIXED_IDS, *(q.id for q in form.columns)])
