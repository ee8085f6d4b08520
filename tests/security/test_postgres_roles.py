"""sheetsync's PostgreSQL roles (deploy/postgres/), on a real server.

Each test makes a throwaway database and roles of unique names on the server of
``SHEETSYNC_TEST_POSTGRES_URL`` (a superuser's URL, e.g.
``postgresql://postgres@127.0.0.1:5432/test``), and drops them afterwards. Then, as
compose does: ``10-roles.sql`` as the superuser, ``sheetsync db upgrade`` as the owner,
``grants.sql`` as the owner, and the web app's emit role as the deployment page's GRANT
block says (docs/operating/deployment.md).

* The owner owns every table; nobody else can drop, alter, truncate or create one.
* The worker does a whole flush (a real Celery worker against the emulator), after an
  emit made as the web app's emit role; the console replays and purges dead letters
  with the CLI's code, and writes nothing else; the exporter reads everything and
  writes nothing; the emit role cannot read refresh tokens or touch dead letters.
* A table a later migration makes gets the same grants (default privileges).
* A database migrated before these roles (its tables the superuser's) is taken over by
  the roles script.
* The roles script refuses to run without each password.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg.errors
import pytest
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from support.markdown import code_blocks
from support.paths import ROOT
from support.waiting import wait_until

from sheetsync import emit_answers_submitted, ledger
from sheetsync.crypto import Keyring
from sheetsync.db import normalize_url, session_factory
from sheetsync.deadletters import replay, store
from sheetsync.dev.seed import link_sheet, seed_answers, seed_form
from sheetsync.flush import intents
from sheetsync.models import (
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    SheetTransaction,
    TransactionType,
)
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.settings import get_settings
from sheetsync.startup import check_database
from sheetsync.web.data import appends_per_minute, read_engine

pytestmark = pytest.mark.postgres

POSTGRES_URL_VARIABLE = "SHEETSYNC_TEST_POSTGRES_URL"
ROLES_SQL = ROOT / "deploy" / "postgres" / "10-roles.sql"
GRANTS_SQL = ROOT / "deploy" / "postgres" / "grants.sql"
DEPLOYMENT_DOC = ROOT / "docs" / "operating" / "deployment.md"
#: The roles 10-roles.sql makes, by the psql variable that names each.
SCRIPT_ROLES = ("owner", "worker", "console", "exporter")
#: What its passwords are read from.
PASSWORD_VARIABLES = {
    "owner": "POSTGRES_OWNER_PASSWORD",
    "worker": "POSTGRES_WORKER_PASSWORD",
    "console": "POSTGRES_CONSOLE_PASSWORD",
    "exporter": "POSTGRES_EXPORTER_PASSWORD",
}
#: The names the deployment page's emit block uses, replaced by this test's.
DOC_EMIT_ROLE, DOC_APP_ROLE, DOC_DATABASE = "sheetsync_emit", "your_web_app", "sheetsync"
KEYRING = Keyring([os.urandom(32)])


@dataclass
class RoleDatabase:
    """A throwaway database on the test server, and this test's role names."""

    server: URL
    name: str
    roles: dict[str, str]
    passwords: dict[str, str] = field(default_factory=dict)
    _engines: list[Engine] = field(default_factory=list)

    def url(self, role: str | None = None) -> str:
        """The database's URL as ``role`` (a key of :attr:`roles`), or the superuser."""
        url = self.server.set(database=self.name)
        if role is not None:
            url = url.set(username=self.roles[role], password=self.passwords.get(role))
        return url.render_as_string(hide_password=False)

    def engine(self, role: str | None = None) -> Engine:
        engine = create_engine(normalize_url(self.url(role)), poolclass=NullPool)
        self._engines.append(engine)
        return engine

    def psql(
        self, script: Path | str, *, role: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``psql -f script`` (or ``-c`` SQL) in the database, with this test's role
        names as the scripts' variables."""
        psql = shutil.which("psql")
        if psql is None:
            pytest.skip("psql is not installed (Debian: postgresql-client)")
        url = make_url(self.url(role))
        variables = [f"--variable={key}={name}" for key, name in self.roles.items()]
        source = ["-f", str(script)] if isinstance(script, Path) else ["-c", script]
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "POSTGRES_"))}
        if url.password:
            base["PGPASSWORD"] = str(url.password)
        return subprocess.run(
            [
                psql,
                "--no-psqlrc",
                "--set=ON_ERROR_STOP=1",
                f"--host={url.host or '127.0.0.1'}",
                f"--port={url.port or 5432}",
                f"--username={url.username}",
                f"--dbname={url.database}",
                *variables,
                *source,
            ],
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def password_env(self) -> dict[str, str]:
        return {PASSWORD_VARIABLES[role]: self.passwords[role] for role in SCRIPT_ROLES}

    def dispose(self) -> None:
        for engine in self._engines:
            engine.dispose()
        self._engines.clear()


@contextmanager
def role_database() -> Iterator[RoleDatabase]:
    server_url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not server_url:
        pytest.skip(
            f"{POSTGRES_URL_VARIABLE} is not set (e.g. postgresql://postgres@127.0.0.1:5432/test)"
        )
    server = make_url(server_url)
    unique = uuid.uuid4().hex[:10]
    database = RoleDatabase(
        server=server,
        name=f"sheetsync_roles_{unique}",
        roles={key: f"ss_{unique}_{key}" for key in (*SCRIPT_ROLES, "emit", "app")},
        passwords={key: f"{key}-{uuid.uuid4().hex}" for key in (*SCRIPT_ROLES, "app")},
    )
    admin = create_engine(normalize_url(server_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{database.name}"')
    try:
        yield database
    finally:
        database.dispose()
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)')
            for name in database.roles.values():
                connection.exec_driver_sql(f'DROP ROLE IF EXISTS "{name}"')
        admin.dispose()


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def run_roles_script(database: RoleDatabase) -> None:
    ok(database.psql(ROLES_SQL, env=database.password_env()))


def migrate_as_owner(database: RoleDatabase, cwd: Path) -> None:
    """``sheetsync db upgrade``, as compose's migrate runs it: the owner's URL only."""
    ok(
        subprocess.run(
            [str(Path(sys.executable).with_name("sheetsync")), "db", "upgrade"],
            env={"PATH": os.environ["PATH"], "SHEETSYNC_DATABASE_URL": database.url("owner")},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    )


def emit_grants_from_the_docs(database: RoleDatabase) -> str:
    """The deployment page's GRANT block for the web app's emit role, with this test's
    names."""
    blocks = code_blocks(DEPLOYMENT_DOC.read_text(encoding="utf-8"), "sql")
    [block] = [block.text for block in blocks if DOC_EMIT_ROLE in block.text]
    names = {
        DOC_EMIT_ROLE: database.roles["emit"],
        DOC_APP_ROLE: database.roles["app"],
    }
    block = re.sub(
        r"\b(" + "|".join(names) + r")\b", lambda found: f'"{names[found.group(1)]}"', block
    )
    return re.sub(r"\bON DATABASE sheetsync\b", f'ON DATABASE "{database.name}"', block)


def set_up(database: RoleDatabase, cwd: Path) -> None:
    """What a deployment does: the roles, the owner's migration, the grants after it,
    and the emit role for a web app that logs in as ``app``."""
    run_roles_script(database)
    migrate_as_owner(database, cwd)
    ok(database.psql(GRANTS_SQL, role="owner"))
    with database.engine().begin() as connection:
        app = database.roles["app"]
        connection.exec_driver_sql(
            f"CREATE ROLE \"{app}\" LOGIN PASSWORD '{database.passwords['app']}'"
        )
    ok(database.psql(emit_grants_from_the_docs(database)))


def refused(engine: Engine, *statements: str) -> None:
    """Each statement fails for want of a privilege (and changes nothing)."""
    for statement in statements:
        with pytest.raises(DBAPIError) as caught, engine.begin() as connection:
            connection.exec_driver_sql(statement)
        assert isinstance(caught.value.orig, psycopg.errors.InsufficientPrivilege), (
            statement,
            caught.value,
        )


#: What no role but the owner may do to the schema.
DDL = (
    "DROP TABLE sheet_transaction",
    "ALTER TABLE sheet_transaction ADD COLUMN intruder text",
    "TRUNCATE sheet_transaction",
    "CREATE TABLE intruder (id int)",
    "CREATE INDEX intruder ON dead_letter (user_id)",
)


# -- one database, set up once, for what each role may and may not do ------------------


@dataclass
class Seeded:
    database: RoleDatabase
    form_id: str
    owner_id: str
    spreadsheet: str
    answers: list[str]
    dead_letter: int


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    with role_database() as database:
        set_up(database, tmp_path_factory.mktemp("roles"))
        with session_factory(database.engine("owner")).begin() as session:
            form = seed_form(session, owner_id=f"owner_{database.name[-6:]}", keyring=KEYRING)
            link = link_sheet(session, form, "sheet-roles", 0)
            answers = seed_answers(session, form, 4, keyring=KEYRING)
            key = BufferKey(form.owner_id, form.submission_id, link.spread_sheet_id, 0)
            ledger.record(session, answers, link.spread_sheet_id, 0, TransactionType.ENQUEUED)
            entry = store.park(
                session, key, answers[:2], DeadLetterReason.CREDENTIAL, "invalid_grant", delay_s=0
            )
            assert entry is not None
            seeded = Seeded(
                database,
                form.submission_id,
                form.owner_id,
                link.spread_sheet_id,
                answers,
                entry.id,
            )
        yield seeded


def test_the_owner_owns_every_table(seeded: Seeded) -> None:
    with seeded.database.engine().connect() as connection:
        owners = dict(
            connection.execute(
                text("SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'")
            ).all()
        )
        schema_owner = connection.scalar(
            text("SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'")
        )

    assert {"sheet_transaction", "dead_letter", "alembic_version"} <= set(owners)
    assert set(owners.values()) == {seeded.database.roles["owner"]}
    assert schema_owner == seeded.database.roles["owner"]


def test_the_worker_writes_rows_but_never_the_schema(seeded: Seeded) -> None:
    engine = seeded.database.engine("worker")
    check_database(seeded.database.url("worker"))  # its start-up check reads the revision

    with session_factory(engine).begin() as session:
        ledger.record(session, seeded.answers[2:], seeded.spreadsheet, 0, TransactionType.COMPLETED)
        key = BufferKey(seeded.owner_id, seeded.form_id, seeded.spreadsheet, 0)
        entry = store.park(
            session,
            key,
            seeded.answers[3:],
            DeadLetterReason.TRANSIENT_EXHAUSTED,
            "503",
            delay_s=60,
        )
        assert entry is not None
        lease = SimpleNamespace(token="run-1", epoch=1, until_ms=1)
        intent = intents.record(session, key, lease, seeded.answers[2:], after_row=1)
        intents.resolve(session, intent)  # a DELETE

    refused(engine, *DDL, "UPDATE alembic_version SET version_num = version_num")


def test_the_console_replays_and_purges_and_writes_nothing_else(seeded: Seeded) -> None:
    database = seeded.database
    check_database(database.url("console"))
    engine = database.engine("console")
    console = SimpleNamespace(sessions=session_factory(engine))
    entry = seeded.dead_letter

    # A replay (``dlq replay ID``): claimed, then given back as if the broker were down.
    claimed = replay.claim(console, [entry], include_failed=True)
    assert claimed == [entry]
    replay.release(console.sessions, claimed)
    # A purge: the entry PURGED, its open answers FAILED in the ledger.
    purged, refusals = store.purge(console.sessions, [entry])
    assert (purged, refusals) == ([entry], [])
    with console.sessions() as session:
        assert session.get(DeadLetter, entry).status is DeadLetterStatus.PURGED
        states = ledger.states(session, seeded.answers[:2], seeded.spreadsheet, 0)
    assert set(states.values()) == {TransactionType.FAILED}
    # Its pages read through a read-only engine of their own.
    reader = read_engine(database.url("console"))
    try:
        pages = SimpleNamespace(engine=reader, sessions=session_factory(reader))
        assert len(appends_per_minute(pages)) == 60
    finally:
        reader.dispose()

    refused(
        engine,
        *DDL,
        "INSERT INTO dead_letter_answer (dead_letter_id, answer_id) VALUES (1, 'x')",
        "DELETE FROM sheet_transaction",
        "DELETE FROM dead_letter",
        "UPDATE spread_sheet SET paused_reason = 'x'",
        "UPDATE google_credential SET refresh_token = 'x'",
        "UPDATE submission_answer SET user_name = 'x'",
    )


def test_the_exporter_reads_everything_and_writes_nothing(seeded: Seeded) -> None:
    database = seeded.database
    check_database(database.url("exporter"))
    engine = database.engine("exporter")
    with engine.connect() as connection:
        tables = connection.scalars(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ).all()
        for table in tables:
            connection.exec_driver_sql(f'SELECT count(*) FROM "{table}"')

    refused(
        engine,
        *DDL,
        "INSERT INTO sheet_transaction (submission_answer_id, spread_sheet_id, sheet_id, type, "
        "updated_at) VALUES ('x', 'y', 0, 'ENQUEUED', now())",
        "UPDATE sheet_transaction SET error_message = 'x'",
        "DELETE FROM sheet_transaction",
        "UPDATE dead_letter SET status = 'PURGED'",
        "SELECT id FROM dead_letter FOR UPDATE",
    )


def test_the_emit_role_reads_no_credential_and_no_dead_letter(seeded: Seeded) -> None:
    engine = seeded.database.engine("app")

    refused(
        engine,
        *DDL,
        "SELECT refresh_token FROM google_credential",
        "SELECT id FROM dead_letter",
        "UPDATE dead_letter SET status = 'PURGED'",
        "DELETE FROM sheet_transaction",
        "UPDATE spread_sheet SET paused_reason = 'x'",
    )


def test_a_table_of_a_later_migration_gets_the_same_grants(seeded: Seeded) -> None:
    database = seeded.database
    with database.engine("owner").begin() as connection:
        connection.exec_driver_sql("CREATE TABLE later_migration (id bigserial PRIMARY KEY, n int)")

    with database.engine("worker").begin() as connection:
        connection.exec_driver_sql("INSERT INTO later_migration (n) VALUES (1), (2)")
        connection.exec_driver_sql("UPDATE later_migration SET n = n + 1")
        connection.exec_driver_sql("DELETE FROM later_migration WHERE n = 3")
    for reader in ("console", "exporter"):
        with database.engine(reader).connect() as connection:
            assert connection.scalar(text("SELECT count(*) FROM later_migration")) == 1
        refused(database.engine(reader), "INSERT INTO later_migration (n) VALUES (9)")
    refused(database.engine("worker"), "DROP TABLE later_migration")


# -- a whole flush, as the worker, of what the web app emitted as the emit role --------


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[RoleDatabase]:
    """A database set up as compose sets it up."""
    with role_database() as database:
        set_up(database, tmp_path)
        yield database


@pytest.fixture
def engine(deployed: RoleDatabase) -> Engine:
    """The pipeline's engine (conftest's ``pipeline_env`` takes its URL): the worker's."""
    return deployed.engine("worker")


def test_a_flush_runs_as_the_worker_role(
    deployed: RoleDatabase,
    engine: Engine,
    world: Any,
    worker: Any,
    pipeline_env: Callable[..., dict[str, str]],
) -> None:
    assert pipeline_env()["SHEETSYNC_DATABASE_URL"] == normalize_url(deployed.url("worker"))
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)

    # The web app's request: its own role, a member of the emit role.
    web_app = Services.build(get_settings(), engine=deployed.engine("app"))
    try:
        results = emit_answers_submitted(ids, services=web_app)
    finally:
        web_app.close()
    assert all(result.enqueued for result in results)

    wait_until(lambda: world.ids_in(sheet) == ids, timeout=30)
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 5}, timeout=30)
    with session_factory(engine)() as session:
        rows = session.scalars(select(SheetTransaction.type)).all()
    assert set(rows) == {TransactionType.COMPLETED}


# -- the roles script ------------------------------------------------------------------


def test_a_database_from_before_the_roles_is_taken_over(tmp_path: Path) -> None:
    with role_database() as database:
        # Migrated as the superuser, as docker-compose.yml did before these roles.
        ok(
            subprocess.run(
                [str(Path(sys.executable).with_name("sheetsync")), "db", "upgrade"],
                env={"PATH": os.environ["PATH"], "SHEETSYNC_DATABASE_URL": database.url()},
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        )

        run_roles_script(database)
        run_roles_script(database)  # again: nothing made twice
        migrate_as_owner(database, tmp_path)
        ok(database.psql(GRANTS_SQL, role="owner"))

        with database.engine().connect() as connection:
            owners = set(
                connection.scalars(
                    text("SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")
                )
            )
            sequences = set(
                connection.scalars(
                    text("SELECT sequenceowner FROM pg_sequences WHERE schemaname = 'public'")
                )
            )
        assert owners == sequences == {database.roles["owner"]}
        with session_factory(database.engine("worker")).begin() as session:
            ledger.record(session, ["a1"], "sheet", 0, TransactionType.ENQUEUED)
        with database.engine("owner").connect() as connection:  # the owner alters it
            transaction = connection.begin()
            connection.exec_driver_sql("ALTER TABLE sheet_transaction ADD COLUMN probe int")
            transaction.rollback()


@pytest.mark.parametrize("variable", PASSWORD_VARIABLES.values())
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_the_roles_script_needs_every_password(variable: str, how: str) -> None:
    with role_database() as database:
        env = database.password_env()
        if how == "unset":
            del env[variable]
        else:
            env[variable] = ""

        result = database.psql(ROLES_SQL, env=env)

        assert result.returncode != 0
        [line] = [line for line in result.stderr.splitlines() if "ERROR" in line]
        assert variable in line, line
        with database.engine().connect() as connection:
            made = connection.scalars(
                text("SELECT rolname FROM pg_roles WHERE rolname = ANY(:names)"),
                {"names": list(database.roles.values())},
            ).all()
        assert made == []
