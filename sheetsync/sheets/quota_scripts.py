"""The limiter's scripts, declared (sheetsync/lua/contract.py): the mechanism,
``rate_take`` (a slot in both windows or neither, and the pace), and the policy,
``rate_turn``, ``rate_served`` and ``rate_leave`` (the fair queue's turns)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from sheetsync.lua.contract import Arg, Key, Script


class Mode(enum.StrEnum):
    #: Get a place in the queue (and when the turn is expected), take nothing.
    RESERVE = "reserve"
    #: The request goes now, or within the lead.
    TAKE = "take"


class Turn(NamedTuple):
    #: The request may go: rate_take.lua takes its slot at ``at_ms`` (Redis ms); else its
    #: turn is ``wait_ms`` away, and it may ask again in ``ask_again_ms``.
    go: bool
    at_ms: int
    wait_ms: int
    ask_again_ms: int


@dataclass(slots=True, kw_only=True)
class RateTurn(Script[Turn]):
    """A waiting buffer's turn at one kind's queue (the policy): its place, and whether
    its request may go now."""

    SCRIPT: ClassVar[str] = "rate_turn"
    account_window: Key
    project_window: Key
    pace: Key
    queue: Key
    turns: Key
    parked: Key
    expected: Key
    debts: Key
    clock: Key
    lines: Key
    window_ms: Arg[int]
    account_limit: Arg[int]
    project_limit: Arg[int]
    account: Arg[str]
    weight: Arg[float]
    #: The waiting buffer, or :data:`NO_WAITER`.
    waiter: Arg[str]
    mode: Arg[Mode]
    #: The slots of this kind a new turn needs (a first write's: the header, the append).
    cost: Arg[int]
    lead_ms: Arg[int]
    grace_ms: Arg[int]
    late_ms: Arg[int]

    def decode(self, reply: Any) -> Turn:
        go, when, ask_again_ms = (int(value) for value in reply)
        if go:
            return Turn(True, when, 0, 0)
        return Turn(False, 0, when, ask_again_ms)


class Slot(NamedTuple):
    #: Taken: send after ``wait_ms``; else both windows fit again in ``wait_ms``.
    taken: bool
    wait_ms: int


@dataclass(slots=True, kw_only=True)
class RateTake(Script[Slot]):
    """One request slot in the account's and the project's windows (of one kind) at
    once, or neither (the mechanism)."""

    SCRIPT: ClassVar[str] = "rate_take"
    account_window: Key
    project_window: Key
    pace: Key
    window_ms: Arg[int]
    account_limit: Arg[int]
    project_limit: Arg[int]
    #: A unique member for this request.
    member: Arg[str]
    at: Arg[int]

    def decode(self, reply: Any) -> Slot:
        taken, wait_ms = reply
        return Slot(bool(int(taken)), int(wait_ms))


@dataclass(slots=True, kw_only=True)
class RateServed(Script[bool]):
    """The request of ``waiter`` took its slot (``member``): one slot of its turn used."""

    SCRIPT: ClassVar[str] = "rate_served"
    queue: Key
    turns: Key
    parked: Key
    expected: Key
    debts: Key
    clock: Key
    lines: Key
    account_window: Key
    waiter: Arg[str]
    member: Arg[str]
    max_debts: Arg[int]

    def decode(self, reply: Any) -> bool:
        return bool(int(reply))


@dataclass(slots=True, kw_only=True)
class RateLeave(Script[None]):
    """A buffer's run ended without waiting for a slot: it leaves both queues, and the
    slots of its turns it did not use are given back."""

    SCRIPT: ClassVar[str] = "rate_leave"
    read_queue: Key
    read_turns: Key
    read_parked: Key
    read_expected: Key
    read_debts: Key
    read_clock: Key
    read_lines: Key
    write_queue: Key
    write_turns: Key
    write_parked: Key
    write_expected: Key
    write_debts: Key
    write_clock: Key
    write_lines: Key
    waiter: Arg[str]

    def decode(self, reply: Any) -> None:
        return None
