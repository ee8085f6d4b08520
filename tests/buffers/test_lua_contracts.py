"""Every Lua script's header agrees with its Python declaration, in names and order.

A script's header is the block at its top that names its KEYS and ARGV: one
``local name = ... KEYS[i] ...`` (or ``ARGV[i]``) line per fixed entry, in order, and
``-- ARGV[i..] each of <field>: a, b`` or ``-- ARGV[i..] <field>: ...`` lines for the
repeated ones (a group per item, every remaining value). Its Python declaration
(:mod:`sheetsync.lua.contract`) names the same. The files are found on disk, every
one of them, and the declarations beside them, so a new script cannot go unchecked.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

import sheetsync
from sheetsync.buffers.scripts import Claim, Enqueue, EnqueueTarget, Sent, SentTask
from sheetsync.lua.contract import Arg, Entry, Key, Rest, Script, layout, script_file

PACKAGE_ROOT = Path(sheetsync.__file__).parent
PRELUDE = PACKAGE_ROOT / "lua" / "prelude.lua"

FIXED = re.compile(r"^local (\w+) = .*?\b(KEYS|ARGV)\[(\d+)\]")
REPEATED = re.compile(r"^-- (KEYS|ARGV)\[([^\]]+)\.\.\] (?:each of (\w+): (\w+(?:, \w+)*)|(\w+):)")
#: A KEYS or ARGV entry read by its position: only the header may do that.
BY_POSITION = re.compile(r"\b(KEYS|ARGV)\[\d+\]")


@dataclass(frozen=True)
class Header:
    keys: tuple[Entry, ...]
    argv: tuple[Entry, ...]

    def names(self) -> list[str]:
        """Readable, in order: ``KEYS job``, ``ARGV targets[base, queue]...``, ``ARGV ids...``."""
        return [
            f"{side} {entry.name}"
            + (f"[{', '.join(entry.members)}]" if entry.members else "")
            + ("..." if entry.repeated else "")
            for side, entries in (("KEYS", self.keys), ("ARGV", self.argv))
            for entry in entries
        ]


def parse_header(text: str) -> Header:
    """The KEYS and ARGV a script's header names (AssertionError when it is malformed)."""
    sides: dict[str, list[Entry]] = {"KEYS": [], "ARGV": []}
    fixed: dict[str, int] = {"KEYS": 0, "ARGV": 0}
    lines = text.splitlines()
    declared = [n for n, line in enumerate(lines) if FIXED.match(line) or REPEATED.match(line)]
    assert declared, "no header: no line names a KEYS or ARGV entry"
    for number in range(declared[0], declared[-1] + 1):
        line = lines[number]
        if fixed_entry := FIXED.match(line):
            name, side, position = fixed_entry.groups()
            assert not any(entry.repeated for entry in sides[side]), (
                f"line {number + 1}: {side}[{position}] follows a repeated entry"
            )
            fixed[side] += 1
            assert int(position) == fixed[side], (
                f"line {number + 1}: {name} is {side}[{position}], expected {side}[{fixed[side]}]"
            )
            sides[side].append(Entry(name))
        elif repeated := REPEATED.match(line):
            side, start, group, members, rest = repeated.groups()
            if start.isdigit():
                assert int(start) == fixed[side] + 1, f"line {number + 1}: {side}[{start}..]"
            if group:
                sides[side].append(Entry(group, repeated=True, members=tuple(members.split(", "))))
            else:
                sides[side].append(Entry(rest, repeated=True))
        else:
            assert line.lstrip().startswith("--"), (
                f"line {number + 1} is code inside the header: {line!r}"
            )
    for number, line in enumerate(lines):
        if number not in declared and BY_POSITION.search(line):
            raise AssertionError(f"line {number + 1} reads KEYS/ARGV by position: {line!r}")
    return Header(tuple(sides["KEYS"]), tuple(sides["ARGV"]))


def declared(kind: type[Script[Any]]) -> Header:
    contract = layout(kind)
    return Header(contract.keys, contract.argv)


def lua_files() -> list[Path]:
    return sorted(path for path in PACKAGE_ROOT.rglob("*.lua") if path != PRELUDE)


def declarations() -> list[type[Script[Any]]]:
    """Every script declared in sheetsync, after importing every module beside a
    ``lua/`` folder."""
    for folder in {path.parent.parent for path in lua_files()}:
        package = ".".join(folder.relative_to(PACKAGE_ROOT.parent).parts)
        for module in pkgutil.iter_modules([str(folder)]):
            importlib.import_module(f"{package}.{module.name}")
    found: list[type[Script[Any]]] = []
    pending = list(Script.__subclasses__())
    while pending:
        kind = pending.pop()
        pending += kind.__subclasses__()
        if not kind.__module__.startswith("sheetsync."):
            continue
        # The module's own class: @dataclass(slots=True) leaves a first one behind.
        if getattr(sys.modules[kind.__module__], kind.__qualname__, None) is kind:
            found.append(kind)
    return sorted(found, key=lambda kind: kind.SCRIPT)


def test_every_lua_file_has_one_declaration_and_every_declaration_a_file():
    files = {Path(str(script_file(kind))): kind for kind in declarations()}
    assert len(files) == len(declarations()), "two declarations name one file"
    assert sorted(files) == lua_files()
    assert len(files) == 16, sorted(path.name for path in files)


@pytest.mark.parametrize("kind", declarations(), ids=lambda kind: kind.SCRIPT)
def test_the_header_names_what_the_declaration_does_in_order(kind):
    header = parse_header(script_file(kind).read_text("utf-8"))
    assert declared(kind).names() == header.names()
    assert declared(kind) == header


def test_a_script_lives_beside_its_caller():
    places = {kind.SCRIPT: str(script_file(kind)) for kind in declarations()}
    assert places["rate_take"].endswith("sheetsync/sheets/lua/rate_take.lua")
    assert places["heartbeat"].endswith("sheetsync/ops/lua/heartbeat.lua")
    assert places["claim"].endswith("sheetsync/buffers/lua/claim.lua")


def test_the_architecture_lists_every_script():
    text = (PACKAGE_ROOT.parent / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    section = text.split("## The job and its scripts", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE))
    assert listed == {kind.SCRIPT for kind in declarations()}


# -- the check itself fails when the two disagree -----------------------------------------

CLAIM_HEADER = """\
-- A flush task starts.
local job = KEYS[1]                -- the job
local due_index = KEYS[2]          -- the due index
local token = ARGV[1]              -- the task's token
local lease_ms = tonumber(ARGV[2]) -- lease (ms)
local base = ARGV[3]               -- buffer base
local now = now_ms()
"""


def test_the_claim_header_above_is_the_real_one():
    assert parse_header(CLAIM_HEADER) == parse_header(script_file(Claim).read_text("utf-8"))


def test_two_argv_entries_swapped_in_the_lua_header_disagree():
    swapped = CLAIM_HEADER.replace("local token = ARGV[1]", "local base = ARGV[1]").replace(
        "local base = ARGV[3]", "local token = ARGV[3]"
    )
    assert parse_header(swapped) != declared(Claim)
    assert parse_header(CLAIM_HEADER) == declared(Claim)


def test_two_fields_swapped_in_the_declaration_disagree():
    @dataclass(slots=True, kw_only=True)
    class SwappedClaim(Script[None]):
        SCRIPT: ClassVar[str] = "claim"
        job: Key
        due_index: Key
        lease_ms: Arg[int]
        token: Arg[str]
        base: Arg[str]

        def decode(self, reply: Any) -> None:
            return None

    assert declared(SwappedClaim) != parse_header(CLAIM_HEADER)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (CLAIM_HEADER.replace("ARGV[3]", "ARGV[4]"), "expected ARGV\\[3\\]"),
        (CLAIM_HEADER.replace("-- lease (ms)\n", "-- lease (ms)\nlocal x = 1\n"), "code inside"),
        (CLAIM_HEADER + "redis.call('GET', KEYS[1])\n", "by position"),
        ("return 1\n", "no header"),
    ],
    ids=["renumbered", "code-inside", "by-position", "no-header"],
)
def test_a_malformed_header_is_refused(bad, message):
    with pytest.raises(AssertionError, match=message):
        parse_header(bad)


def test_repeated_entries_read_as_groups_and_rests():
    enqueue = parse_header(script_file(Enqueue).read_text("utf-8"))
    assert enqueue.keys[-1] == Entry("targets", True, ("buffer", "job", "sheet", "times"))
    assert enqueue.argv[-2:] == (Entry("targets", True, ("base", "queue")), Entry("ids", True))
    assert parse_header(script_file(Sent).read_text("utf-8")) == Header(
        (Entry("tasks", True, ("job",)),), (Entry("tasks", True, ("token",)),)
    )


# -- the Python side: by name, flattened in order -----------------------------------------


def claim(**names: Any) -> Claim:
    return Claim(**names)


CLAIM = {"job": "j", "due_index": "d", "token": "t", "lease_ms": 5, "base": "b"}


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            {name: value for name, value in CLAIM.items() if name != "base"},
            "missing 1 required keyword-only argument: 'base'",
        ),
        ({**CLAIM, "epoch": "1"}, "unexpected keyword argument 'epoch'"),
    ],
    ids=["missing", "unknown"],
)
def test_a_call_with_a_missing_or_unknown_name_is_refused(names, message):
    with pytest.raises(TypeError, match=message):
        claim(**names)


def test_a_call_by_position_is_refused():
    with pytest.raises(TypeError, match="positional"):
        Claim("j", "d", "t", 5, "b")  # type: ignore[misc]


def test_a_call_flattens_into_keys_then_args_in_declared_order():
    assert claim(**CLAIM).keys_and_args() == (["j", "d"], ["t", 5, "b"])
    targets: Sequence[EnqueueTarget] = [
        EnqueueTarget(
            buffer=f"l{n}", job=f"j{n}", sheet=f"s{n}", times=f"t{n}", base=f"b{n}", queue=f"q{n}"
        )
        for n in (1, 2)
    ]
    enqueue = Enqueue(
        buffer_index="bi",
        due_index="di",
        delay_ms=1,
        threshold=2,
        sheet_ttl_s=3,
        grace_ms=4,
        targets=targets,
        ids=["a", "b"],
    )
    assert enqueue.keys_and_args() == (
        ["bi", "di", "l1", "j1", "s1", "t1", "l2", "j2", "s2", "t2"],
        [1, 2, 3, 4, "b1", "q1", "b2", "q2", "a", "b"],
    )
    sent = Sent(tasks=[SentTask(job="j1", token="k1"), SentTask(job="j2", token="k2")])
    assert sent.keys_and_args() == (["j1", "j2"], ["k1", "k2"])


def test_a_declaration_that_cannot_be_laid_out_is_refused():
    @dataclass(slots=True, kw_only=True)
    class Unmarked(Script[None]):
        SCRIPT: ClassVar[str] = "unmarked"
        job: str

        def decode(self, reply: Any) -> None:
            return None

    @dataclass(slots=True, kw_only=True)
    class FixedAfterRest(Script[None]):
        SCRIPT: ClassVar[str] = "fixed_after_rest"
        ids: Rest[str]
        token: Arg[str]

        def decode(self, reply: Any) -> None:
            return None

    with pytest.raises(TypeError, match=r"Unmarked\.job must be a Key, Arg"):
        layout(Unmarked)
    with pytest.raises(TypeError, match="ARGV token follows a repeated entry"):
        layout(FixedAfterRest)
