"""Live workers in `sheetsync status`, and `sheetsync health`, from real heartbeats in Redis."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import Cli

from sheetsync.cli import health
from sheetsync.ops import heartbeats
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.settings import Settings

PRIORITY = "sheetsync_priority"
DEFAULT = "sheetsync_default"


def _overdue_pro_buffer() -> BufferKey:
    """A PRO owner's buffer on the priority queue, due the moment it is pushed."""
    key = BufferKey("pro_owner", "form_1", "sheet_abc", 0)
    pipeline = Services.build(Settings.load(flush_delay_s=0))
    try:
        pipeline.store.push([(key, PRIORITY)], ["a_1", "a_2"])
    finally:
        pipeline.close()
    return key


def _worker(cli: Cli, name: str, *queues: str) -> None:
    heartbeats.record(cli.redis, name, role="worker", queues=queues, pid=4242)


def test_status_names_an_overdue_queue_that_no_live_worker_consumes(cli: Cli) -> None:
    _worker(cli, "default@test", DEFAULT)
    _overdue_pro_buffer()

    text = cli.ok("status").stdout
    assert "default@test" in text
    assert f"1 overdue buffer waits on queue {PRIORITY}, which no live worker consumes" in text
    assert f"celery -A sheetsync.celery worker -Q {PRIORITY}" in text
    assert "(no worker)" in text

    report = json.loads(cli.ok("status", "--json").stdout)
    assert report["stalled_queues"] == [{"queue": PRIORITY, "overdue_buffers": 1}]
    (item,) = report["buffers"]["items"]
    assert item["job"]["overdue"] is True
    assert item["job"]["queue_consumed"] is False
    (worker,) = report["workers"]["live"]
    assert worker["name"] == "default@test"
    assert worker["role"] == "worker"
    assert worker["queues"] == [DEFAULT]
    assert 0 <= worker["heartbeat_age_s"] < heartbeats.DEFAULT_HEARTBEAT_TTL_S
    assert report["workers"]["consumed_queues"] == [DEFAULT]


def test_a_worker_on_the_queue_clears_the_flag_and_leaves_plain_overdue(cli: Cli) -> None:
    _worker(cli, "default@test", DEFAULT)
    _worker(cli, "priority@test", PRIORITY)
    _overdue_pro_buffer()

    text = cli.ok("status").stdout
    assert "priority@test" in text
    assert "no live worker consumes" not in text
    assert "(no worker)" not in text
    assert "overdue" in text

    report = json.loads(cli.ok("status", "--json").stdout)
    assert report["stalled_queues"] == []
    (item,) = report["buffers"]["items"]
    assert item["job"]["overdue"] is True
    assert item["job"]["queue_consumed"] is True


def test_status_says_plainly_when_no_worker_is_alive(cli: Cli) -> None:
    _overdue_pro_buffer()
    heartbeats.record(cli.redis, "beat@test", role="beat", pid=4243)

    text = cli.ok("status").stdout
    assert "workers: 1 alive" in text
    assert (
        "no worker is alive, so no buffer is flushed: "
        "start one with `celery -A sheetsync.celery worker`"
    ) in text
    assert "no beat is alive" not in text

    report = json.loads(cli.ok("status", "--json").stdout)
    assert [beat["role"] for beat in report["workers"]["live"]] == ["beat"]
    assert report["stalled_queues"] == [{"queue": PRIORITY, "overdue_buffers": 1}]


def test_health_is_0_when_every_named_process_beats(cli: Cli) -> None:
    _worker(cli, "priority@test", PRIORITY)
    heartbeats.record(cli.redis, "beat@test", role="beat", pid=4243)

    result = cli.ok("health", "priority@test", "beat@test")

    assert result.stdout.startswith("ok: priority@test (")
    assert "beat@test (" in result.stdout
    assert len(result.stdout.strip().splitlines()) == 1
    assert result.stderr == ""


def test_health_is_1_naming_the_missing_and_the_stale(cli: Cli) -> None:
    _worker(cli, "priority@test", PRIORITY)

    missing = cli("health", "priority@test", "priority@tset", "beat@test")
    assert missing.code == 1
    assert missing.error_lines == [
        "error: no heartbeat within 30s from priority@tset (none recorded; "
        "did you mean priority@test?), beat@test (none recorded)"
    ]
    assert missing.stdout == ""

    # Any heartbeat is older than a millisecond by the time the command reads it.
    stale = cli("health", "priority@test", "--max-age", "0.001")
    assert stale.code == 1
    assert len(stale.error_lines) == 1, stale.stderr
    assert stale.stderr.startswith("error: no heartbeat within 0.001s from priority@test (last ")


def test_health_reads_redis_only(cli: Cli, tmp_path: Path) -> None:
    _worker(cli, "priority@test", PRIORITY)
    nowhere = tmp_path / "absent.db"
    cli.ok("health", "priority@test", env={"SHEETSYNC_DATABASE_URL": f"sqlite:///{nowhere}"})
    assert not nowhere.exists()

    unreachable = cli(
        "health", "priority@test", env={"SHEETSYNC_REDIS_URL": "redis://127.0.0.1:1/0"}
    )
    assert unreachable.code == 1
    assert len(unreachable.error_lines) == 1, unreachable.stderr
    assert unreachable.stderr.startswith("error: cannot reach Redis at redis://127.0.0.1:1/0")


def test_health_usage_errors_exit_2(cli: Cli) -> None:
    for args in (("health",), ("health", "x@y", "--max-age", "0")):
        result = cli(*args)
        assert result.code == 2, args
        assert len(result.error_lines) == 1, result.stderr


def test_health_default_max_age_is_the_heartbeat_ttl() -> None:
    assert health.DEFAULT_MAX_AGE_S == heartbeats.DEFAULT_HEARTBEAT_TTL_S
