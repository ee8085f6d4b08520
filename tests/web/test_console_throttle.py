"""The console's lockout table on its own, on a clock the test moves: the growth, the
cap, forgetting, and the bound on memory (tests/web/test_console_lockout.py runs it in
``sheetsync web``)."""

from __future__ import annotations

import pytest

from sheetsync.cli import web as cli_web
from sheetsync.web.throttle import (
    DEFAULT_ALLOWED,
    DEFAULT_LOCKOUT_S,
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


def test_the_allowed_failures_are_free_then_each_lockout_doubles(clock):
    throttle = LoginThrottle(3, 2.0, clock=clock)

    assert [throttle.failed("a") for _ in range(2)] == [0.0, 0.0]
    assert throttle.retry_after("a") == 0.0
    assert throttle.failed("a") == 2.0  # the third
    assert throttle.retry_after("a") == 2.0
    clock.now += 1.5
    assert throttle.retry_after("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert throttle.retry_after("a") == 0.0
    assert throttle.failed("a") == 4.0
    clock.now += 4.0
    assert throttle.failed("a") == 8.0


def test_the_lockout_stops_growing_at_the_cap(clock):
    throttle = LoginThrottle(1, 1.0, clock=clock)
    lockouts = []
    for _ in range(MAX_DOUBLINGS + 5):
        lockouts.append(throttle.failed("a"))
        clock.now += lockouts[-1]

    assert lockouts[: MAX_DOUBLINGS + 1] == [2.0**n for n in range(MAX_DOUBLINGS + 1)]
    assert set(lockouts[MAX_DOUBLINGS:]) == {throttle.longest_lockout_s}


def test_a_success_forgets_its_own_address_only(clock):
    throttle = LoginThrottle(1, 60.0, clock=clock)
    throttle.failed("a")
    throttle.failed("b")

    throttle.succeeded("b")

    assert throttle.retry_after("a") == 60.0
    assert throttle.retry_after("b") == 0.0
    assert throttle.failed("b") == 60.0  # b starts over: its first lockout again


def test_an_address_quiet_for_the_longest_lockout_is_forgotten(clock):
    throttle = LoginThrottle(2, 1.0, clock=clock)
    throttle.failed("a")
    throttle.failed("a")  # locked out for 1 s

    clock.now += 1.0 + throttle.longest_lockout_s - 0.001
    assert len(throttle) == 1
    clock.now += 0.001
    assert throttle.retry_after("a") == 0.0
    assert len(throttle) == 0
    assert throttle.failed("a") == 0.0  # a fresh start: one failure is free again


def test_the_table_is_bounded_and_drops_the_address_that_failed_least_recently(clock):
    throttle = LoginThrottle(1, 60.0, capacity=3, clock=clock)
    for address in ("a", "b", "c"):
        throttle.failed(address)
    throttle.failed("a")  # now the most recent

    throttle.failed("d")

    assert len(throttle) == 3
    assert throttle.retry_after("b") == 0.0  # dropped
    assert min(throttle.retry_after(address) for address in "acd") > 0
    for n in range(1000):
        throttle.failed(f"flood-{n}")
    assert len(throttle) == 3


def test_client_keys():
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key(None) == client_key("") == ""


def test_the_cli_defaults_are_the_throttles():
    assert cli_web.DEFAULT_LOGIN_FAILURES == DEFAULT_ALLOWED
    assert cli_web.DEFAULT_LOGIN_LOCKOUT_S == DEFAULT_LOCKOUT_S
