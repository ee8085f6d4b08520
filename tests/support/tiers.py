"""The test tiers: which servers and processes a test starts, derived from what it uses.

A pytest plugin (``tests/conftest.py`` registers it). At collection it adds to every test
the markers of what it starts, so nobody has to write or remember them:

    redis     the tests' redis-server (``support.redis_dbs``), or one of its own
    emulator  the Sheets API emulator (in this process, on a thread of its own)
    worker    a Celery worker, in-process (``worker``) or processes (``worker_processes``)
    process   another process: a subprocess (the installed ``sheetsync`` script, celery,
              ``python -c``, ``make -n``...), a fork, a prefork pool
    postgres  PostgreSQL (``postgres_url``, or ``db_url`` parametrized with ``"postgres"``)
    docker    ``docker compose`` (the ``compose`` fixture)
    unit      none of these, and not ``browser``, ``chaos`` or ``slow``: ``make test-unit``

How: the fixtures a test uses (their whole closure) are looked up in
:data:`FIXTURE_MARKERS`; the test function, those fixtures' functions and every function
and class of ``tests/`` they name (followed transitively: a test's helper that runs
``subprocess.run``, a fixture that calls ``pipeline_redis_url()``; not into what those two
tables name already) are read for the names in :data:`NAME_MARKERS`. Markers written by
hand stay.

The guard: in a run that selects the unit tier (``-m`` names ``unit``: ``make test-unit``,
``pytest -m unit tests/flush``) and nothing else, a test that starts a process
(``subprocess``, ``fork``, ``posix_spawn``, ``system``: seen by an audit hook), asks for
Redis or has the emulator running fails, naming what it did: what the names above could
not see (a dynamic call, a library that spawns) is caught there, and a name added here
marks it.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import threading
import types
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support import redis_dbs
from support.paths import ROOT

#: Fixtures that start (or hand out) a server or a process.
FIXTURE_MARKERS: dict[str, str] = {
    "redis_url": "redis",
    "redis_db": "redis",
    "demo_redis_url": "redis",
    "emulator": "emulator",
    "emulator_server": "emulator",
    "worker": "worker",
    "worker_processes": "worker",
    "postgres_url": "postgres",
    "compose": "docker",
}

#: Names whose use (a call, an import) in a test, a fixture or a helper of tests/ starts
#: a server or a process.
NAME_MARKERS: dict[str, str] = {
    "subprocess": "process",
    "create_subprocess_exec": "process",
    "create_subprocess_shell": "process",
    "posix_spawn": "process",
    "fork": "process",
    "AsynPool": "process",  # a prefork pool: it forks its processes
    "redis_db_url": "redis",
    "pipeline_redis_url": "redis",
    "start_redis_server": "redis",
    "ensure_redis": "redis",
    "start_tls_redis": "redis",
    "start_tls_sentinel": "redis",
    "EmulatorServer": "emulator",
    "start_worker": "worker",
    "start_celery_worker": "worker",
    "WorkerProcesses": "worker",
    "compose_command": "docker",
    "chromium": "browser",
}

#: The markers a ``unit`` test carries none of.
NOT_UNIT = frozenset({*FIXTURE_MARKERS.values(), *NAME_MARKERS.values(), "chaos", "slow"})

_TEST_DIRS = (ROOT / "tests", ROOT / "emulator" / "tests")
_EMULATOR_THREAD = "sheets-emulator"
_SPAWN_EVENTS = frozenset(
    {"subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty"}
)


# -- the markers ----------------------------------------------------------------------------


def _ours(obj: object) -> bool:
    """A function or class defined in a module under tests/ (a test module, a conftest,
    ``support``): its code is read too."""
    name = getattr(obj, "__module__", None) or ""
    known = _MODULES_OURS.get(name)
    if known is None:
        file = getattr(sys.modules.get(name), "__file__", None)
        known = file is not None and any(Path(file).is_relative_to(d) for d in _TEST_DIRS)
        if name in sys.modules:  # a module not imported yet is asked about again
            _MODULES_OURS[name] = known
    return known


#: Whether a module (by name) is under tests/: asked tens of thousands of times a run.
_MODULES_OURS: dict[str, bool] = {}


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(obj: object) -> Iterator[types.FunctionType]:
    """The plain functions behind ``obj``: itself, or a class's methods and properties."""
    if isinstance(obj, type):
        for member in vars(obj).values():
            if isinstance(member, property):
                yield from (
                    f for f in (member.fget, member.fset) if isinstance(f, types.FunctionType)
                )
            else:
                yield from _functions(getattr(member, "__func__", member))
        return
    if callable(obj):
        try:
            obj = inspect.unwrap(obj)
        except ValueError:  # a cycle of __wrapped__
            return
    if isinstance(obj, types.FunctionType):
        yield obj


def names_used(roots: Iterable[object]) -> set[str]:
    """Every global and attribute name the code of ``roots`` uses (and the own name of
    what a global names), following the functions and classes of tests/ it names."""
    names: set[str] = set()
    seen: set[int] = set()
    todo = [f for root in roots if _ours(root) for f in _functions(root)]
    while todo:
        function = todo.pop()
        if id(function.__code__) in seen:
            continue
        seen.add(id(function.__code__))
        for code in _codes(function.__code__):
            for name in code.co_names:
                target = function.__globals__.get(name)
                # What it names under its own name too (``import X as Y``).
                own = getattr(target, "__name__", name) if target is not None else name
                names.update((name, own) if isinstance(own, str) else (name,))
                # A marked name says it all: redis_db_url starts the redis-server, not "a
                # process" (what it does inside is its own business).
                marked = name in NAME_MARKERS or own in NAME_MARKERS
                if target is not None and not marked and _ours(target):
                    todo.extend(_functions(target))
    return names


def markers_for(
    fixturenames: Iterable[str], functions: Iterable[object], params: dict[str, Any]
) -> set[str]:
    """The markers of a test that uses ``fixturenames`` (the whole closure), whose code is
    ``functions`` (the test's and its fixtures': those of tests/ are read), parametrized
    with ``params``."""
    found = {FIXTURE_MARKERS[name] for name in fixturenames if name in FIXTURE_MARKERS}
    found |= {NAME_MARKERS[name] for name in names_used(functions) if name in NAME_MARKERS}
    if params.get("db_url") == "postgres":
        found.add("postgres")
    return found


def _fixture_functions(item: pytest.Item) -> list[object]:
    """The functions of the fixtures ``item`` uses, but those of FIXTURE_MARKERS (their
    marker says what they start)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [
        definition.func
        for name in getattr(item, "fixturenames", ())
        if name not in FIXTURE_MARKERS
        for definition in info.name2fixturedefs.get(name, ())
    ]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        functions = [getattr(item, "obj", None), *_fixture_functions(item)]
        derived = markers_for(
            getattr(item, "fixturenames", ()),
            [f for f in functions if f is not None],
            dict(callspec.params) if callspec else {},
        )
        present = {mark.name for mark in item.iter_markers()}
        for name in sorted(derived - present):
            item.add_marker(name)
        if not (derived | present) & NOT_UNIT:
            item.add_marker("unit")


# -- the guard ------------------------------------------------------------------------------


class _Guard:
    active = False
    events: list[str] = []
    redis_uses = 0
    emulators_seen: set[int] = set()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _Guard.active or event not in _SPAWN_EVENTS:
        return
    if event == "subprocess.Popen":
        program, argv = args[0], list(args[1] or ())
        _Guard.events.append(f"ran {' '.join(map(str, [program, *argv[1:8]]))[:200]}")
    else:
        _Guard.events.append(f"started a process ({event})")


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or not session.items:
        return
    chosen = re.search(r"\bunit\b", session.config.option.markexpr or "")
    if chosen and all(item.get_closest_marker("unit") for item in session.items):
        if not _Guard.active:
            sys.addaudithook(_audit)  # for the life of the process: only in unit runs
        _Guard.active = True
        _Guard.redis_uses = len(redis_dbs.uses)


def _what_happened() -> list[str]:
    """What the unit tier forbids, since the last look."""
    found, _Guard.events = _Guard.events, []
    if len(redis_dbs.uses) > _Guard.redis_uses:
        found.append("asked for Redis (support.redis_dbs)")
        _Guard.redis_uses = len(redis_dbs.uses)
    for thread in threading.enumerate():
        if thread.name == _EMULATOR_THREAD and thread.ident not in _Guard.emulators_seen:
            _Guard.emulators_seen.add(thread.ident or 0)
            found.append("has the emulator running")
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if _Guard.active:
        found = _what_happened()
        if found and report.outcome != "failed":
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} is in the unit tier (no server, no process) but "
                f"{'; '.join(dict.fromkeys(found))} (in {call.when}). support/tiers.py "
                "derives the markers from the fixtures and names a test uses: add what "
                "this test uses to FIXTURE_MARKERS or NAME_MARKERS."
            )
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """After a unit run, no redis-server was started by this process."""
    if _Guard.active and redis_dbs.started:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        sys.stderr.write(f"unit tier: pid {os.getpid()} started redis-server {redis_dbs.started}\n")
