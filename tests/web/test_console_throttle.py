"""The console's tarpit table on its own, on a clock the test moves and with a sleep the
test controls: the growth, the cap, forgetting, and the bounds on memory and on waiting
answers (tests/security/test_console_tarpit.py serves it over HTTP,
tests/web/test_console_lockout.py in ``sheetsync web``)."""

from __future__ import annotations

import asyncio

import pytest

from sheetsync.cli import web as cli_web
from sheetsync.web.throttle import (
    DEFAULT_ALLOWED,
    DEFAULT_DELAY_S,
    MAX_DOUBLINGS,
    LoginThrottle,
    client_key,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_the_allowed_wrong_tokens_are_answered_at_once_then_each_waits_twice_as_long(clock):
    throttle = LoginThrottle(3, 2.0, clock=clock)

    assert [throttle.failed("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [throttle.failed("a") for _ in range(3)] == [2.0, 4.0, 8.0]
    assert throttle.failures("a") == 6
    assert throttle.failures("b") == 0


def test_the_delay_stops_growing_at_the_cap(clock):
    throttle = LoginThrottle(0, 1.0, clock=clock)
    delays = [throttle.failed("a") for _ in range(MAX_DOUBLINGS + 200)]

    assert delays[: MAX_DOUBLINGS + 1] == [2.0**n for n in range(MAX_DOUBLINGS + 1)]
    assert set(delays[MAX_DOUBLINGS:]) == {throttle.max_delay_s} == {16.0}
    capped = LoginThrottle(0, 0.5, max_delay_s=1.5, clock=clock)
    assert [capped.failed("a") for _ in range(4)] == [0.5, 1.0, 1.5, 1.5]


def test_no_success_is_counted_so_none_forgets_a_failure(clock):
    """Behind a proxy the operator and a guesser share an address: the operator's page
    refreshes must not give the guesser free tries again."""
    throttle = LoginThrottle(1, 60.0, clock=clock)
    throttle.failed("a")
    assert not hasattr(throttle, "succeeded")
    assert throttle.failed("a") == 60.0


def test_an_address_quiet_for_a_while_is_forgotten(clock):
    throttle = LoginThrottle(1, 1.0, forget_after_s=900, clock=clock)
    throttle.failed("a")
    throttle.failed("a")

    clock.now += 899.999
    assert throttle.failures("a") == 2
    assert throttle.failed("a") == 2.0  # a wrong token restarts the quiet time
    clock.now += 900.001
    assert throttle.failures("a") == 0
    assert len(throttle) == 0
    assert throttle.failed("a") == 0.0  # a fresh start: one wrong token is free again


def test_the_table_is_bounded_and_drops_the_address_that_failed_least_recently(clock):
    throttle = LoginThrottle(0, 60.0, capacity=3, clock=clock)
    for address in ("a", "b", "c"):
        throttle.failed(address)
    throttle.failed("a")  # now the most recent

    throttle.failed("d")

    assert len(throttle) == 3
    assert throttle.failures("b") == 0  # dropped
    assert [throttle.failures(address) for address in "acd"] == [2, 1, 1]
    for n in range(1000):
        throttle.failed(f"flood-{n}")
    assert len(throttle) == 3


def test_at_most_max_tarpitted_answers_wait_and_the_others_are_answered_at_once():
    released = asyncio.Event()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await released.wait()

    async def scenario() -> list[bool]:
        throttle = LoginThrottle(0, 5.0, max_tarpitted=2, sleep=sleep)
        held = [asyncio.create_task(throttle.wrong_token(f"a{n}")) for n in range(2)]
        await asyncio.sleep(0)
        assert throttle.tarpitted == 2
        assert await throttle.wrong_token("b") is False  # full: not held
        assert throttle.failures("b") == 1  # but counted
        released.set()
        results = await asyncio.gather(*held)
        assert throttle.tarpitted == 0
        return results

    assert asyncio.run(scenario()) == [True, True]
    assert slept == [5.0, 5.0]


def test_a_cancelled_wait_gives_its_place_back():
    async def scenario() -> int:
        throttle = LoginThrottle(0, 3600.0, max_tarpitted=1)
        task = asyncio.create_task(throttle.wrong_token("a"))
        await asyncio.sleep(0)
        assert throttle.tarpitted == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return throttle.tarpitted

    assert asyncio.run(scenario()) == 0


def test_client_keys():
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key(None) == client_key("") == ""


def test_the_cli_defaults_are_the_throttles():
    assert cli_web.DEFAULT_LOGIN_FAILURES == DEFAULT_ALLOWED
    assert cli_web.DEFAULT_LOGIN_LOCKOUT_S == DEFAULT_DELAY_S
