"""Guessing the console's token, against ``sheetsync web`` itself: an address that keeps
sending wrong tokens is locked out (429, growing), while the right token still works from
any other address. Other clients are other loopback addresses (127.0.0.2, ...)."""

from __future__ import annotations

import base64
import time

from support.console import Console, running_console

WRONG = "Bearer " + "w" * 40


def _basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()


def test_repeated_wrong_tokens_lock_the_address_out(pipeline_env):
    # A lockout far longer than the test: every 429 below is the lockout, not a race.
    token = "0123456789abcdef" * 2  # exactly 32 characters: the shortest allowed
    args = ("--login-failures", "3", "--login-lockout", "600")
    with running_console(pipeline_env(), token=token, args=args) as console:
        guesser, operator, browser = "127.0.0.1", "127.0.0.2", "127.0.0.3"
        for wrong in (WRONG, _basic("guess"), "Token x"):
            assert console.request("/", auth=wrong, source=guesser).status == 401

        locked = console.request("/", auth=WRONG, source=guesser)
        assert locked.status == 429
        assert 1 <= int(locked.headers["retry-after"]) <= 600
        assert "too many failed logins" in locked.body
        # Locked out, the right token waits too: a guesser learns nothing from a 429.
        assert console.request("/", source=guesser).status == 429

        # Another client is not slowed down, and its success frees no one else.
        assert console.request("/", source=operator).status == 200
        assert console.request("/", auth=_basic(token), source=operator).status == 200
        assert console.request("/", source=guesser).status == 429

        # The client address is the connection's: X-Forwarded-For does not pick another.
        for n in range(3):
            spoofed = {"X-Forwarded-For": f"203.0.113.{n}"}
            answer = console.request("/", auth=WRONG, headers=spoofed, source=operator)
            assert answer.status == 401
        assert console.request("/", source=operator).status == 429

        # A request without credentials (a browser before its password prompt) is not a
        # failed login.
        for _ in range(5):
            assert console.request("/", auth=None, source=browser).status == 401
        assert console.request("/", source=browser).status == 200


def _lockout_ends(console: Console, source: str) -> float:
    """Poll without credentials (which counts as no failure) until ``source`` is no
    longer locked out; returns when that was, by the monotonic clock."""
    while console.request("/", auth=None, source=source).status == 429:
        time.sleep(0.02)
    return time.monotonic()


def test_each_further_wrong_token_locks_the_address_out_longer(pipeline_env):
    lockout_s = 0.4
    args = ("--login-failures", "1", "--login-lockout", str(lockout_s))
    with running_console(pipeline_env(), args=args) as console:
        guesser = "127.0.0.4"
        started = time.monotonic()
        assert console.request("/", auth=WRONG, source=guesser).status == 401
        first = _lockout_ends(console, guesser) - started

        started = time.monotonic()
        assert console.request("/", auth=WRONG, source=guesser).status == 401
        # The next attempt is refused (429), or comes after the lockout, slow as the
        # machine may be: either way no guess gets in earlier.
        attempt = console.request("/", source=guesser)
        assert attempt.status == 429 or time.monotonic() - started >= 2 * lockout_s
        second = _lockout_ends(console, guesser) - started

        assert first >= lockout_s
        assert second >= 2 * lockout_s  # doubled
        # Once it is over, the right token gets in, and wipes the address's record.
        assert console.request("/", source=guesser).status == 200
        assert console.request("/", auth=WRONG, source=guesser).status == 401
        assert console.request("/", source=guesser).status == 429  # the first lockout again
