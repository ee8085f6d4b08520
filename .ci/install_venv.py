"""The install test in two fresh venvs: the web app's (the core wheel alone: the slim
install, then the emulator beside it) and the workers' (the wheel with every extra and
the emulator); the minimal integration runs its web app side in the first, its worker,
console, exporter and Flower in the second (see install_test.py)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from install_support import (
    ROOT,
    InstallTestError,
    attempt,
    background,
    free_port,
    run,
    wait_for_http,
)

#: Packages only an extra (or development) may bring: the workers' stack (Celery, Google's
#: client, the command line's libraries), the console's, the exporter's, PostgreSQL's,
#: Flower's, the emulator's and the browser tests'.
NOT_IN_CORE = frozenset(
    {
        "celery",
        "billiard",
        "google-api-python-client",
        "google-auth",
        "google-auth-httplib2",
        "httplib2",
        "orjson",
        "typer",
        "rich",
        "click",
        "starlette",
        "uvicorn",
        "jinja2",
        "python-multipart",
        "prometheus-client",
        "psycopg",
        "psycopg-binary",
        "flower",
        "tornado",
        "aiohttp",
        "selenium",
    }
)
#: Each optional part without its extra (argv, extra variables, the extra): it must stop
#: with exactly ``error: <what>: needs the [<extra>] extra:
#: pip install 'sheetsync-stream[<extra>]'``.
MISSING_EXTRAS: list[tuple[list[str], dict[str, str], str, str]] = [
    (["sheetsync", "status"], {}, "sheetsync status", "worker"),
    (["sheetsync", "dlq", "list"], {}, "sheetsync dlq", "worker"),
    (["sheetsync", "web"], {}, "sheetsync web", "web"),
    (["sheetsync", "metrics"], {}, "sheetsync metrics", "metrics"),
    (["python", "-m", "sheetsync.celery.flower"], {}, "sheetsync flower", "flower"),
    (
        ["sheetsync", "db", "upgrade"],
        {"SHEETSYNC_DATABASE_URL": "postgresql://sheetsync@127.0.0.1:5432/sheetsync"},
        "PostgreSQL (SHEETSYNC_DATABASE_URL)",
        "postgres",
    ),
]


@dataclass(frozen=True)
class Venv:
    path: Path
    #: requirements.lock's pins, as constraints.
    pins: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def env(self, **variables: str) -> dict[str, str]:
        """This process's environment without settings or another venv, bin/ first."""
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("SHEETSYNC_") and name not in ("VIRTUAL_ENV", "PYTHONPATH")
        }
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return {**env, **variables}

    def install(self, *requirements: str) -> None:
        """``pip install`` as a user runs it (this machine's pip configuration, its
        index and cache), the versions pinned by requirements.lock."""
        run([self.python, "-m", "pip", "install", "--quiet", "-c", self.pins, *requirements])

    def packages(self) -> set[str]:
        listed = run([self.python, "-m", "pip", "list", "--format=json"]).stdout
        return {re.sub(r"[-_.]+", "-", entry["name"]).lower() for entry in json.loads(listed)}

    def size(self) -> int:
        return sum(path.stat().st_size for path in self.path.joinpath("lib").rglob("*"))


def new_venv(python: Path, path: Path, pins: Path) -> Venv:
    run([python, "-m", "venv", path])
    return Venv(path, pins)


def pins_without_hashes(work: Path) -> Path:
    """requirements.lock's pins without their hashes: pip takes hashed constraints for
    hash-checking mode, which a wheel built here cannot satisfy."""
    path = work / "constraints.txt"
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pins = [line.rstrip(" \\") for line in lines if line[:1].isalnum()]
    path.write_text("\n".join(pins) + "\n")
    return path


def check_core(venv: Venv, wheel: Path, version: str) -> str:
    """Install the core wheel alone and check it; returns the figure (packages, MB)."""
    before, size_before = venv.packages(), venv.size()
    venv.install(str(wheel))
    added = venv.packages() - before
    if added & NOT_IN_CORE:
        raise InstallTestError(
            f"the core installed packages of extras: {sorted(added & NOT_IN_CORE)}"
        )
    megabytes = (venv.size() - size_before) / 1e6
    env = venv.env()
    shown = run(["sheetsync", "--version"], env=env, cwd=venv.path).stdout
    if shown != f"sheetsync {version}\n":
        raise InstallTestError(f"sheetsync --version printed {shown!r}")
    probe = "import sheetsync; print(sheetsync.__version__, sheetsync.__file__)"
    module_version, module_file = run(
        ["python", "-c", probe], env=env, cwd=venv.path
    ).stdout.split()
    if module_version != version or not Path(module_file).is_relative_to(venv.path):
        raise InstallTestError(f"sheetsync {module_version} was imported from {module_file}")
    database = f"sqlite:///{venv.path / 'slim.db'}"
    upgraded = run(["sheetsync", "db", "upgrade"], env=venv.env(SHEETSYNC_DATABASE_URL=database))
    if "sqlite" not in upgraded.stdout:
        raise InstallTestError(f"sheetsync db upgrade printed {upgraded.stdout!r}")
    for argv, variables, what, extra in MISSING_EXTRAS:
        result = attempt(argv, env=venv.env(**variables), cwd=venv.path)
        line = f"error: {what}: needs the [{extra}] extra: pip install 'sheetsync-stream[{extra}]'"
        if result.returncode != 1 or result.stderr.splitlines() != [line]:
            raise InstallTestError(
                f"{' '.join(argv)} without [{extra}]: exit {result.returncode}, "
                f"stderr {result.stderr!r}, not the one line {line!r}"
            )
    return f"{len(added)} packages, {megabytes:.0f} MB"


def with_extras(wheel: Path) -> list[str]:
    """The wheel with every production extra, and the emulator (its own distribution,
    emulator/, installed from the checkout)."""
    return [f"sheetsync-stream[all] @ {wheel.as_uri()}", str(ROOT / "emulator")]


def check_integration(web_app: Venv, workers: Venv, wheel: Path) -> None:
    """README.md's minimal integration: its web app side (examples/minimal.py, copied
    to a directory of its own, and `sheetsync db upgrade`) from the slim venv with the
    emulator beside it, its worker from the workers' venv; then the console, the
    exporter and Flower over HTTP."""
    web_app.install(str(ROOT / "emulator"))
    workers.install(*with_extras(wheel))
    home = web_app.path / "app"
    home.mkdir()
    shutil.copy(ROOT / "examples" / "minimal.py", home / "minimal.py")
    redis_port, emulator_port = free_port(), free_port()
    emulator = f"http://127.0.0.1:{emulator_port}"
    keys = run(["sheetsync", "keys", "generate"], env=workers.env(), cwd=home).stdout.strip()
    settings = {
        "SHEETSYNC_DATABASE_URL": f"sqlite:///{home / 'example.db'}",
        "SHEETSYNC_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "SHEETSYNC_PII_KEYS": keys,
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator,
        "SHEETSYNC_GOOGLE_TOKEN_URI": f"{emulator}/token",
        "SHEETSYNC_GOOGLE_CLIENT_ID": "dev",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "dev",
        "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
        "SHEETSYNC_FLUSH_DELAY_S": "1",
    }
    app_env, env = web_app.env(**settings), workers.env(**settings)
    redis = ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""]
    redis += ["--appendonly", "no", "--dir", str(home)]
    worker = ["celery", "-A", "sheetsync.celery", "worker", "-B", "--loglevel=WARNING"]
    with (
        background(redis, env, home, "redis"),
        background(
            ["sheetsync", "emulator", "--port", str(emulator_port)], env, home, "emulator"
        ) as emulator_log,
    ):
        run(["sheetsync", "db", "upgrade"], env=app_env, cwd=home)
        wait_for_http(f"{emulator}/_emulator/health", "the emulator", emulator_log)
        with background(worker, env, home, "worker") as worker_log:
            result = attempt(["python", "minimal.py"], env=app_env, cwd=home)
            if result.returncode != 0 or " is in spreadsheet " not in result.stdout:
                output = result.stdout + result.stderr
                raise InstallTestError(
                    f"examples/minimal.py (the slim venv) exited {result.returncode}:\n"
                    f"{output}\nthe worker's log:\n{worker_log.read_text(errors='replace')}"
                )
        check_servers(home, env)


def check_servers(home: Path, env: dict[str, str]) -> None:
    """The console serves a page and its script, the exporter its metrics, Flower its
    health check (all on loopback, from the wheel's files)."""
    web, metrics, flower = free_port(), free_port(), free_port()
    flower_env = {**env, "FLOWER_BASIC_AUTH": f"install:{secrets.token_hex(16)}"}  # 32 characters
    flower_argv = ["python", "-m", "sheetsync.celery.flower", f"--port={flower}"]
    with (
        background(["sheetsync", "web", "--port", str(web)], env, home, "web") as web_log,
        background(
            ["sheetsync", "metrics", "--port", str(metrics)], env, home, "metrics"
        ) as metrics_log,
        background([*flower_argv, "--address=127.0.0.1"], flower_env, home, "flower") as flower_log,
    ):
        page = wait_for_http(f"http://127.0.0.1:{web}/", "the console", web_log)
        script = wait_for_http(f"http://127.0.0.1:{web}/static/console.js", "the console", web_log)
        scraped = wait_for_http(f"http://127.0.0.1:{metrics}/metrics", "the exporter", metrics_log)
        health = wait_for_http(f"http://127.0.0.1:{flower}/healthcheck", "Flower", flower_log)
    if b"console.js" not in page or not script.strip():
        raise InstallTestError("the console's page or its script is not what the wheel ships")
    if b"sheetsync_" not in scraped or health != b"OK":
        raise InstallTestError("the exporter or Flower answered something else")


def check_python(python: Path, work: Path, wheel: Path, version: str) -> str:
    """Both steps in fresh venvs of ``python``; returns the figures and times."""
    pins = pins_without_hashes(work)
    name = python.parent.parent.name
    web_app = new_venv(python, work / f"venv-{name}-web-app", pins)
    started = time.monotonic()
    figure = check_core(web_app, wheel, version)
    core_s = time.monotonic() - started
    workers = new_venv(python, work / f"venv-{name}-workers", pins)
    check_integration(web_app, workers, wheel)
    total_s = time.monotonic() - started
    return f"core {figure} ({core_s:.0f} s with its checks); {total_s:.0f} s in all"
