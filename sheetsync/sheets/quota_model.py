"""The fair queue's policy in Python: the reference that tests/sheets/test_quota_model.py
holds the scripts (lua/rate_turn.lua, rate_served.lua, rate_leave.lua) to, operation by
operation, on a stateful property test.

It models one kind's queue where time does not matter: the windows free nothing while it
runs, every waiter is where it was expected (nobody late, nobody gone), the pace's burst
is never spent and no line is longer than the scripts look. So what it decides is the
policy alone: the turns' order (the explicit tie-break), their costs and weights, who
may go given the account windows, who is parked, the clock, the debts and what leaving
gives back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: A FREE slot's length in the clock's units (rate_turn.lua's UNIT).
UNIT = 720720


@dataclass(slots=True)
class TurnState:
    account: str
    start: int
    #: One slot's length: UNIT / the owner's weight.
    slot: int
    #: Its account had no debt past the clock when it was charged.
    newcomer: bool
    cost: int
    left: int

    def rank(self) -> int:
        """The order of turns: by where the first slot ends, a newcomer's first."""
        return 2 * (self.start + self.slot) + (0 if self.newcomer else 1)


@dataclass(frozen=True, slots=True)
class Answer:
    #: The request may go now (its slot is taken: the model's windows count it).
    went: bool
    #: A reserve: it may go now (nothing taken).
    may_go: bool = False


@dataclass
class QuotaModel:
    account_limit: int
    project_limit: int
    max_debts: int = 10_000
    clock: int = 0
    debts: dict[str, int] = field(default_factory=dict)
    turns: dict[str, TurnState] = field(default_factory=dict)
    parked: set[str] = field(default_factory=set)
    used: dict[str, int] = field(default_factory=dict)

    def queued(self) -> list[str]:
        """The queue in order (ties of rank by name, as a sorted set orders them)."""
        waiting = [name for name in self.turns if name not in self.parked]
        return sorted(waiting, key=lambda name: (self.turns[name].rank(), name.encode()))

    def places(self) -> dict[str, tuple[int, str]]:
        """Each waiter's place as ``RateLimiter.places`` shows it: (ahead, state)."""
        queued = self.queued()
        found = {name: (n, "queued") for n, name in enumerate(queued)}
        found |= {name: (len(queued), "parked") for name in self.parked}
        return found

    def reserve(self, account: str, waiter: str, weight: float, cost: int) -> Answer:
        turn = self.turns.get(waiter)
        if turn is not None and turn.left > cost:
            if self._give_back(turn, turn.left - cost):
                turn.cost -= turn.left - cost
            turn.left = cost
        return self._ask(account, waiter, weight, cost, take=False)

    def take(self, account: str, waiter: str, weight: float) -> Answer:
        return self._ask(account, waiter, weight, 1, take=True)

    def leave(self, waiter: str) -> None:
        self._drop(waiter)
        self._forget_when_idle()

    def _ask(self, account: str, waiter: str, weight: float, cost: int, *, take: bool) -> Answer:
        in_parked = waiter in self.parked
        if waiter and waiter not in self.turns:
            self._charge(account, waiter, weight, cost)
        if in_parked:
            mine = self.turns[waiter]
            ahead = sum(1 for name in self.queued() if self.turns[name].rank() < mine.rank())
        elif waiter:
            ahead = self.queued().index(waiter)
        else:
            ahead = len(self.queued())
        account_ahead = sum(turn.left for turn in self._line(account, before=waiter))
        account_free = self.account_limit - self.used.get(account, 0)
        project_free = self.project_limit - sum(self.used.values())
        account_now = account_ahead < account_free
        if take and account_now and ahead < project_free:
            self._serve(account, waiter)
            return Answer(went=True)
        if not take and account_now and ahead < project_free and project_free > 0:
            return Answer(went=False, may_go=True)
        if waiter and not account_now and not in_parked and ahead < project_free:
            self.parked.add(waiter)
        return Answer(went=False)

    def _line(self, account: str, before: str) -> list[TurnState]:
        """The account's turns ahead of ``before`` (all of them for no waiter)."""
        mine = self.turns.get(before)
        return [
            turn
            for name, turn in self.turns.items()
            if turn.account == account
            and (mine is None or (turn.rank(), name.encode()) < (mine.rank(), before.encode()))
        ]

    def _charge(self, account: str, waiter: str, weight: float, cost: int) -> None:
        debt = self.debts.get(account)
        newcomer = debt is None or debt <= self.clock
        start = self.clock if debt is None or newcomer else debt
        slot = math.floor(UNIT / weight + 0.5)
        self.debts[account] = start + cost * slot
        self.turns[waiter] = TurnState(account, start, slot, newcomer, cost, cost)

    def _drop(self, waiter: str) -> None:
        turn = self.turns.pop(waiter, None)
        self.parked.discard(waiter)
        if turn is not None:
            self._give_back(turn, turn.left)

    def _give_back(self, turn: TurnState, slots: int) -> bool:
        """Slots of the end of ``turn``'s charge, given back if it is its account's last
        turn (from an earlier one they would let its next turn pass its own)."""
        if slots == 0 or self.debts.get(turn.account) != turn.start + turn.cost * turn.slot:
            return False
        debt = self.debts[turn.account] - slots * turn.slot
        if debt <= self.clock:
            del self.debts[turn.account]
        else:
            self.debts[turn.account] = debt
        return True

    def _serve(self, account: str, waiter: str) -> None:
        self.used[account] = self.used.get(account, 0) + 1
        turn = self.turns.get(waiter)
        if turn is not None:
            self.clock = max(self.clock, turn.start)
            turn.left -= 1
            if turn.left == 0:
                del self.turns[waiter]
                self.parked.discard(waiter)
            self.debts = {name: at for name, at in self.debts.items() if at > self.clock}
        self._forget_when_idle()
        over = len(self.debts) - self.max_debts
        if over > 0:
            smallest = sorted(self.debts, key=lambda name: (self.debts[name], name.encode()))
            for name in smallest[:over]:
                del self.debts[name]

    def _forget_when_idle(self) -> None:
        if not self.turns:
            self.debts.clear()
