"""The install test: sheetsync as a user gets it, from its wheel, outside the repository.

1. Builds the sdist and, from it, the wheel (``python -m build``); checks what each
   ships (the wheel: every file of the package git tracks, its metadata, and nothing
   else: no tests, benchmarks, examples or top-level ``tasks``; the sdist: none of the
   tests) and that ``twine check --strict`` passes (the page a package index shows).
2. For every CPython >= 3.11 the machine has (pyenv's; ``--python 3.12`` for one), in a
   fresh venv under a temporary directory (install_venv.py):
   - the core wheel alone: none of the extras' packages come with it (the figure:
     packages and MB); ``sheetsync --version`` and ``sheetsync.__version__``; the
     console, the exporter, Flower and a PostgreSQL URL each stop with the one line that
     names the ``pip install`` to run;
   - the wheel with ``[all]`` and the emulator: README.md's minimal integration against
     a redis-server of its own (``sheetsync db upgrade``, ``sheetsync emulator``,
     ``celery -A sheetsync.celery worker -B``, ``python minimal.py``) lands its row;
     then the console, the exporter and Flower answer over HTTP.

Installs are ``pip install`` (this machine's pip configuration: its index, mirror and
cache), resolved against the versions requirements.lock pins, given as constraints.
Exits 1 on the first failure, naming it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

from install_support import ROOT, InstallTestError, log, run
from install_venv import NOT_IN_CORE, check_python, new_venv, pins_without_hashes

MIN_VERSION = (3, 11)
#: The distribution's name ("sheetsync" on PyPI is another project's), and its files'.
DISTRIBUTION = "sheetsync-stream"
DIST_FILE = "sheetsync_stream"
#: Top-level entries of an sdist that would be tests or development files.
NOT_IN_SDIST = ("tests", "bench", "examples", "tasks", "docs", ".ci", "celeryconfig.py")


def source_version() -> str:
    """``__version__`` as sheetsync/__init__.py writes it (the one source)."""
    tree = ast.parse((ROOT / "sheetsync" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__version__" for target in node.targets
        ):
            return str(ast.literal_eval(node.value))
    raise InstallTestError("sheetsync/__init__.py defines no __version__")


def interpreters(wanted: Sequence[str]) -> dict[str, Path]:
    """``{"3.12": path}``: the newest CPython of each minor version >= 3.11 pyenv holds
    (this interpreter without pyenv), only those ``wanted`` if any are."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(root.glob("*/bin/python3")) if root.is_dir() else []
    probe = "import sys, json; print(json.dumps([sys.implementation.name, sys.version_info[:3]]))"
    found: dict[str, tuple[tuple[int, ...], Path]] = {}
    for path in candidates or [Path(sys.executable)]:
        try:
            name, version = json.loads(run([path, "-c", probe]).stdout)
        except InstallTestError:  # a broken pyenv build: not a candidate
            continue
        minor = f"{version[0]}.{version[1]}"
        if name != "cpython" or tuple(version[:2]) < MIN_VERSION:
            continue
        if minor not in found or tuple(version) > found[minor][0]:
            found[minor] = (tuple(version), path)
    chosen = {minor: path for minor, (_, path) in sorted(found.items(), key=_minor_order)}
    chosen = {minor: path for minor, path in chosen.items() if not wanted or minor in wanted}
    if not chosen:
        raise InstallTestError(f"no CPython >= 3.11 found (wanted: {', '.join(wanted) or 'any'})")
    return chosen


def _minor_order(item: tuple[str, object]) -> tuple[int, ...]:
    return tuple(int(part) for part in item[0].split("."))


def build(work: Path) -> tuple[Path, Path]:
    """The sdist, and the wheel built from it, in ``work/dist``."""
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT])
    [sdist] = dist.glob(f"{DIST_FILE}-*.tar.gz")
    [wheel] = dist.glob(f"{DIST_FILE}-*.whl")
    run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel])
    return sdist, wheel


def check_wheel(wheel: Path, version: str, pythons: Sequence[str]) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"{DIST_FILE}-{version}.dist-info/METADATA").decode()
    stray = {name.split("/")[0] for name in names} - {
        "sheetsync",
        f"{DIST_FILE}-{version}.dist-info",
    }
    if stray:
        raise InstallTestError(f"the wheel ships more than the package: {sorted(stray)}")
    tracked = run(["git", "ls-files", "sheetsync"], cwd=ROOT).stdout.split()
    missing = sorted(set(tracked) - set(names))
    if missing:
        raise InstallTestError(f"the wheel lacks files of the package: {missing}")
    headers = metadata.split("\n\n")[0]
    fields = set(re.findall(r"^([A-Za-z-]+): (.*)$", headers, re.MULTILINE))
    wanted = {("Name", DISTRIBUTION), ("Version", version), ("License-Expression", "MIT")}
    wanted.add(("Requires-Python", ">=3.11"))
    wanted |= {("Classifier", f"Programming Language :: Python :: {minor}") for minor in pythons}
    if wanted - fields:
        raise InstallTestError(f"the wheel's METADATA lacks {sorted(wanted - fields)}")
    log(f"wheel: {len(names)} files (sheetsync/ and its dist-info), version {version}")


def check_sdist(sdist: Path, version: str) -> None:
    with tarfile.open(sdist) as archive:
        names = [name.removeprefix(f"{DIST_FILE}-{version}/") for name in archive.getnames()]
    shipped = sorted(name for name in names if name.split("/")[0] in NOT_IN_SDIST)
    if shipped:
        raise InstallTestError(f"the sdist ships tests or development files: {shipped[:10]}")
    for needed in ("pyproject.toml", "README.md", "LICENSE", "sheetsync/__init__.py"):
        if needed not in names:
            raise InstallTestError(f"the sdist lacks {needed}")
    log(f"sdist: {len(names)} entries, none of the tests")


def readme_install_lines() -> list[str]:
    """The README's install-from-a-clone commands (the ```sh block after "Until its
    first release"), as written: what a user runs before the first release."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text.split("Until its first release", 1)[1]
    block = after.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line.startswith("pip install ")]


def check_readme_install(python: Path, work: Path) -> str:
    """The README's own commands in fresh venvs, in the checkout: ``pip install .`` gives
    the slim web-app install (none of the workers' stack), ``pip install ./emulator``
    the emulator; ``'.[all]'`` is the wheel's [all], checked on every Python below."""
    lines = readme_install_lines()
    wanted = {"pip install .": "slim", "pip install ./emulator": "emulator"}
    if not set(wanted) <= set(lines):
        raise InstallTestError(
            f"README.md's install block lacks {sorted(set(wanted) - set(lines))}"
        )
    figures = []
    for line, kind in wanted.items():
        venv = new_venv(python, work / f"readme-{kind}", pins_without_hashes(work))
        before, size_before = venv.packages(), venv.size()
        env = venv.env()
        run([venv.python, "-m", *line.split(), "--quiet", "-c", venv.pins], env=env, cwd=ROOT)
        added = venv.packages() - before
        if kind == "slim":
            if added & NOT_IN_CORE:
                raise InstallTestError(f"`{line}` installed {sorted(added & NOT_IN_CORE)}")
            run(["sheetsync", "--version"], env=env, cwd=venv.path)
        else:
            run(["sheets-emulator", "--version"], env=env, cwd=venv.path)
        megabytes = (venv.size() - size_before) / 1e6
        figures.append(f"`{line}`: {len(added)} packages, {megabytes:.0f} MB")
    return "; ".join(figures)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sheetsync from its wheel, outside the repo")
    parser.add_argument("--python", action="append", default=[], metavar="X.Y", help="only")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args(argv)
    if shutil.which("redis-server") is None:
        print("install-test: needs redis-server on PATH (apt-get install redis-server)")
        return 1
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="sheetsync-install-test-"))
    try:
        pythons = interpreters(options.python)
        version = source_version()
        sdist, wheel = build(work)
        check_sdist(sdist, version)
        check_wheel(wheel, version, list(pythons))
        log(f"built and checked in {time.monotonic() - started:.0f} s")
        first = next(iter(pythons.values()))
        log(f"README's install from a clone: {check_readme_install(first, work)}")
        for minor, python in pythons.items():
            log(f"CPython {minor}: {check_python(python, work, wheel, version)}")
    except InstallTestError as exc:
        print(f"install-test: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if options.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log(f"passed on CPython {', '.join(pythons)} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
