"""One Python<->Lua contract per script, declared once, called by name.

A script is declared as a keyword-only dataclass subclassing :class:`Script`: its
fields, in order, are the script's KEYS and ARGV, each marked by its type — :data:`Key`,
:data:`Arg`, :data:`Flag` (a bool sent as ``'1'``/``'0'``), :data:`Rest` (every
remaining ARGV entry) or :data:`Each` (a group of keys and args repeated per item). Its
``decode`` turns the reply into a typed value. So a call names every value (a missing,
unknown or positional one is a TypeError before Redis is called, and mypy's error
before that), and no call site indexes a reply by position::

    @dataclass(slots=True, kw_only=True)
    class Renew(Script[Renewed | None]):
        SCRIPT: ClassVar[str] = "renew"
        job: Key
        due_index: Key
        token: Arg[str]
        ...

    renewed = scripts.run(Renew(job=key.job, due_index=DUE_INDEX, token=..., ...))

The Lua file is ``lua/<SCRIPT>.lua`` in the package of the module that declares the
class, so a script lives beside its caller. Its header names the same KEYS and ARGV in
the same order (one ``local name = KEYS[i]`` per line, ``-- ARGV[i..] ...`` lines for
repeated entries; docs/ARCHITECTURE.md, "The job and its scripts"), and
tests/buffers/test_lua_contracts.py fails when the two disagree. Every script runs
as this package's ``prelude.lua`` followed by its own file, with EVALSHA.
"""

from __future__ import annotations

import enum
import functools
import itertools
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Annotated, Any, ClassVar, Generic, TypeVar, get_args, get_origin, get_type_hints

import redis
from redis.commands.core import Script as RegisteredScript
from redis.exceptions import NoScriptError

T = TypeVar("T")
R = TypeVar("R")
Reply_co = TypeVar("Reply_co", covariant=True)


class Slot(enum.Enum):
    """Where a declared field goes in EVALSHA's KEYS and ARGV."""

    KEY = "one KEYS entry"
    ARG = "one ARGV entry"
    FLAG = "one ARGV entry, '1' or '0'"
    REST = "every remaining ARGV entry"
    EACH = "a group of KEYS and ARGV entries, repeated per item"


Key = Annotated[str, Slot.KEY]
Arg = Annotated[T, Slot.ARG]
Flag = Annotated[bool, Slot.FLAG]
Rest = Annotated[Sequence[T], Slot.REST]
Each = Annotated[Sequence[T], Slot.EACH]


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a script's KEYS or ARGV, as a Lua header names it too."""

    name: str
    #: Repeated to the end: every remaining value, or a group per item.
    repeated: bool = False
    #: A group's members on this side (KEYS or ARGV), per item.
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Fill:
    """How one declared class's fields fill KEYS and ARGV: on each side the fixed
    entries come first (a layout checks it), then the repeated ones in field order."""

    keys: Callable[[Any], tuple[Any, ...]]
    args: Callable[[Any], tuple[Any, ...]]
    #: Where flags are among the fixed args (sent as '1' or '0').
    flags: tuple[int, ...]
    #: Each repeated field: its name and, for a group, how one item fills.
    repeated: tuple[tuple[str, _Fill | None], ...]

    def into(self, value: Any, keys: list[Any], args: list[Any]) -> None:
        keys += self.keys(value)
        start = len(args)
        args += self.args(value)
        for at in self.flags:
            args[start + at] = "1" if args[start + at] else "0"
        for name, group in self.repeated:
            items = getattr(value, name)
            if group is None:
                args += items
            else:
                for item in items:
                    group.into(item, keys, args)


@dataclass(frozen=True, slots=True)
class Layout:
    """A declaration's KEYS and ARGV, in order, and how its fields fill them."""

    keys: tuple[Entry, ...]
    argv: tuple[Entry, ...]
    fill: _Fill


class Script(ABC, Generic[Reply_co]):
    """A script's contract. Subclass it as ``@dataclass(slots=True, kw_only=True)``,
    set ``SCRIPT`` and declare the fields in KEYS-then-ARGV order."""

    __slots__ = ()

    #: The file's name: ``lua/<SCRIPT>.lua`` beside the declaring module.
    SCRIPT: ClassVar[str]

    @abstractmethod
    def decode(self, reply: Any) -> Reply_co:
        """The reply, as a typed value."""

    def keys_and_args(self) -> tuple[list[str], list[Any]]:
        keys: list[str] = []
        args: list[Any] = []
        layout(type(self)).fill.into(self, keys, args)
        return keys, args


@functools.cache
def layout(kind: type[Script[Any]]) -> Layout:
    """The declared KEYS and ARGV of a script (checked: a TypeError names what is wrong)."""
    keys: list[Entry] = []
    argv: list[Entry] = []
    fill = _fill_of(kind, keys, argv, group=False)
    for side, entries in (("KEYS", keys), ("ARGV", argv)):
        for before, entry in itertools.pairwise(entries):
            if before.repeated and not entry.repeated:
                raise TypeError(f"{kind.__name__}: {side} {entry.name} follows a repeated entry")
    return Layout(tuple(keys), tuple(argv), fill)


def _fill_of(kind: type, keys: list[Entry], argv: list[Entry], *, group: bool) -> _Fill:
    if not is_dataclass(kind) or not all(field.kw_only for field in fields(kind)):
        raise TypeError(f"{kind.__name__} must be a keyword-only dataclass")
    hints = get_type_hints(kind, include_extras=True)
    key_names: list[str] = []
    arg_names: list[str] = []
    flags: list[int] = []
    repeated: list[tuple[str, _Fill | None]] = []
    for field in fields(kind):
        slot, item = _slot_of(kind, field.name, hints[field.name])
        if group and slot not in (Slot.KEY, Slot.ARG, Slot.FLAG):
            raise TypeError(f"{kind.__name__}.{field.name}: a group holds keys and args only")
        if slot is Slot.KEY:
            key_names.append(field.name)
            keys.append(Entry(field.name))
        elif slot in (Slot.ARG, Slot.FLAG):
            if slot is Slot.FLAG:
                flags.append(len(arg_names))
            arg_names.append(field.name)
            argv.append(Entry(field.name))
        elif slot is Slot.REST:
            repeated.append((field.name, None))
            argv.append(Entry(field.name, repeated=True))
        else:
            item_keys: list[Entry] = []
            item_args: list[Entry] = []
            repeated.append((field.name, _fill_of(item, item_keys, item_args, group=True)))
            for side, members in ((keys, item_keys), (argv, item_args)):
                if members:
                    names = tuple(member.name for member in members)
                    side.append(Entry(field.name, repeated=True, members=names))
    return _Fill(_getter(key_names), _getter(arg_names), tuple(flags), tuple(repeated))


def _getter(names: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The named attributes of a value, as a tuple (one C call for two or more)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if names:
        name = names[0]
        return lambda value: (getattr(value, name),)
    return lambda value: ()


def _slot_of(kind: type, name: str, hint: Any) -> tuple[Slot, Any]:
    metadata = getattr(hint, "__metadata__", ()) if get_origin(hint) is Annotated else ()
    slots = [item for item in metadata if isinstance(item, Slot)]
    if len(slots) != 1:
        raise TypeError(f"{kind.__name__}.{name} must be a Key, Arg, Flag, Rest or Each")
    if slots[0] is not Slot.EACH:
        return slots[0], None
    (item,) = get_args(get_args(hint)[0])  # Each[G] is Annotated[Sequence[G], EACH]
    return Slot.EACH, item


def script_file(kind: type[Script[Any]]) -> Traversable:
    """``lua/<SCRIPT>.lua`` in the package of the module that declares ``kind``."""
    package = kind.__module__.rpartition(".")[0]
    return resources.files(package).joinpath("lua", f"{kind.SCRIPT}.lua")


@functools.cache
def source(kind: type[Script[Any]]) -> str:
    """What Redis runs: the prelude, then the script's own file."""
    prelude = resources.files(__package__).joinpath("prelude.lua").read_text("utf-8")
    return prelude + "\n" + script_file(kind).read_text("utf-8")


class Scripts:
    """Runs declared scripts on one Redis client, with EVALSHA. A script Redis does not
    know (it restarted, or its scripts were flushed) is loaded and the call made again:
    NOSCRIPT means the call did not run."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._registered: dict[type[Script[Any]], RegisteredScript] = {}

    def run(self, call: Script[R]) -> R:
        keys, args = call.keys_and_args()
        return call.decode(self._script(type(call))(keys=keys, args=args))

    def run_many(self, calls: Sequence[Script[R]]) -> list[R]:
        """The calls in one round trip (a pipeline, not a transaction), in order."""
        replies = self._pipelined(calls)
        missing = [at for at, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            for kind in {type(calls[at]) for at in missing}:
                self.redis.script_load(source(kind))
            # Only those again: a call that ran must not run twice (a SCRIPT FLUSH can
            # land between two calls of one pipeline).
            again = self._pipelined([calls[at] for at in missing])
            for at, reply in zip(missing, again, strict=True):
                replies[at] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return [call.decode(reply) for call, reply in zip(calls, replies, strict=True)]

    def _pipelined(self, calls: Sequence[Script[Any]]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for call in calls:
            keys, args = call.keys_and_args()
            pipe.evalsha(self._script(type(call)).sha, len(keys), *keys, *args)
        return list(pipe.execute(raise_on_error=False))

    def _script(self, kind: type[Script[Any]]) -> RegisteredScript:
        script = self._registered.get(kind)
        if script is None:
            script = self._registered[kind] = self.redis.register_script(source(kind))
        return script


def as_text(value: bytes | str) -> str:
    """A string from a reply (bytes unless the client decodes responses)."""
    return value.decode() if isinstance(value, bytes) else value
