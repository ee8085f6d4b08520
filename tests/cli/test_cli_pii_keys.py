"""`sheetsync keys` (keys for personal info at rest), through the console script."""

from __future__ import annotations

import base64
import os
import pty
import subprocess

from support.cli import SCRIPT, Cli


def test_keys_generate_prints_a_usable_key(cli: Cli) -> None:
    result = cli.ok("keys", "generate", unset=["SHEETSYNC_PII_KEYS"])
    key = result.stdout.strip()
    assert len(base64.urlsafe_b64decode(key)) == 32
    # Captured, as in export SHEETSYNC_PII_KEYS=$(sheetsync keys generate): no advice.
    assert result.stderr == ""


def _keys_generate_at_a_terminal(cli: Cli, env: dict[str, str]) -> str:
    """What a person sees running ``sheetsync keys generate`` at a terminal."""
    leader, follower = pty.openpty()
    try:
        completed = subprocess.run(
            [str(SCRIPT), "keys", "generate"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=follower,
            timeout=60,
            check=False,
        )
        assert completed.returncode == 0
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_keys_generate_at_a_terminal_says_what_to_do_with_it(cli: Cli) -> None:
    first_setup = {k: v for k, v in cli.env.items() if k != "SHEETSYNC_PII_KEYS"}
    shown = _keys_generate_at_a_terminal(cli, first_setup)
    assert "set it as SHEETSYNC_PII_KEYS in every process" in shown
    assert "rotate" not in shown
    shown = _keys_generate_at_a_terminal(cli, cli.env)  # keys set already: a rotation
    assert "to rotate: put it first in SHEETSYNC_PII_KEYS" in shown
