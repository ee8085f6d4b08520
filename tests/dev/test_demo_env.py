"""``make demo``'s own environment (``.demo-venv``, ``make demo-env``): the pins that
sheetsync/dev/demo_requirements.py picks from the lock files are what the demo needs,
hash-checked, and no more; the demo runs with nothing else importable; and ``make demo``
uses that environment while ``make test`` keeps ``.venv``.

No test here builds the environment (that needs the package index): the pins are
checked against the dependency metadata of the distributions installed in ``.venv``,
which `make install` pins from the same lock files.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.paths import ROOT

from sheetsync.dev import demo_requirements
from sheetsync.dev.demo_data import expected_rows
from sheetsync.dev.demo_requirements import Pin, SelectionError, normalized, select

SHEETSYNC = Path(sys.executable).with_name("sheetsync")
#: What ``python3 -m venv`` puts in every environment (Python 3.11 bundles both).
VENV_BASE = frozenset({"pip", "setuptools"})
SHEET_LINE = re.compile(r"^\s+sheet \d+\s+.*\s(\d+) rows$", re.MULTILINE)


def lock_text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def picked(extras: tuple[str, ...]) -> set[str]:
    """The names ``make demo-env`` (``--extra worker``) or ``make demo-web`` would install."""
    return {
        pin.name
        for pin in select(
            lock_text("requirements-runtime.lock"),
            lock_text("emulator/requirements.lock"),
            lock_text("pyproject.toml"),
            extras,
        )
    }


def _project_requirements(pyproject: Path, extras: set[str]) -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    own = normalized(project["name"])
    found = [Requirement(text) for text in project.get("dependencies", [])]
    for extra in sorted(extras):
        for text in project["optional-dependencies"][extra]:
            requirement = Requirement(text)
            if normalized(requirement.name) == own:
                found += _project_requirements(pyproject, set(requirement.extras))
            else:
                found.append(requirement)
    return found


def installed_closure(extras: set[str]) -> set[str]:
    """Every distribution that sheetsync (with ``extras``) and the emulator need on this
    Python, by the metadata of what ``.venv`` has installed (markers evaluated)."""
    pending = [
        (requirement, frozenset(requirement.extras))
        for requirement in (
            *_project_requirements(ROOT / "pyproject.toml", extras),
            *_project_requirements(ROOT / "emulator" / "pyproject.toml", set()),
        )
    ]
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    while pending:
        requirement, wanted = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = normalized(requirement.name)
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        names.add(name)
        for text in metadata.distribution(name).requires or []:
            child = Requirement(text)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if child.marker is None or any(child.marker.evaluate(e) for e in environments):
                child.marker = None
                pending.append((child, frozenset(child.extras)))
    return names


def every_extra() -> set[str]:
    project = tomllib.loads(lock_text("pyproject.toml"))["project"]
    return set(project["optional-dependencies"]) - {"dev", "docs", "test", "all"}


@pytest.mark.parametrize(
    ("extras", "must_have", "must_not_have"),
    [
        (("worker",), {"celery", "google-api-python-client", "aiohttp"}, {"starlette"}),
        (("worker", "web"), {"starlette", "uvicorn", "jinja2", "python-multipart"}, set()),
    ],
    ids=["demo", "demo-web"],
)
def test_the_picked_pins_are_what_the_demo_needs_and_no_more(
    extras: tuple[str, ...], must_have: set[str], must_not_have: set[str]
) -> None:
    chosen = picked(extras)
    needed = installed_closure(set(extras))
    assert needed <= chosen, f"needed, not picked: {sorted(needed - chosen)}"
    # Nothing that only the other extras (metrics, postgres, flower...) or the
    # development tools bring: what .demo-venv saves over .venv.
    others = installed_closure(every_extra()) - needed
    assert not chosen & others, f"picked, not needed: {sorted(chosen & others)}"
    assert chosen.isdisjoint({"pytest", "mypy", "ruff", "mkdocs", "selenium", "uv"})
    assert must_have <= chosen
    assert not must_not_have & chosen
    assert chosen.isdisjoint({"flower", "tornado", "psycopg", "prometheus-client"})


def test_each_picked_pin_keeps_its_hashes_from_the_lock() -> None:
    runtime = demo_requirements.parse_lock(lock_text("requirements-runtime.lock"))
    emulator = demo_requirements.parse_lock(lock_text("emulator/requirements.lock"))
    pins = select(
        lock_text("requirements-runtime.lock"),
        lock_text("emulator/requirements.lock"),
        lock_text("pyproject.toml"),
        ("worker",),
    )
    for pin in pins:
        source = runtime.get(pin.name) or emulator[pin.name]
        assert pin.text == source.text
        assert pin.text.startswith(f"{source.lines[0].split(' ')[0]} \\")
        assert "--hash=sha256:" in pin.text, pin.name


def test_a_pin_missing_from_the_lock_or_pinned_twice_differently_stops_the_pick() -> None:
    pyproject = '[project]\nname = "p"\ndependencies = ["a>=1"]\n'
    lock = "a==1.0 \\\n    --hash=sha256:aa\n    # via\n    #   p (pyproject.toml)\n"
    other = "a==2.0 \\\n    --hash=sha256:bb\n    # via\n    #   e (pyproject.toml)\n"
    assert [pin.name for pin in select(lock, lock, pyproject)] == ["a"]
    with pytest.raises(SelectionError, match="a is pinned differently"):
        select(lock, other, pyproject)
    with pytest.raises(SelectionError, match="has no pin for a"):
        select("", "", pyproject)
    with pytest.raises(SelectionError, match="no extra 'web'"):
        select(lock, lock, pyproject, ("web",))


def test_a_pin_comes_in_through_the_lock_notes_of_what_pulls_it_in() -> None:
    pyproject = (
        '[project]\nname = "p"\ndependencies = ["a"]\n'
        '[project.optional-dependencies]\nx = ["p[y]"]\ny = ["c"]\n'
    )
    lock = (
        "a==1 \\\n    --hash=sha256:1\n    # via p (pyproject.toml)\n"
        "b==1 \\\n    --hash=sha256:2\n    # via\n    #   -c requirements.lock\n    #   a\n"
        "c==1 \\\n    --hash=sha256:3\n    # via p (pyproject.toml)\n"
        "d==1 \\\n    --hash=sha256:4\n    # via c\n"
    )
    assert [p.name for p in select(lock, "", pyproject)] == ["a", "b"]
    assert [p.name for p in select(lock, "", pyproject, ("x",))] == ["a", "b", "c", "d"]
    assert isinstance(select(lock, "", pyproject)[0], Pin)


def make_dry_run(target: str) -> str:
    # Under `make test` the environment says this is a sub-make (MAKELEVEL, MAKEFLAGS),
    # which would print "Entering directory" lines around the commands.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_demo_uses_its_own_hash_checked_environment_and_make_test_keeps_venv() -> None:
    demo = make_dry_run("demo")
    assert demo.splitlines()[-1] == ".demo-venv/bin/sheetsync demo"
    if ".demo-venv/.installed" not in demo:  # built already: make has nothing to do for it
        return
    assert "--require-hashes -r .demo-venv/requirements.txt" in demo
    assert "sheetsync/dev/demo_requirements.py --extra worker > .demo-venv/requirements.txt" in demo
    assert "--no-deps -e . -e ./emulator" in demo
    assert "requirements.lock " not in demo.replace("-runtime.lock", "")  # not .venv's pins
    web = make_dry_run("demo-web")
    assert web.splitlines()[-1].startswith(".demo-venv/bin/python -m sheetsync.dev.demo_web")
    assert ".venv/bin/pytest" in make_dry_run("test")


#: Put first on a Python's path, it refuses any import of a distribution outside the
#: demo's pins, in the demo's process and in the worker it starts, as .demo-venv would.
BLOCKER = """\
import importlib.abc, importlib.metadata, re, sys

ALLOWED = {allowed!r}
LOG = {log!r}
_OWNERS = importlib.metadata.packages_distributions()


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


class _OutsideTheDemosPins(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if "." in fullname or fullname in sys.stdlib_module_names:
            return None
        owners = _OWNERS.get(fullname)
        if not owners or any(_normalized(owner) in ALLOWED for owner in owners):
            return None
        with open(LOG, "a") as log:
            log.write(f"{{fullname}} ({{', '.join(owners)}})\\n")
        raise ModuleNotFoundError(f"No module named {{fullname!r}}", name=fullname)


sys.meta_path.insert(0, _OutsideTheDemosPins())
"""


@pytest.mark.slow  # the real demo: its redis-server, the emulator, a worker with beat
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not on PATH")
def test_the_demo_runs_with_nothing_but_its_pins(tmp_path: Path) -> None:
    own = {
        normalized(tomllib.loads((ROOT / path).read_text(encoding="utf-8"))["project"]["name"])
        for path in ("pyproject.toml", "emulator/pyproject.toml")
    }
    allowed = picked(("worker",)) | own | VENV_BASE
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    log = tmp_path / "refused.log"
    (blocker / "sitecustomize.py").write_text(BLOCKER.format(allowed=sorted(allowed), log=str(log)))
    workdir = tmp_path / "run"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    env["PYTHONPATH"] = str(blocker)
    # The blocker works: the console's web framework is not among the demo's pins.
    probe = subprocess.run(
        [sys.executable, "-c", "import starlette"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "No module named 'starlette'" in probe.stderr, probe.stderr
    log.unlink()
    result = subprocess.run(
        [str(SHEETSYNC), "demo"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    refused = log.read_text() if log.exists() else "(nothing)"
    worker_log = workdir / ".demo" / "worker.log"
    tail = worker_log.read_text(errors="replace")[-3000:] if worker_log.exists() else ""
    described = f"{result.stdout}\n{result.stderr}\nrefused: {refused}\nworker log:\n{tail}"
    assert result.returncode == 0, described
    assert sum(int(n) for n in SHEET_LINE.findall(result.stdout)) == expected_rows(), described
