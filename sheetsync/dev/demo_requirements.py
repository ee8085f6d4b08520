"""The pins of the demo's own environment (``make demo-env``, ``.demo-venv``).

``make demo`` needs sheetsync's core and the Sheets API emulator, not the development
environment of ``make install`` (the tests, the linters, the docs, every extra). This
picks, from the lock files, the pins the demo needs, with their hashes:

- every pin that sheetsync's core dependencies (``[project.dependencies]`` of
  pyproject.toml, no extra) pull in, from requirements-runtime.lock: a pin is in when
  its ``# via`` note names sheetsync's pyproject.toml and the pin is a core dependency,
  or names a pin that is in;
- with ``--extra NAME`` (``make demo-web``: ``web``), that extra's dependencies too;
- every pin of emulator/requirements.lock, the emulator's runtime.

pip installs the result with ``--require-hashes``, as ``make install`` installs
requirements.lock: a changed file on the index fails the install, and so does a pin this
selection left out (pip then names it). It runs as a script, before any virtualenv
exists, so it uses the standard library only::

    python3 sheetsync/dev/demo_requirements.py [--extra web] > .demo-venv/requirements.txt
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The checkout's root (this file is sheetsync/dev/demo_requirements.py).
ROOT = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = "requirements-runtime.lock"
EMULATOR_LOCK = "emulator/requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: A requirement on the project's own extras: ``name[extra,...]``.
_SELF = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\[([^\]]*)\]\s*$")


class SelectionError(Exception):
    """The lock files cannot give the demo a consistent set of pins."""


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Pin:
    """One entry of a lock file: its text (the pin and its hashes) and its ``# via``."""

    name: str
    version: str
    lines: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The pin and its hashes, as the lock file has them (no comments)."""
        return "\n".join(line for line in self.lines if not line.lstrip().startswith("#"))


def parse_lock(text: str) -> dict[str, Pin]:
    """The pins of a lock file written by ``uv pip compile --generate-hashes``."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    in_via = False
    for line in text.splitlines():
        if found := _PIN.match(line):
            current = Pin(normalized(found.group(1)), found.group(2), [line])
            pins[current.name] = current
            in_via = False
            continue
        if not line.startswith(" "):  # a comment or a blank line between entries
            current, in_via = None, False
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("--hash="):
            current.lines.append(line)
        elif stripped == "# via":
            in_via = True
        elif stripped.startswith("# via "):
            current.via.append(stripped.removeprefix("# via ").strip())
        elif in_via and stripped.startswith("#   "):
            current.via.append(stripped.removeprefix("#   ").strip())
    return pins


def requirement_names(requirements: Iterable[str]) -> set[str]:
    """The distribution names of PEP 508 requirements (their extras and versions dropped)."""
    names = set()
    for requirement in requirements:
        found = _NAME.match(requirement)
        if found:
            names.add(normalized(found.group(1)))
    return names


def project_dependencies(pyproject: str, extras: Sequence[str]) -> set[str]:
    """The names of the core dependencies and of ``extras``' in pyproject.toml's text; an
    extra that names the project's own extras (``project[worker]``) brings theirs."""
    project = tomllib.loads(pyproject)["project"]
    own = normalized(project["name"])
    optional = project.get("optional-dependencies", {})
    wanted = list(project.get("dependencies", []))
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        if extra not in optional:
            raise SelectionError(f"pyproject.toml has no extra {extra!r}")
        for requirement in optional[extra]:
            found = _SELF.match(requirement)
            if found and normalized(found.group(1)) == own:
                pending += [name.strip() for name in found.group(2).split(",")]
            else:
                wanted.append(requirement)
    return requirement_names(wanted)


def pulled_in(pins: dict[str, Pin], roots: set[str]) -> set[str]:
    """``roots`` and every pin whose ``# via`` names one of them, until nothing is added."""
    missing = roots - pins.keys()
    if missing:
        raise SelectionError(
            f"{RUNTIME_LOCK} has no pin for {', '.join(sorted(missing))}: run `make lock`"
        )
    chosen = set(roots)
    while True:
        more = {
            name
            for name, pin in pins.items()
            if name not in chosen and any(normalized(parent) in chosen for parent in pin.via)
        }
        if not more:
            return chosen
        chosen |= more


def select(
    runtime_lock: str, emulator_lock: str, pyproject: str, extras: Sequence[str] = ()
) -> list[Pin]:
    """The demo's pins, sorted by name: the core's (and ``extras``') closure in the runtime
    lock, and the emulator's lock whole. A name pinned differently by the two fails."""
    runtime = parse_lock(runtime_lock)
    roots = project_dependencies(pyproject, extras)
    chosen = {name: runtime[name] for name in pulled_in(runtime, roots)}
    for name, pin in parse_lock(emulator_lock).items():
        if name in chosen and chosen[name].text != pin.text:
            raise SelectionError(
                f"{name} is pinned differently in {RUNTIME_LOCK} and {EMULATOR_LOCK}: "
                "run `make lock`"
            )
        chosen.setdefault(name, pin)
    return [chosen[name] for name in sorted(chosen)]


def render(pins: Sequence[Pin], extras: Sequence[str]) -> str:
    what = "core" + "".join(f" + [{extra}]" for extra in extras)
    header = [
        f"# The demo's pins (sheetsync's {what}, the emulator's runtime), picked from",
        f"# {RUNTIME_LOCK} and {EMULATOR_LOCK} by sheetsync/dev/demo_requirements.py.",
    ]
    return "\n".join([*header, *(pin.text for pin in pins)]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 sheetsync/dev/demo_requirements.py",
        description="Print the pins, with hashes, of the demo's own environment.",
    )
    parser.add_argument(
        "--extra", action="append", default=[], help="an extra of sheetsync to add (web)"
    )
    arguments = parser.parse_args(argv)
    try:
        pins = select(
            (ROOT / RUNTIME_LOCK).read_text(encoding="utf-8"),
            (ROOT / EMULATOR_LOCK).read_text(encoding="utf-8"),
            (ROOT / "pyproject.toml").read_text(encoding="utf-8"),
            arguments.extra,
        )
    except (SelectionError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(render(pins, arguments.extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
