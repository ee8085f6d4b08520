"""The Lua scripts, one per state change, and the one shape of "a task to send".

Every script is the shared prelude (``lua/prelude.lua``: the clock, token minting and
the task shape) followed by its own file, which names its KEYS and ARGV at the top.
Scripts run with EVALSHA, reloaded by redis-py when Redis answers NOSCRIPT.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from sheetsync.dispatch import FlushTask


@functools.cache
def script_source(name: str) -> str:
    """The prelude, then ``lua/<name>.lua``."""
    folder = resources.files("sheetsync.buffers").joinpath("lua")
    prelude = folder.joinpath("prelude.lua").read_text("utf-8")
    return prelude + "\n" + folder.joinpath(f"{name}.lua").read_text("utf-8")


class Scripts:
    """Every script, registered on one Redis client."""

    def __init__(self, client: redis.Redis) -> None:
        def load(name: str) -> Script:
            return client.register_script(script_source(name))

        self.enqueue = load("enqueue")
        self.claim = load("claim")
        self.renew = load("renew")
        self.adopt = load("adopt")
        self.trim = load("trim")
        self.finish = load("finish")
        self.release = load("release")
        self.sweep = load("sweep")
        self.sent = load("sent")
        self.rate_take = load("rate_take")
        self.heartbeat = load("heartbeat")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def decode_tasks(reply: Sequence[Any]) -> list[FlushTask]:
    """The tasks a script returned, each ``{token, queue, countdown (ms), superseded}``."""
    return [
        FlushTask(
            token=_text(token),
            queue=_text(queue),
            countdown_s=int(countdown_ms) / 1000,
            superseded=_text(superseded) or None,
        )
        for token, queue, countdown_ms, superseded in reply
    ]
