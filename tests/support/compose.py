"""The compose files as ``docker compose config`` renders them (or ``docker-compose
config``; without either the compose tests are skipped, naming why), read with PyYAML."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from support.paths import ROOT

#: What docker-compose.yml requires from the environment, and what the tests pass.
SECRETS = {
    "POSTGRES_PASSWORD": "pg-secret-1",
    "POSTGRES_OWNER_PASSWORD": "pg-owner-secret-7",
    "POSTGRES_WORKER_PASSWORD": "pg-worker-secret-8",
    "POSTGRES_CONSOLE_PASSWORD": "pg-console-secret-9",
    "POSTGRES_EXPORTER_PASSWORD": "pg-exporter-secret-10",
    "REDIS_PASSWORD": "redis-secret-2",
    "SHEETSYNC_PII_KEYS": "pii-key-3",
    "FLOWER_USER": "flower-user-4",
    "FLOWER_PASSWORD": "flower-secret-5",
    "SHEETSYNC_WEB_TOKEN": "console-token-6",
}
#: Optional settings that must stay unset unless the operator sets them.
OPTIONAL = (
    "SHEETSYNC_GOOGLE_API_ENDPOINT",
    "SHEETSYNC_GOOGLE_TOKEN_URI",
    "SHEETSYNC_GOOGLE_CLIENT_ID",
    "SHEETSYNC_GOOGLE_CLIENT_SECRET",
    "SHEETSYNC_ALERT_WEBHOOK_URL",
    "SHEETSYNC_OWNER_HOOK",
    "SHEETSYNC_LOG_FORMAT",
)
DEV_FILES = ("-f", "docker-compose.yml", "-f", "docker-compose.dev.yml")
TLS_FILES = ("-f", "docker-compose.yml", "-f", "docker-compose.tls.yml")


@cache
def compose_command() -> tuple[str, ...] | None:
    docker = shutil.which("docker")
    if docker and _runs([docker, "compose", "version"]):
        return (docker, "compose")
    legacy = shutil.which("docker-compose")
    if legacy and _runs([legacy, "version"]):
        return (legacy,)
    return None


def _runs(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def compose(tmp_path: Path) -> Iterator[Compose]:
    command = compose_command()
    if command is None:
        pytest.skip(
            "neither `docker compose` nor `docker-compose` is installed (.ci/run installs "
            "Debian's docker-compose; here: apt-get install docker-compose)"
        )
    empty_env_file = tmp_path / "empty.env"
    empty_env_file.write_text("")
    yield Compose(command, empty_env_file)


class Compose:
    """``compose config`` in the repository, with only the variables a test names.

    An empty ``--env-file``: a developer's .env must not fill in what a test leaves out.
    """

    def __init__(self, command: tuple[str, ...], env_file: Path) -> None:
        self.command = command
        self.env_file = env_file

    def run(self, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        base = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
        return subprocess.run(
            [*self.command, "--env-file", str(self.env_file), *args],
            cwd=ROOT,
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def config(self, *args: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The rendered configuration, with every secret of SECRETS unless ``env``."""
        variables = dict(SECRETS if env is None else env)
        yaml = _yaml()
        if yaml is not None:
            result = self.run(*args, "config", env=variables)
            assert result.returncode == 0, result.stderr
            rendered: dict[str, Any] = yaml.safe_load(result.stdout)
            return rendered
        result = self.run(*args, "config", "--format", "json", env=variables)
        if result.returncode != 0 and "format" in result.stderr:
            pytest.skip("PyYAML is missing and this compose cannot print JSON")
        assert result.returncode == 0, result.stderr
        rendered = json.loads(result.stdout)
        return rendered


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        return None
    return yaml


def sheetsync_services(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run sheetsync (its image), the emulator aside."""
    return {
        name: service
        for name, service in config["services"].items()
        if service.get("image") == "sheetsync:local" and name != "emulator"
    }


@dataclass(frozen=True)
class Published:
    """A port a service publishes on the host: on ``host_ip`` ("" for every interface)."""

    host_ip: str
    published: str
    target: str


def published_ports(service: Mapping[str, Any]) -> list[Published]:
    """The ports a service publishes on the host, whatever the syntax."""
    ports = []
    for port in service.get("ports") or []:
        if isinstance(port, Mapping):
            ports.append(
                Published(
                    str(port.get("host_ip") or ""),
                    str(port.get("published") or ""),
                    str(port.get("target")),
                )
            )
            continue
        # "[IP:][HOST:]CONTAINER[/proto]"; an IPv6 address in brackets
        parts = str(port).split("/")[0].rsplit(":", 2)
        parts = [""] * (3 - len(parts)) + parts
        ports.append(Published(parts[0].strip("[]"), parts[1], parts[2]))
    return ports


def published_targets(service: Mapping[str, Any]) -> list[str]:
    """The container ports a service publishes on the host."""
    return [port.target for port in published_ports(service)]
