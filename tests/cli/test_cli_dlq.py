"""`sheetsync dlq ...` through the real console script."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select
from support.cli import Cli

from sheetsync.models import (
    DeadLetterReason,
    DeadLetterStatus,
    SheetTransaction,
    TransactionType,
    utcnow,
)


def seed_three(cli: Cli) -> tuple[int, int, int]:
    alice = cli.add_dead_letter(user_id="alice", answer_ids=["a_1", "a_2", "a_3"])
    failed = cli.add_dead_letter(
        user_id="alice",
        submission_id="form_2",
        reason=DeadLetterReason.PERMANENT,
        status=DeadLetterStatus.FAILED,
        error_message="Requested entity was not found.",
        attempts=1,
    )
    bob = cli.add_dead_letter(
        user_id="bob", reason=DeadLetterReason.TRANSIENT_EXHAUSTED, answer_ids=["b_1"]
    )
    return alice, failed, bob


def test_list_json_parses_and_filters(cli: Cli) -> None:
    alice, failed, bob = seed_three(cli)

    everything = json.loads(cli.ok("dlq", "list", "--json").stdout)
    assert everything["total"] == 3
    assert [e["id"] for e in everything["entries"]] == [alice, failed, bob]
    first = everything["entries"][0]
    assert first["user_id"] == "alice"
    assert first["answer_count"] == 3
    assert first["reason"] == "CREDENTIAL"
    assert first["status"] == "PENDING"
    assert first["next_attempt_at"].endswith("Z")
    assert "answer_ids" not in first

    mine = json.loads(cli.ok("dlq", "list", "--user", "alice", "--json").stdout)
    assert [e["id"] for e in mine["entries"]] == [alice, failed]

    # Status filters take any letter case.
    failing = json.loads(cli.ok("dlq", "list", "--status", "failed", "--json").stdout)
    assert [e["id"] for e in failing["entries"]] == [failed]
    both = json.loads(
        cli.ok("dlq", "list", "--user", "alice", "--status", "PENDING", "--json").stdout
    )
    assert [e["id"] for e in both["entries"]] == [alice]
    assert json.loads(cli.ok("dlq", "list", "--user", "nobody", "--json").stdout) == {
        "total": 0,
        "entries": [],
    }
    limited = json.loads(cli.ok("dlq", "list", "--limit", "1", "--json").stdout)
    assert limited["total"] == 3
    assert len(limited["entries"]) == 1


def test_list_table_shows_entries_but_never_ids(cli: Cli) -> None:
    seed_three(cli)
    table = cli.ok("dlq", "list").stdout
    assert "alice" in table and "bob" in table
    assert "sheet_abc / 0" in table
    assert "TRANSIENT_EXHAUSTED" in table
    assert "a_1" not in table  # the list counts ids; `dlq show` lists them


def test_list_rejects_an_unknown_status_as_usage(cli: Cli) -> None:
    result = cli("dlq", "list", "--status", "LOST")
    assert result.code == 2
    assert len(result.error_lines) == 1
    assert "--status must be one of PENDING" in result.stderr


def test_show_gives_the_full_entry(cli: Cli) -> None:
    alice, _, _ = seed_three(cli)
    shown = json.loads(cli.ok("dlq", "show", str(alice), "--json").stdout)
    assert shown["id"] == alice
    assert shown["answer_ids"] == ["a_1", "a_2", "a_3"]
    assert shown["error_message"].startswith("invalid_grant")

    table = cli.ok("dlq", "show", str(alice)).stdout
    assert f"dead letter {alice}" in table
    assert "a_1\na_2\na_3" in table


def test_an_unknown_id_is_one_line_and_exit_1(cli: Cli) -> None:
    for args in (
        ("dlq", "show", "999"),
        ("dlq", "replay", "999"),
        ("dlq", "purge", "999", "--yes"),
    ):
        result = cli(*args)
        assert result.code == 1, args
        assert result.error_lines == ["error: dead letter 999 does not exist"], args
        assert "Traceback" not in result.stderr


def test_purge_needs_yes_and_then_purges(cli: Cli) -> None:
    alice, failed, _ = seed_three(cli)
    with cli.sessions.begin() as session:
        # One id already made it to the sheet: purging must not un-complete it.
        session.add(
            SheetTransaction(
                submission_answer_id="a_1",
                spread_sheet_id="sheet_abc",
                sheet_id=0,
                type=TransactionType.COMPLETED,
            )
        )

    refused = cli("dlq", "purge", str(alice))
    assert refused.code == 1
    assert len(refused.error_lines) == 1
    assert "--yes" in refused.stderr
    assert cli.entry(alice).status is DeadLetterStatus.PENDING

    done = cli.ok("dlq", "purge", str(alice), str(failed), "--yes")
    assert f"purged 2 dead letters (ids {alice}, {failed})" in done.stdout
    assert cli.entry(alice).status is DeadLetterStatus.PURGED
    assert cli.entry(failed).status is DeadLetterStatus.PURGED
    with cli.sessions() as session:
        ledger = {
            row.submission_answer_id: row.type for row in session.scalars(select(SheetTransaction))
        }
    assert ledger == {
        "a_1": TransactionType.COMPLETED,
        "a_2": TransactionType.FAILED,
        "a_3": TransactionType.FAILED,
        "ans_1": TransactionType.FAILED,
        "ans_2": TransactionType.FAILED,
    }
    # Purging again is harmless.
    assert (
        f"purged 1 dead letter (id {alice})" in cli.ok("dlq", "purge", str(alice), "--yes").stdout
    )


def test_purge_leaves_a_running_replay_alone(cli: Cli) -> None:
    busy = cli.add_dead_letter(status=DeadLetterStatus.REPLAYING)
    result = cli("dlq", "purge", str(busy), "--yes")
    assert result.code == 1
    assert len(result.error_lines) == 1
    assert f"not purged: {busy} (REPLAYING)" in result.stderr
    assert cli.entry(busy).status is DeadLetterStatus.REPLAYING


def test_replay_without_a_target_is_a_usage_error(cli: Cli) -> None:
    result = cli("dlq", "replay")
    assert result.code == 2
    assert len(result.error_lines) == 1
    assert result.stderr.startswith("error: say what to replay")

    both = cli("dlq", "replay", "1", "--all")
    assert both.code == 2
    assert len(both.error_lines) == 1


def test_replay_sends_claimed_entries_to_the_workers(cli: Cli) -> None:
    pending = cli.add_dead_letter()
    failed = cli.add_dead_letter(status=DeadLetterStatus.FAILED, reason=DeadLetterReason.PERMANENT)
    done = cli.add_dead_letter(status=DeadLetterStatus.DONE)

    result = cli.ok("dlq", "replay", str(pending), str(failed), str(done))
    assert f"sent 2 dead letters to the workers (ids {pending}, {failed})" in result.stdout
    assert f"dead letter {done} is DONE: skipped" in result.stderr
    for entry_id in (pending, failed):
        entry = cli.entry(entry_id)
        assert entry.status is DeadLetterStatus.REPLAYING
        assert entry.next_attempt_at <= utcnow()
    assert cli.entry(done).status is DeadLetterStatus.DONE
    # The tasks wait on the broker (the same Redis here) in the scheduled queue.
    messages = [json.loads(raw) for raw in cli.redis.lrange("sheetsync_scheduled", 0, -1)]
    assert sorted(m["headers"]["task"] for m in messages) == ["sheetsync.replay_dead_letter"] * 2
    assert sorted(m["headers"]["argsrepr"] for m in messages) == sorted(
        [f"[{pending}]", f"[{failed}]"]
    )


def test_replay_by_user_takes_only_their_pending_entries(cli: Cli) -> None:
    mine = cli.add_dead_letter(user_id="alice")
    cli.add_dead_letter(user_id="alice", status=DeadLetterStatus.FAILED)
    theirs = cli.add_dead_letter(user_id="bob")

    result = cli.ok("dlq", "replay", "--user", "alice")
    assert f"sent 1 dead letter to the workers (id {mine})" in result.stdout
    assert cli.entry(mine).status is DeadLetterStatus.REPLAYING
    assert cli.entry(theirs).status is DeadLetterStatus.PENDING

    nothing = cli.ok("dlq", "replay", "--user", "carol")
    assert "no PENDING dead letters of user carol: nothing to replay" in nothing.stdout


def test_replay_all(cli: Cli) -> None:
    first = cli.add_dead_letter(user_id="alice")
    second = cli.add_dead_letter(user_id="bob", next_attempt_at=utcnow() - timedelta(hours=1))
    result = cli.ok("dlq", "replay", "--all")
    assert (
        f"sent 2 dead letters to the workers (ids {first}, {second})" in result.stdout
        or f"sent 2 dead letters to the workers (ids {second}, {first})" in result.stdout
    )
    assert cli.redis.llen("sheetsync_scheduled") == 2


def test_replay_with_the_broker_down_gives_the_entries_back(cli: Cli) -> None:
    entry_id = cli.add_dead_letter()
    broker = {"SHEETSYNC_BROKER_URL": "redis://:hunter2@127.0.0.1:1/0"}

    result = cli("dlq", "replay", str(entry_id), env=broker)

    assert result.code == 1
    assert len(result.error_lines) == 1, result.stderr
    assert result.stderr.startswith(
        "error: cannot reach the Celery broker at redis://:***@127.0.0.1:1/0"
    ), result.stderr
    assert "hunter2" not in result.stderr
    # Claimed but never sent: PENDING again and due now, for the next try or the beat.
    entry = cli.entry(entry_id)
    assert entry.status is DeadLetterStatus.PENDING
    assert entry.next_attempt_at <= utcnow()


def test_replay_leaves_an_entry_a_live_replay_owns(cli: Cli) -> None:
    busy = cli.add_dead_letter(status=DeadLetterStatus.REPLAYING, updated_at=utcnow())

    for args in (("dlq", "replay", str(busy)), ("dlq", "replay", str(busy), "--now")):
        result = cli.ok(*args)
        assert (
            f"1 dead letter (id {busy}) is being replayed elsewhere already: skipped"
            in result.stderr
        )
        assert cli.entry(busy).status is DeadLetterStatus.REPLAYING
    assert cli.redis.llen("sheetsync_scheduled") == 0


def test_replay_takes_over_an_entry_whose_worker_died(cli: Cli) -> None:
    stale = cli.add_dead_letter(
        status=DeadLetterStatus.REPLAYING, updated_at=utcnow() - timedelta(hours=1)
    )
    result = cli.ok("dlq", "replay", str(stale))
    assert f"sent 1 dead letter to the workers (id {stale})" in result.stdout
    assert cli.redis.llen("sheetsync_scheduled") == 1
