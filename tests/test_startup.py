"""Start-up checks: a worker, beat, the console and the exporter that lack what they need
stop at once with one line naming the setting (exit 1), and create nothing: real
``celery -A sheetsync.celery worker`` / ``beat`` and ``sheetsync web`` / ``metrics``
processes, each started in an empty directory."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import create_engine, update
from support.redis_dbs import pipeline_redis_url

from sheetsync.crypto import (
    LEGACY_TOKEN_VERSION,
    Keyring,
    answer_value_context,
    generate_key,
    key_id,
)
from sheetsync.db import session_factory, upgrade
from sheetsync.dev.seed import seed_form, seed_user
from sheetsync.models import GoogleCredential, SubmissionAnswer
from sheetsync.settings import NON_SETTING_VARIABLES
from sheetsync.startup import check_database, known_revisions, version_1_answer_tokens

SCRIPT = Path(sys.executable).with_name("sheetsync")
CELERY = [sys.executable, "-m", "celery", "-A", "sheetsync.celery"]
COMMANDS = {
    "worker": [*CELERY, "worker", "--pool", "solo", "--without-mingle", "--without-gossip"],
    "beat": [*CELERY, "beat", "--schedule", "{tmp}/beat-schedule"],
    "web": [str(SCRIPT), "web", "--port", "0"],
    "metrics": [str(SCRIPT), "metrics", "--port", "0"],
}
#: Every one of them is a failure long before this.
START_TIMEOUT_S = 60
#: Nothing listens here.
CLOSED = "127.0.0.1:1"
UPGRADE = "run `sheetsync db upgrade`"


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database at the newest revision, which each test copies."""
    path = tmp_path_factory.mktemp("startup") / "head.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def good_env(migrated: Path, tmp_path: Path) -> dict[str, str]:
    """Everything a worker needs; each test breaks one thing."""
    database = tmp_path / "db" / "sheetsync.db"
    database.parent.mkdir()
    database.write_bytes(migrated.read_bytes())
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SHEETSYNC_") or name.startswith(NON_SETTING_VARIABLES)
    }
    return {
        **env,
        # This machine may run the tests as root: Celery's warning about it is not ours.
        "PYTHONWARNINGS": "ignore",
        "SHEETSYNC_DATABASE_URL": f"sqlite:///{database}",
        "SHEETSYNC_REDIS_URL": pipeline_redis_url(),
        "SHEETSYNC_PII_KEYS": generate_key(),
        "SHEETSYNC_GOOGLE_CLIENT_ID": "startup-tests",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
        "SHEETSYNC_GOOGLE_API_ENDPOINT": "http://127.0.0.1:1",
        "SHEETSYNC_GOOGLE_TOKEN_URI": "http://127.0.0.1:1/token",
        "SHEETSYNC_DEVELOPMENT": "true",
    }


def run(process: str, env: dict[str, str], where: Path) -> subprocess.CompletedProcess[str]:
    """Start ``process`` in the new, empty directory ``where``, until it exits."""
    where.mkdir()
    return subprocess.run(
        [part.format(tmp=where.parent) for part in COMMANDS[process]],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def start(process: str, env: dict[str, str], where: Path) -> str:
    """Start ``process`` in the empty directory ``where``; return its one error line
    after checking that it exited 1, printed no traceback and created nothing."""
    result = run(process, env, where)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert list(where.iterdir()) == []  # no database file, no -wal, no -shm
    return lines[0]


def test_a_worker_without_pii_keys_stops_and_blames_no_owner(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    """The issue's worker: it used to start, then park every owner's answers as a broken
    credential. Now it never consumes a task."""
    line = start("worker", {**good_env, "SHEETSYNC_PII_KEYS": ""}, tmp_path / "run")
    assert line == (
        "error: SHEETSYNC_PII_KEYS is empty: set at least one key, the same as the web "
        "app's (on a first setup, `sheetsync keys generate` prints one)"
    )


def test_a_worker_without_a_database_creates_none(good_env: dict[str, str], tmp_path: Path) -> None:
    """No SHEETSYNC_DATABASE_URL, started in another directory: the default
    sqlite:///sheetsync.db is not there, and is not made there."""
    env = dict(good_env)
    del env["SHEETSYNC_DATABASE_URL"]
    line = start("worker", env, tmp_path / "elsewhere")
    assert line == (
        "error: no database at sqlite:///sheetsync.db: run `sheetsync db upgrade` first "
        "(or set SHEETSYNC_DATABASE_URL)"
    )


def test_a_worker_on_a_database_without_the_schema(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    url = f"sqlite:///{empty}"
    line = start("worker", {**good_env, "SHEETSYNC_DATABASE_URL": url}, tmp_path / "run")
    assert (
        line == f"error: the database at {url} has no sheetsync schema: run `sheetsync db upgrade`"
    )


def test_a_worker_on_an_older_schema_revision(good_env: dict[str, str], tmp_path: Path) -> None:
    [head] = known_revisions()[0]
    older = tmp_path / "older.db"
    url = f"sqlite:///{older}"
    upgrade(url, "0004_column_maps")
    assert head != "0004_column_maps"
    line = start("worker", {**good_env, "SHEETSYNC_DATABASE_URL": url}, tmp_path / "run")
    assert line == (
        f"error: the database at {url} is at schema revision 0004_column_maps, and this "
        f"sheetsync needs {head}: run `sheetsync db upgrade`"
    )


def test_a_worker_on_an_unreachable_database(good_env: dict[str, str], tmp_path: Path) -> None:
    url = f"postgresql://sheetsync:s3cret@{CLOSED}/sheetsync"
    line = start("worker", {**good_env, "SHEETSYNC_DATABASE_URL": url}, tmp_path / "run")
    assert line.startswith(
        f"error: cannot reach the database at postgresql://sheetsync:***@{CLOSED}/sheetsync "
        "(SHEETSYNC_DATABASE_URL): "
    ), line
    assert "s3cret" not in line


def test_a_worker_as_a_postgresql_role_that_does_not_exist(
    good_env: dict[str, str], tmp_path: Path, postgres_url: str
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_url).set(username="no_such_role", password="pw")
    shown = url.render_as_string(hide_password=False)
    line = start("worker", {**good_env, "SHEETSYNC_DATABASE_URL": shown}, tmp_path / "run")
    assert line.startswith("error: cannot reach the database at postgresql"), line
    assert "(SHEETSYNC_DATABASE_URL)" in line
    assert 'role "no_such_role" does not exist' in line
    assert ":pw@" not in line


def test_a_worker_without_the_google_client(good_env: dict[str, str], tmp_path: Path) -> None:
    env = dict(good_env)
    del env["SHEETSYNC_GOOGLE_CLIENT_SECRET"]
    line = start("worker", env, tmp_path / "run")
    assert line.startswith("error: SHEETSYNC_GOOGLE_CLIENT_SECRET must be set: "), line


def test_a_worker_whose_owner_hook_cannot_be_imported(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**good_env, "SHEETSYNC_OWNER_HOOK": "no_such_module:notify"}
    line = start("worker", env, tmp_path / "run")
    assert line == (
        "error: SHEETSYNC_OWNER_HOOK: cannot import 'no_such_module:notify' "
        "(expected package.module:function)"
    )


def test_a_worker_and_beat_with_an_unreachable_broker(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**good_env, "SHEETSYNC_BROKER_URL": f"redis://:hunter2@{CLOSED}/0"}
    for process in ("worker", "beat"):
        line = start(process, env, tmp_path / process)
        assert line.startswith(
            f"error: cannot reach the Celery broker at redis://:***@{CLOSED}/0 "
            "(SHEETSYNC_BROKER_URL): "
        ), line
        assert "hunter2" not in line


def test_beat_with_unreachable_redis(good_env: dict[str, str], tmp_path: Path) -> None:
    """Beat writes its heartbeat to Redis and sends to the broker (both this URL)."""
    env = {**good_env, "SHEETSYNC_REDIS_URL": f"redis://{CLOSED}/0"}
    line = start("beat", env, tmp_path / "run")
    assert line.startswith(f"error: cannot reach Redis at redis://{CLOSED}/0 (SHEETSYNC_REDIS_URL)")


def test_the_console_needs_the_schema(good_env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    url = f"sqlite:///{empty}"
    line = start("web", {**good_env, "SHEETSYNC_DATABASE_URL": url}, tmp_path / "run")
    assert (
        line == f"error: the database at {url} has no sheetsync schema: run `sheetsync db upgrade`"
    )


def test_the_console_and_the_exporter_without_a_database(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    env = dict(good_env)
    del env["SHEETSYNC_DATABASE_URL"]
    for process in ("web", "metrics"):
        line = start(process, env, tmp_path / process)
        assert line.startswith("error: no database at sqlite:///sheetsync.db"), line


def test_the_exporter_on_an_older_schema_revision(good_env: dict[str, str], tmp_path: Path) -> None:
    older = tmp_path / "older.db"
    url = f"sqlite:///{older}"
    upgrade(url, "0003")
    line = start("metrics", {**good_env, "SHEETSYNC_DATABASE_URL": url}, tmp_path / "run")
    assert line.startswith(f"error: the database at {url} is at schema revision 0003"), line
    assert line.endswith(": run `sheetsync db upgrade`")


def test_a_database_migrated_by_a_newer_sheetsync(migrated: Path, tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    from sheetsync.errors import ConfigError

    newer = tmp_path / "newer.db"
    newer.write_bytes(migrated.read_bytes())
    url = f"sqlite:///{newer}"
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '0099_future'")
        # ... that accepts only releases newer than this one
        connection.exec_driver_sql("UPDATE schema_compat SET accepts = '0098_future'")
    engine.dispose()
    with pytest.raises(ConfigError) as caught:
        check_database(url)
    [head] = known_revisions()[0]
    assert str(caught.value) == (
        f"the database at {url} is at schema revision 0099_future, newer than this sheetsync "
        f"knows ({head}): upgrade sheetsync"
    )
    check_database(f"sqlite:///{migrated}")  # the newest revision passes


def test_an_unknown_variable_is_warned_about_once_by_a_worker(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    """Read at import and again by the start-up check: still one warning."""
    env = {**good_env, "SHEETSYNC_FLUSH_DELAYS": "1", "SHEETSYNC_PII_KEYS": ""}
    result = run("worker", env, tmp_path / "run")
    assert result.returncode == 1
    assert result.stderr.count("SHEETSYNC_FLUSH_DELAYS is not a sheetsync setting") == 1
    assert result.stderr.splitlines()[-1].startswith("error: SHEETSYNC_PII_KEYS is empty")


def _version_1_token(key: bytes, plaintext: str) -> str:
    """A token as version 1 wrote it: bound to nothing."""
    header = bytes([LEGACY_TOKEN_VERSION]) + key_id(key)
    nonce = os.urandom(12)
    raw = header + nonce + AESGCM(key).encrypt(nonce, plaintext.encode(), header)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _pii_key(env: dict[str, str]) -> bytes:
    return base64.urlsafe_b64decode(env["SHEETSYNC_PII_KEYS"] + "=")


def test_a_worker_refuses_stored_version_1_refresh_tokens_unless_accepted(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    """An upgrade from version 1 tokens: a worker that refused them would mark every such
    owner's credential broken, so it does not start until the operator accepts them for
    the rotation."""
    key = _pii_key(good_env)
    engine = create_engine(good_env["SHEETSYNC_DATABASE_URL"])
    with session_factory(engine).begin() as session:
        seed_user(session, "owner_1", keyring=Keyring([key]))
        session.execute(
            update(GoogleCredential).values(refresh_token=_version_1_token(key, "refresh-owner"))
        )
    engine.dispose()

    line = start("worker", good_env, tmp_path / "run")
    assert line == (
        "error: 1 stored refresh tokens are version 1 (bound to no owner), which a worker "
        "refuses by default: set SHEETSYNC_PII_ACCEPT_V1_TOKENS=true while `sheetsync pii "
        "rotate` rewrites them"
    )


def _answers_with_version_1_tokens(env: dict[str, str], version_1: dict[str, int]) -> None:
    """A form (its owner's refresh token version 2) with answers ``ans_00`` to ``ans_09``:
    ``version_1[answer id]`` of an answer's personal-info values are version 1 tokens,
    one of them under a question since deleted; the others version 2."""
    key = _pii_key(env)
    keyring = Keyring([key])
    engine = create_engine(env["SHEETSYNC_DATABASE_URL"])
    with session_factory(engine).begin() as session:
        form = seed_form(session, owner_id="owner_1", pii=2, keyring=keyring)
        for n in range(10):
            answer_id = f"ans_{n:02d}"
            old = version_1.get(answer_id, 0)
            items = []
            for index, question in enumerate([*form.pii_question_ids, "q_deleted"]):
                context = answer_value_context(answer_id, question)
                token = (
                    _version_1_token(key, f"value {index}")
                    if index < old
                    else keyring.encrypt(f"value {index}", context)
                )
                items.append({"questionId": question, "value": token})
            items.append({"questionId": "q_text", "value": "not a token"})
            session.add(
                SubmissionAnswer(id=answer_id, submission_id=form.submission_id, answer=items)
            )
    engine.dispose()


def test_a_worker_refuses_version_1_tokens_in_answers_unless_accepted(
    good_env: dict[str, str], tmp_path: Path
) -> None:
    """Reconnected owners have version 2 refresh tokens while their answers may still hold
    version 1 personal info, deleted questions' too: a worker would fail those answers."""
    _answers_with_version_1_tokens(good_env, {"ans_00": 3, "ans_09": 1})

    line = start("worker", good_env, tmp_path / "run")
    assert line == (
        "error: 4 personal-info tokens of stored answers are version 1 (bound to no answer), "
        "which a worker refuses by default: set SHEETSYNC_PII_ACCEPT_V1_TOKENS=true while "
        "`sheetsync pii rotate` rewrites them"
    )


def test_the_start_up_count_of_answers_version_1_tokens_reads_a_bounded_sample(
    good_env: dict[str, str],
) -> None:
    """The first and the last answers by id (the primary key's index), never the whole
    of a large table: a version 1 token in between is `sheetsync pii rotate --check`'s."""
    _answers_with_version_1_tokens(good_env, {"ans_01": 1, "ans_05": 2, "ans_08": 1})
    keyring = Keyring([_pii_key(good_env)])
    engine = create_engine(good_env["SHEETSYNC_DATABASE_URL"])
    try:
        with engine.connect() as connection:
            assert version_1_answer_tokens(connection, keyring, sample=2) == (2, False)
            assert version_1_answer_tokens(connection, keyring, sample=1) == (0, False)
            assert version_1_answer_tokens(connection, keyring, sample=4) == (2, False)
            assert version_1_answer_tokens(connection, keyring, sample=5) == (4, True)
            assert version_1_answer_tokens(connection, keyring, sample=11) == (4, True)
    finally:
        engine.dispose()


def test_each_downgrade_is_warned_about_at_start(good_env: dict[str, str], tmp_path: Path) -> None:
    """Issue 29, C: the console, started with every downgrade, warns once about each (one
    line at WARNING, no password) before it serves."""
    env = {
        **good_env,  # SHEETSYNC_DEVELOPMENT=true: the Google endpoints are plain http
        "SHEETSYNC_REDIS_URL": "rediss://:hunter2@127.0.0.1:1/0?ssl_cert_reqs=none",
        "SHEETSYNC_BROKER_URL": "rediss://:hunter2@127.0.0.1:1/1?ssl_check_hostname=false",
        "SHEETSYNC_PII_ACCEPT_V1_TOKENS": "true",
    }
    where = tmp_path / "run"
    where.mkdir()
    command = [str(SCRIPT), "web", "--port", "0"]
    with subprocess.Popen(
        command, cwd=where, env=env, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    ) as process:
        try:
            lines = _lines_until(process, "sheetsync console on ")
        finally:
            process.terminate()
    warnings = [line for line in lines if line.startswith("WARNING sheetsync.startup: ")]
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in warnings] == [
        "SHEETSYNC_REDIS_URL",
        "SHEETSYNC_BROKER_URL",
        "SHEETSYNC_PII_ACCEPT_V1_TOKENS=true:",
        "SHEETSYNC_DEVELOPMENT=true:",
    ]
    assert "hunter2" not in "".join(lines)


def _lines_until(process: subprocess.Popen[str], marker: str) -> list[str]:
    """``process``'s stderr lines up to the one starting with ``marker``."""
    assert process.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: _read_until(process, marker, lines), daemon=True)
    reader.start()
    reader.join(timeout=START_TIMEOUT_S)
    assert lines and lines[-1].startswith(marker), lines
    return lines


def _read_until(process: subprocess.Popen[str], marker: str, lines: list[str]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line.rstrip("\n"))
        if line.startswith(marker):
            return
