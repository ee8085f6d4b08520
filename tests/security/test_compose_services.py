"""What each compose service is given, and where it can be reached.

* Each secret reaches only the services that use it: the PII keys and the Google client
  the workers alone, the console token the console, Flower's password Flower; each
  database role's password PostgreSQL and the services that log in as that role, the
  superuser's PostgreSQL alone; the Redis password the services that read Redis.
  Whatever the variant (the dev override, the TLS override).
* Each service still starts with only what compose gives it: its start-up check
  (:data:`sheetsync.startup.NEEDS`), run with nothing but its rendered variables.
* The console and Flower are published on 127.0.0.1 only; docker-compose.tls.yml makes
  both serve HTTPS with the operator's files and publishes them on every interface, and
  its healthchecks (and the default ones) pass against the real servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.compose import (
    DEV_FILES,
    SECRETS,
    TLS_FILES,
    Compose,
    published_ports,
    sheetsync_services,
)
from support.console import TOKEN, running_console
from support.https_certificates import make_server_certificate

from sheetsync.startup import NEEDS, Role

WORKERS = frozenset({"worker-priority", "worker-default", "worker-scheduled"})
#: The role (sheetsync.startup) each sheetsync service starts as.
ROLES: dict[str, Role] = {
    **dict.fromkeys(WORKERS, "worker"),
    "beat": "beat",
    "console": "console",
    "metrics": "exporter",
}
#: The variables each start-up need reads (the broker is the Redis unless told apart).
NEED_VARIABLES = {
    "hooks": (),
    "pii_keys": ("SHEETSYNC_PII_KEYS",),
    "google_client": ("SHEETSYNC_GOOGLE_CLIENT_ID", "SHEETSYNC_GOOGLE_CLIENT_SECRET"),
    "database": ("SHEETSYNC_DATABASE_URL",),
    "version_1_tokens": ("SHEETSYNC_DATABASE_URL",),
    "redis": ("SHEETSYNC_REDIS_URL",),
    "broker": ("SHEETSYNC_REDIS_URL",),
}
#: The pass-through secrets: set in the operator's environment, passed on to these only.
OPTIONAL_SECRETS = (
    "SHEETSYNC_GOOGLE_CLIENT_ID",
    "SHEETSYNC_GOOGLE_CLIENT_SECRET",
    "SHEETSYNC_ALERT_WEBHOOK_URL",
    "SHEETSYNC_OWNER_HOOK",
)
REDIS_READERS = WORKERS | {"beat", "flower", "console", "metrics"}
#: Who may hold each secret's value, anywhere in its definition (environment, command,
#: healthcheck).
HOLDERS = {
    "POSTGRES_PASSWORD": {"postgres"},
    "POSTGRES_OWNER_PASSWORD": {"postgres", "migrate", "db-grants"},
    "POSTGRES_WORKER_PASSWORD": WORKERS | {"postgres"},
    "POSTGRES_CONSOLE_PASSWORD": {"postgres", "console"},
    "POSTGRES_EXPORTER_PASSWORD": {"postgres", "metrics"},
    "REDIS_PASSWORD": REDIS_READERS | {"redis"},
    "SHEETSYNC_PII_KEYS": WORKERS,
    "FLOWER_USER": {"flower"},
    "FLOWER_PASSWORD": {"flower"},
    "SHEETSYNC_WEB_TOKEN": {"console"},
    **dict.fromkeys(OPTIONAL_SECRETS, WORKERS),
}
#: A value per secret that no other value contains.
VALUES = {name: f"<{name.lower()}-value>" for name in HOLDERS}
VARIANTS = {
    "default": (),
    "docker-compose.dev.yml --profile dev": (*DEV_FILES, "--profile", "dev"),
    "docker-compose.tls.yml": TLS_FILES,
}


def render(compose: Compose, args: tuple[str, ...]) -> dict[str, Any]:
    return compose.config(*args, env={**VALUES, "SHEETSYNC_TLS_DIR": "/etc/sheetsync-tls"})


def holders(config: Mapping[str, Any], value: str) -> set[str]:
    """The services whose rendered definition holds ``value`` anywhere."""
    return {
        name
        for name, service in config["services"].items()
        if value in json.dumps(service, sort_keys=True)
    }


@pytest.mark.docker
@pytest.mark.parametrize("args", VARIANTS.values(), ids=VARIANTS.keys())
def test_each_secret_reaches_only_the_services_that_use_it(
    compose: Compose, args: tuple[str, ...]
) -> None:
    config = render(compose, args)
    dev = args[:4] == DEV_FILES

    for name, expected in HOLDERS.items():
        # The dev override gives the workers the emulator's placeholders instead: the
        # operator's real client reaches nothing.
        replaced = dev and name.startswith("SHEETSYNC_GOOGLE_CLIENT_")
        assert holders(config, VALUES[name]) == (set() if replaced else set(expected)), name
    if dev:
        assert holders(config, "emulator-placeholder") == set(WORKERS)


@pytest.mark.docker
@pytest.mark.parametrize("args", VARIANTS.values(), ids=VARIANTS.keys())
def test_each_service_is_given_what_its_start_up_checks(
    compose: Compose, args: tuple[str, ...]
) -> None:
    services = sheetsync_services(render(compose, args))

    assert set(services) == set(ROLES) | {"migrate", "flower"}
    for name, role in ROLES.items():
        needed = {v for need in NEEDS[role] for v in NEED_VARIABLES[need]}
        assert needed <= set(services[name]["environment"]), (name, role)
    assert "SHEETSYNC_DATABASE_URL" in services["migrate"]["environment"]
    assert "SHEETSYNC_REDIS_URL" in services["flower"]["environment"]


def _start_up(role: str, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``role``'s start-up check in a process with ``env`` only; prints the Redis and
    database it checked."""
    script = (
        "import json\n"
        "from sheetsync.startup import check_process\n"
        f"settings = check_process({role!r})\n"
        "print(json.dumps([settings.redis_url, settings.database_url]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": os.environ["PATH"], **env},
        cwd=cwd,  # the default database, sqlite:///sheetsync.db, is not here
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.docker
def test_each_service_starts_with_only_what_compose_gives_it(
    compose: Compose, pipeline_env: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    this_test = pipeline_env()  # its database (migrated) and its own Redis
    values = {
        "SHEETSYNC_DATABASE_URL": this_test["SHEETSYNC_DATABASE_URL"],
        "SHEETSYNC_REDIS_URL": this_test["SHEETSYNC_REDIS_URL"],
        "SHEETSYNC_PII_KEYS": this_test["SHEETSYNC_PII_KEYS"],
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-tests",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
        "SHEETSYNC_WEB_TOKEN": TOKEN,
    }
    services = sheetsync_services(render(compose, ()))

    for name, role in ROLES.items():
        given = {k: values[k] for k in services[name]["environment"] if k in values}
        result = _start_up(role, given, tmp_path)
        assert result.returncode == 0, (name, result.stderr)
        redis_url, database_url = json.loads(result.stdout)
        needs = NEEDS[role]
        if "redis" in needs:
            assert redis_url == values["SHEETSYNC_REDIS_URL"], name
        if "database" in needs:
            assert database_url == values["SHEETSYNC_DATABASE_URL"], name

    # migrate: `sheetsync db upgrade` of a new database, with its variables alone.
    fresh = {"SHEETSYNC_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.db'}"}
    assert set(services["migrate"]["environment"]) - {"SHEETSYNC_LOG_FORMAT"} == set(fresh)
    (tmp_path / "fresh.db").touch()
    upgrade = subprocess.run(
        [str(Path(sys.executable).with_name("sheetsync")), "db", "upgrade"],
        env={"PATH": os.environ["PATH"], **fresh},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert upgrade.returncode == 0, upgrade.stderr
    assert _start_up("console", fresh, tmp_path).returncode == 0  # the schema is there


@pytest.mark.docker
@pytest.mark.parametrize("args", [(), (*DEV_FILES, "--profile", "dev")], ids=["default", "dev"])
def test_only_the_console_and_flower_are_published_and_on_loopback_only(
    compose: Compose, args: tuple[str, ...]
) -> None:
    services = compose.config(*args)["services"]

    published = {
        name: [(p.host_ip, p.published, p.target) for p in published_ports(service)]
        for name, service in services.items()
        if service.get("ports")
    }
    assert published == {
        "console": [("127.0.0.1", "8088", "8088")],
        "flower": [("127.0.0.1", "5555", "5555")],
    }


@pytest.mark.docker
def test_the_tls_override_serves_https_on_every_interface(compose: Compose) -> None:
    services = compose.config(*TLS_FILES, env={**SECRETS, "SHEETSYNC_TLS_DIR": "/srv/tls"})[
        "services"
    ]
    console, flower = services["console"], services["flower"]

    command = console["command"]
    assert command[command.index("--ssl-certfile") + 1] == "/run/sheetsync-tls/cert.pem"
    assert command[command.index("--ssl-keyfile") + 1] == "/run/sheetsync-tls/key.pem"
    assert "--certfile=/run/sheetsync-tls/cert.pem" in flower["command"]
    assert "--keyfile=/run/sheetsync-tls/key.pem" in flower["command"]
    for service in (console, flower):
        assert service["volumes"] in (
            ["/srv/tls:/run/sheetsync-tls:ro"],  # compose v1
            [
                {
                    "type": "bind",
                    "source": "/srv/tls",
                    "target": "/run/sheetsync-tls",
                    "read_only": True,
                }
            ],
        )
        assert "https://127.0.0.1:" in service["healthcheck"]["test"][-1]
    published = {
        name: sorted((p.host_ip, p.published, p.target) for p in published_ports(service))
        for name, service in services.items()
        if service.get("ports")
    }
    assert published == {
        "console": [("", "8443", "8088"), ("127.0.0.1", "8088", "8088")],
        "flower": [("", "5443", "5555"), ("127.0.0.1", "5555", "5555")],
    }


@pytest.mark.docker
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_the_tls_override_needs_the_certificate_directory(compose: Compose, how: str) -> None:
    env = {**SECRETS, **({"SHEETSYNC_TLS_DIR": ""} if how == "empty" else {})}

    result = compose.run(*TLS_FILES, "config", "-q", env=env)

    assert result.returncode != 0
    assert "SHEETSYNC_TLS_DIR" in result.stderr


def _probe(script: str, port: int, token: str) -> subprocess.CompletedProcess[str]:
    """A console healthcheck of a compose file, as Docker runs it, against ``port``."""
    return subprocess.run(
        [sys.executable, "-c", script.replace("127.0.0.1:8088", f"127.0.0.1:{port}")],
        env={"PATH": os.environ["PATH"], "SHEETSYNC_WEB_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.docker
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_the_console_healthcheck_passes_against_the_console(
    compose: Compose, pipeline_env: Callable[..., dict[str, str]], tmp_path: Path, tls: bool
) -> None:
    files = TLS_FILES if tls else ()
    console = compose.config(*files, env={**SECRETS, "SHEETSYNC_TLS_DIR": "/tls"})["services"][
        "console"
    ]
    script = console["healthcheck"]["test"][-1]
    certificate = make_server_certificate(tmp_path)
    args = ("--ssl-certfile", str(certificate.cert), "--ssl-keyfile", str(certificate.key))
    context = certificate.client_context() if tls else None
    with running_console(pipeline_env(), args=args if tls else (), tls=context) as running:
        port = int(running.url.rsplit(":", 1)[1])
        healthy = _probe(script, port, running.token)
        assert healthy.returncode == 0, healthy.stderr
        # It authenticates: with another token the console refuses it.
        assert _probe(script, port, "x" * 40).returncode != 0
