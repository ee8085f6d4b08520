"""Wrong tokens against ``sheetsync web`` itself: ``--login-failures`` wrong tokens are
answered at once, then the tarpit holds each for ``--login-lockout`` seconds and longer,
while the right token gets in at once from that same address. No address is locked out.
Other clients are other loopback addresses (127.0.0.2, ...); the tarpit's own tests are
in tests/security/test_console_tarpit.py."""

from __future__ import annotations

import base64
import http.client

from support.console import Console, running_console

WRONG = "Bearer " + "w" * 40
#: The tarpit's first delay here: far longer than the test.
TARPIT_S = 600
#: A wrong token not answered within this is one the tarpit holds (a plain 401 takes
#: milliseconds; were the machine so slow, the test would pass, never fail, wrongly).
HELD_S = 3


def _basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()


def _held(console: Console, source: str, headers: dict[str, str]) -> bool:
    """Whether a GET with ``headers`` from ``source`` is still unanswered after HELD_S
    (then the client gives up, which frees its place in the tarpit)."""
    host, port = console.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(
        host, int(port), timeout=HELD_S, source_address=(source, 0)
    )
    try:
        connection.request("GET", "/", headers=headers)
        connection.getresponse()
    except TimeoutError:
        return True
    finally:
        connection.close()
    return False


def test_wrong_tokens_are_slowed_and_the_right_one_gets_in_from_the_same_address(pipeline_env):
    token = "0123456789abcdef" * 2  # exactly 32 characters: the shortest allowed
    args = ("--login-failures", "3", "--login-lockout", str(TARPIT_S))
    with running_console(pipeline_env(), token=token, args=args) as console:
        shared = "127.0.0.1"  # a proxy's: the operator and a guesser behind it
        for wrong in (WRONG, _basic("guess"), "Token x"):
            assert console.request("/", auth=wrong, source=shared).status == 401
        assert console.request("/", auth=_basic(token), source=shared).status == 200

        assert _held(console, shared, {"Authorization": WRONG})  # the fourth: 600 s
        assert console.request("/", auth=_basic(token), source=shared).status == 200
        # The address is the connection's: X-Forwarded-For does not pick a fresh one
        # (whose first wrong tokens would be answered at once).
        spoofed = {"Authorization": WRONG, "X-Forwarded-For": "203.0.113.7"}
        assert _held(console, shared, spoofed)

        # Another client starts with its own free wrong tokens.
        operator = "127.0.0.2"
        assert console.request("/", auth=WRONG, source=operator).status == 401
        assert console.request("/", source=operator).status == 200

        # A request without credentials (a browser before its password prompt) is not
        # a wrong token.
        browser = "127.0.0.3"
        for _ in range(5):
            assert console.request("/", auth=None, source=browser).status == 401
        for _ in range(3):
            assert console.request("/", auth=WRONG, source=browser).status == 401
