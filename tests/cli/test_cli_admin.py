"""Credentials, keys, the schema, the demo and the emulator, through the console script."""

from __future__ import annotations

import base64
import json
import os
import pty
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from support.cli import SCRIPT, Cli

from sheetsync.crypto import Keyring, answer_value_context, generate_key, refresh_token_context
from sheetsync.db import alembic_config, upgrade
from sheetsync.dev.seed import seed_answers, seed_form, seed_user
from sheetsync.models import (
    CredentialStatus,
    DeadLetterStatus,
    GoogleCredential,
    SubmissionAnswer,
    utcnow,
)


def test_reconnect_makes_the_owners_entries_due(cli: Cli) -> None:
    with cli.sessions.begin() as session:
        seed_user(session, "owner_1", credential_status=CredentialStatus.INVALID)
    later = utcnow() + timedelta(days=7)
    mine = cli.add_dead_letter(user_id="owner_1", next_attempt_at=later)
    done = cli.add_dead_letter(
        user_id="owner_1", status=DeadLetterStatus.DONE, next_attempt_at=later
    )
    theirs = cli.add_dead_letter(user_id="owner_2", next_attempt_at=later)

    result = cli.ok("credentials", "reconnect", "owner_1")

    assert "credential of owner_1 is VALID; 1 dead letter is due now" in result.stdout
    assert "sheetsync dlq replay --user owner_1" in result.stderr
    with cli.sessions() as session:
        credential = session.get(GoogleCredential, "owner_1")
        assert credential is not None
        assert credential.status is CredentialStatus.VALID
    entry = cli.entry(mine)
    assert entry.status is DeadLetterStatus.PENDING
    assert entry.next_attempt_at <= utcnow()
    assert cli.entry(done).next_attempt_at == later
    assert cli.entry(theirs).next_attempt_at == later


def test_reconnect_of_a_user_without_credential_is_one_line(cli: Cli) -> None:
    result = cli("credentials", "reconnect", "ghost")
    assert result.code == 1
    assert result.error_lines == ["error: user ghost has no Google credential"]


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def test_db_upgrade_is_idempotent(cli: Cli) -> None:
    result = cli.ok("db", "upgrade")
    assert result.stdout.strip() == (
        f"{cli.database_url}: schema up to date at revision {head_revision()}; nothing to do"
    )


def test_db_upgrade_of_a_new_sqlite_file_says_it_created_it(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    url = f"sqlite:///{path}"
    result = cli.ok("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.stdout.strip() == (
        f"{url}: created the schema at revision {head_revision()} in a new SQLite file "
        "(schema up to date)"
    )
    assert path.is_file()
    # A relative URL: the line names the file in full.
    result = cli.ok(
        "db", "upgrade", env={"SHEETSYNC_DATABASE_URL": "sqlite:///rel.db"}, cwd=tmp_path
    )
    assert result.stdout.strip() == (
        f"sqlite:///rel.db: created the schema at revision {head_revision()} in a new SQLite "
        f"file, {tmp_path / 'rel.db'} (schema up to date)"
    )


def test_db_upgrade_of_an_empty_database_says_it_created_the_schema(
    cli: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "empty.db"
    path.touch()  # as a DBA hands over an empty database
    url = f"sqlite:///{path}"
    result = cli.ok("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.stdout.strip() == (
        f"{url}: created the schema at revision {head_revision()} (schema up to date)"
    )


def test_db_upgrade_of_an_older_schema_says_from_which_revision(cli: Cli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'older.db'}"
    upgrade(url, "0004_column_maps")
    result = cli.ok("db", "upgrade", env={"SHEETSYNC_DATABASE_URL": url})
    assert result.stdout.strip() == (
        f"{url}: upgraded the schema from revision 0004_column_maps to {head_revision()} "
        "(schema up to date)"
    )


def test_db_upgrade_without_the_setting_refuses_and_creates_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    """Without SHEETSYNC_DATABASE_URL it would migrate sqlite:///sheetsync.db, a new file
    in whatever directory it runs in, and say the schema is up to date: a deploy step
    with a lost variable would leave the real database unmigrated."""
    empty = tmp_path / "fresh"
    empty.mkdir()
    result = cli("db", "upgrade", unset=["SHEETSYNC_DATABASE_URL"], cwd=empty)
    assert result.code == 1
    assert result.error_lines == [
        "error: SHEETSYNC_DATABASE_URL is not set: set it to the database to create or "
        "migrate (sqlite:///path or postgresql://user@host/db); db upgrade does not fall "
        "back to sqlite:///sheetsync.db in the current directory"
    ]
    assert result.stdout == ""
    assert list(empty.iterdir()) == []


def test_keys_generate_prints_a_usable_key(cli: Cli) -> None:
    result = cli.ok("keys", "generate", unset=["SHEETSYNC_PII_KEYS"])
    key = result.stdout.strip()
    assert len(base64.urlsafe_b64decode(key)) == 32
    # Captured, as in export SHEETSYNC_PII_KEYS=$(sheetsync keys generate): no advice.
    assert result.stderr == ""


def _keys_generate_at_a_terminal(cli: Cli, env: dict[str, str]) -> str:
    """What a person sees running ``sheetsync keys generate`` at a terminal."""
    leader, follower = pty.openpty()
    try:
        completed = subprocess.run(
            [str(SCRIPT), "keys", "generate"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=follower,
            timeout=60,
            check=False,
        )
        assert completed.returncode == 0
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_keys_generate_at_a_terminal_says_what_to_do_with_it(cli: Cli) -> None:
    first_setup = {k: v for k, v in cli.env.items() if k != "SHEETSYNC_PII_KEYS"}
    shown = _keys_generate_at_a_terminal(cli, first_setup)
    assert "set it as SHEETSYNC_PII_KEYS in every process" in shown
    assert "rotate" not in shown
    shown = _keys_generate_at_a_terminal(cli, cli.env)  # keys set already: a rotation
    assert "to rotate: put it first in SHEETSYNC_PII_KEYS" in shown


def test_pii_rotate_moves_everything_to_the_newest_key(cli: Cli) -> None:
    old_key = cli.env["SHEETSYNC_PII_KEYS"]
    old = Keyring([base64.urlsafe_b64decode(old_key)])
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id="owner_1", pii=2, keyring=old)
        seed_answers(session, form, 5, keyring=old, seed=1)
    new_key = generate_key()

    both = {"SHEETSYNC_PII_KEYS": f"{new_key},{old_key}"}
    before = cli("pii", "rotate", "--check", "--json", env=both)
    result = cli.ok("pii", "rotate", env=both)

    assert before.code == 1
    assert json.loads(before.stdout)["tables"]["google_credential"]["old_key"] == 1
    assert "5 answers scanned, 5 updated" in result.stdout
    assert "and 1 refresh token re-encrypted" in result.stdout
    new_only = Keyring([base64.urlsafe_b64decode(new_key)])
    with cli.sessions() as session:
        credential = session.get(GoogleCredential, "owner_1")
        assert credential is not None
        context = refresh_token_context("owner_1")
        assert new_only.decrypt(credential.refresh_token, context) == "refresh-owner_1"
        pii_ids = set(form.pii_question_ids)
        values = [
            (item["value"], answer_value_context(answer.id, item["questionId"]))
            for answer in session.query(SubmissionAnswer)
            for item in answer.answer
            if item["questionId"] in pii_ids
        ]
    assert values
    for value, context in values:
        new_only.decrypt(value, context)  # raises if any value stayed under the old key
    after = cli.ok("pii", "rotate", "--check", env=both)
    assert "submission_answer: 0 tokens left" in after.stdout
    assert "google_credential: 0 tokens left" in after.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_emulator_serves_until_stopped(cli: Cli) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [str(SCRIPT), "emulator", "--port", str(port), "--write-per-account", "7"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stats = None
        deadline = time.monotonic() + 30
        while stats is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/_emulator/stats", timeout=2
                ) as response:
                    stats = json.loads(response.read())
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.2)
        assert stats is not None, "the emulator never answered"
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/_emulator/quotas", timeout=2
        ) as response:
            assert json.loads(response.read())["write_per_account"] == 7
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert f"SHEETSYNC_GOOGLE_API_ENDPOINT=http://127.0.0.1:{port}" in stderr


def test_emulator_on_a_taken_port_says_so_in_one_line(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("emulator", "--port", str(port))
    assert result.code == 1
    [line] = result.error_lines
    assert f"cannot serve on 127.0.0.1:{port}" in line


@pytest.mark.parametrize("command", ["emulator", "demo"])
def test_without_the_emulator_package_one_line_names_the_install(cli: Cli, command: str) -> None:
    # None in sys.modules is how Python blocks an import: as if it were not installed.
    code = (
        "import sys; sys.modules['sheets_emulator'] = None; "
        f"from sheetsync.cli import main; sys.exit(main([{command!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.endswith(
        "the Sheets API emulator is not installed: "
        "pip install sheetsync-emulator (from a checkout: pip install ./emulator)"
    )
