"""The fair queue's scripts (rate_turn.lua, rate_take.lua, rate_served.lua,
rate_leave.lua) held to the policy's reference model (sheetsync.sheets.quota_model): a
stateful property test drives both with the same operations (reserve, take, a request of
no buffer, leave) and compares, after each, the answer, every waiter's place and state,
the clock, the accounts' debts and their lines.

Time is kept out of it: a half-hour window (nothing frees while a case runs), a pace whose
burst no case spends, nobody late or gone (the tuning's late and grace are a day), and
every request asked with the same lead."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from support.examples import examples

from sheetsync.redis_keys import rate_queue_keys
from sheetsync.settings import Settings
from sheetsync.sheets.limiter import NO_WAITER, QueueTuning, RateLimiter
from sheetsync.sheets.quota_model import QuotaModel
from sheetsync.sheets.quota_scripts import Mode

PER_ACCOUNT = 3
PER_PROJECT = 1000
DAY_MS = 86_400_000
LEAD_S = 1.0
#: The accounts and their owners' weights (FREE, PRO, and two others).
WEIGHTS = {"a": 1.0, "b": 4.0, "c": 2.5, "d": 3.0}
ACCOUNTS = st.sampled_from(sorted(WEIGHTS))
BUFFERS = st.integers(min_value=0, max_value=3)


def machine_for(redis_url: str) -> type[RuleBasedStateMachine]:
    client = redis.Redis.from_url(redis_url)
    queue = rate_queue_keys("write")

    class QuotaMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            client.flushdb()
            self.limiter = RateLimiter(
                client,
                Settings.load(
                    rate_window_s=1800,
                    rate_margin_s=0,
                    rate_limit_per_account=PER_ACCOUNT,
                    rate_limit_per_project=PER_PROJECT,
                ),
                tuning=QueueTuning(grace_ms=DAY_MS, late_ms=DAY_MS),
            )
            self.model = QuotaModel(account_limit=PER_ACCOUNT, project_limit=PER_PROJECT)

        def ask(self, account: str, waiter: str, mode: Mode, cost: int) -> tuple[bool, bool]:
            """(went, may go): the request's slot taken, or a reserve told to go on."""
            turn = self.limiter.turn(account, "write", waiter, mode, LEAD_S, WEIGHTS[account], cost)
            if not turn.go:
                return False, mode is Mode.RESERVE and turn.wait_ms == 0
            slot = self.limiter.take_at(account, "write", waiter, turn.at_ms)
            assert slot.taken, "the queue let it go, the windows did not"
            return True, False

        @rule(account=ACCOUNTS, buffer=BUFFERS, cost=st.integers(min_value=1, max_value=2))
        def reserve(self, account: str, buffer: int, cost: int) -> None:
            waiter = f"{account}-{buffer}"
            expected = self.model.reserve(account, waiter, WEIGHTS[account], cost)
            assert self.ask(account, waiter, Mode.RESERVE, cost) == (False, expected.may_go)

        @rule(account=ACCOUNTS, buffer=BUFFERS)
        def take(self, account: str, buffer: int) -> None:
            waiter = f"{account}-{buffer}"
            expected = self.model.take(account, waiter, WEIGHTS[account])
            assert self.ask(account, waiter, Mode.TAKE, 1) == (expected.went, False)

        @rule(account=ACCOUNTS)
        def take_for_no_buffer(self, account: str) -> None:
            expected = self.model.take(account, NO_WAITER, WEIGHTS[account])
            assert self.ask(account, NO_WAITER, Mode.TAKE, 1) == (expected.went, False)

        @rule(account=ACCOUNTS, buffer=BUFFERS)
        def leave(self, account: str, buffer: int) -> None:
            self.model.leave(f"{account}-{buffer}")
            self.limiter.leave(f"{account}-{buffer}")

        @invariant()
        def same_places(self) -> None:
            places = {
                name: (place.ahead, place.state) for name, place in self.limiter.places().items()
            }
            assert places == self.model.places()

        @invariant()
        def same_clock_and_debts(self) -> None:
            debts = {
                name.decode(): int(score)
                for name, score in client.zrange(queue.debts, 0, -1, withscores=True)
            }
            assert debts == self.model.debts
            assert int(client.get(queue.clock) or 0) == self.model.clock

        @invariant()
        def same_lines(self) -> None:
            """Every account's line holds its turns, and only those."""
            lines = {entry.decode() for entry in client.zrange(queue.lines, 0, -1)}
            assert lines == {
                f"{turn.account} {turn.rank():016x} {name}"
                for name, turn in self.model.turns.items()
            }

    return QuotaMachine


@pytest.fixture
def check_policy(redis_url: str) -> Callable[[int], None]:
    def check(full: int) -> None:
        run_state_machine_as_test(
            machine_for(redis_url),
            settings=settings(
                max_examples=examples(full),
                stateful_step_count=40,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )

    return check


def test_the_scripts_decide_as_the_policys_model(check_policy: Callable[[int], None]) -> None:
    check_policy(100)
