"""The optional parts: each one whose extra is missing stops with one line naming the
``pip install`` to run. Here the extra's modules are hidden from a subprocess (every
extra is installed in the development venv); ``.ci/install_test.py`` runs the same
commands in a venv that holds the core wheel alone."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.paths import ROOT

from sheetsync import __version__, extras
from sheetsync.settings import NON_SETTING_VARIABLES

#: Seconds one command may take (it stops before connecting to anything).
COMMAND_TIMEOUT_S = 60
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

#: (what runs, the extra whose modules are hidden, the extra variables, the line).
CASES = [
    (
        "from sheetsync.cli import main; sys.exit(main(['web']))",
        "web",
        {},
        "error: sheetsync web: needs the [web] extra: pip install 'sheetsync-stream[web]'",
    ),
    (
        "from sheetsync.cli import main; sys.exit(main(['metrics']))",
        "metrics",
        {},
        "error: sheetsync metrics: needs the [metrics] extra: "
        "pip install 'sheetsync-stream[metrics]'",
    ),
    (
        "from sheetsync.celery.flower import main; main(['--port=0'])",
        "flower",
        {},
        "error: sheetsync flower: needs the [flower] extra: pip install 'sheetsync-stream[flower]'",
    ),
    (
        "from sheetsync.cli import main; sys.exit(main(['status']))",
        "worker",
        {},
        "error: sheetsync status: needs the [worker] extra: pip install 'sheetsync-stream[worker]'",
    ),
    (
        "from sheetsync.cli import main; sys.exit(main(['dlq', 'list', '--json']))",
        "worker",
        {},
        "error: sheetsync dlq: needs the [worker] extra: pip install 'sheetsync-stream[worker]'",
    ),
    (
        "from sheetsync.celery.flower import main; main(['--port=0'])",
        "worker",
        {},
        "error: sheetsync flower: needs the [flower] extra: pip install 'sheetsync-stream[flower]'",
    ),
    (
        "from sheetsync.cli import main; sys.exit(main(['db', 'upgrade']))",
        "postgres",
        {"SHEETSYNC_DATABASE_URL": POSTGRES_URL},
        "error: PostgreSQL (SHEETSYNC_DATABASE_URL): needs the [postgres] extra: "
        "pip install 'sheetsync-stream[postgres]'",
    ),
    (
        # The web app's start-up check: before, it passed, and the first request failed.
        "from sheetsync import check_settings\n"
        "try: check_settings()\n"
        "except Exception as e: print(f'error: {e}', file=sys.stderr); sys.exit(1)",
        "postgres",
        {"SHEETSYNC_DATABASE_URL": POSTGRES_URL},
        "error: PostgreSQL (SHEETSYNC_DATABASE_URL): needs the [postgres] extra: "
        "pip install 'sheetsync-stream[postgres]'",
    ),
]


def _environment(extra_variables: dict[str, str]) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SHEETSYNC_") or name.startswith(NON_SETTING_VARIABLES)
    }
    return {**env, **extra_variables}


@pytest.mark.parametrize(
    ("code", "extra", "variables", "line"), CASES, ids=[f"{n}-{c[1]}" for n, c in enumerate(CASES)]
)
def test_a_missing_extra_is_one_line_naming_the_pip_install(
    code: str, extra: extras.Extra, variables: dict[str, str], line: str
) -> None:
    # A module set to None in sys.modules is one Python cannot import or find.
    hide = f"import sys\nfor name in {extras.MODULES[extra]!r}: sys.modules[name] = None\n"
    result = subprocess.run(
        [sys.executable, "-c", hide + code],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env=_environment(variables),
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [line]


def test_with_the_extra_installed_nothing_is_missing() -> None:
    for extra in extras.MODULES:
        assert extras.missing_modules(extra) == [], extra
        extras.require(extra, "the development venv")


def _installed_closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` install here, their own requirements included
    (markers are evaluated as pip would, with no extra of theirs asked for)."""
    seen: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or name == "sheetsync-stream":
            continue
        seen.add(name)
        for text in metadata.requires(name) or []:
            child = Requirement(text)
            wanted = requirement.extras or {""}
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in wanted):
                pending.append(child)
    return seen


def test_each_extra_installs_the_modules_sheetsync_checks_for_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    providers = metadata.packages_distributions()
    assert set(extras.MODULES) <= set(optional)
    for extra, modules in extras.MODULES.items():
        installed = _installed_closure(optional[extra])
        for module in modules:
            assert {canonicalize_name(d) for d in providers[module]} & installed, (extra, module)
    # What the core installs holds none of them: each is an extra's alone.
    core = _installed_closure(project["dependencies"])
    for extra, modules in extras.MODULES.items():
        for module in modules:
            assert not {canonicalize_name(d) for d in providers[module]} & core, (extra, module)


def test_a_missing_module_an_extra_provides_names_that_extra() -> None:
    from sheetsync.ops.explain import describe

    error = ModuleNotFoundError("No module named 'prometheus_client'", name="prometheus_client")
    assert describe(error) == (
        "the Python module prometheus_client is not installed: it comes with the [metrics] "
        "extra: pip install 'sheetsync-stream[metrics]'"
    )
    error = ModuleNotFoundError("No module named 'kombu'", name="kombu")
    assert describe(error) == (
        "the Python module kombu is not installed: reinstall sheetsync-stream with its dependencies"
    )


def test_the_slim_install_migrates_and_prints_its_version(tmp_path) -> None:
    """Without the [worker] extra (no Celery, Google's client, Typer or Rich), the web
    app's deploy still runs `sheetsync db upgrade` and `sheetsync --version`."""
    hide = f"import sys\nfor name in {extras.MODULES['worker']!r}: sys.modules[name] = None\n"
    database = f"sqlite:///{tmp_path / 'app.db'}"
    code = (
        "from sheetsync.cli import main\n"
        "assert main(['--version']) == 0\n"
        "sys.exit(main(['db', 'upgrade']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide + code],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env=_environment({"SHEETSYNC_DATABASE_URL": database}),
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [version, upgraded] = result.stdout.splitlines()
    assert version == f"sheetsync {__version__}"
    assert upgraded.startswith(f"{database}: created the schema at revision ")
    assert (tmp_path / "app.db").exists()
