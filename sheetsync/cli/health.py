"""``sheetsync health NAME...``: a container healthcheck from the heartbeats in Redis.

Exit 0 when every named worker or beat process wrote a heartbeat within ``--max-age``
seconds, else exit 1 with one line naming the missing and stale ones. It reads Redis
only (a few commands), never the database, so running it every few seconds is cheap.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Annotated

import typer

from sheetsync.cli.output import fail, out
from sheetsync.cli.runtime import load_settings
from sheetsync.text import duration

if TYPE_CHECKING:
    import redis

#: ``sheetsync.ops.heartbeats.DEFAULT_HEARTBEAT_TTL_S``, spelled out here so that building the
#: command line does not import Redis (a test keeps them in step).
DEFAULT_MAX_AGE_S = 30.0
#: A healthcheck must answer, not hang on an unreachable Redis.
REDIS_TIMEOUT_S = 5.0
#: How alike (difflib ratio) a live name must be to be suggested for a missing one.
SUGGEST_CUTOFF = 0.8


def health(
    names: Annotated[
        list[str],
        typer.Argument(
            metavar="NAME",
            help="Process names as Celery gives them: priority@host for a worker, beat@host.",
            show_default=False,
        ),
    ],
    max_age: Annotated[
        float,
        typer.Option(
            "--max-age",
            metavar="SECONDS",
            min=0.001,
            help="A heartbeat older than this counts as missing.",
        ),
    ] = DEFAULT_MAX_AGE_S,
) -> None:
    """Healthcheck: exit 0 when every named worker or beat is alive.

    Alive means a heartbeat in Redis younger than --max-age. Redis is all it reads.
    """
    from sheetsync import redis_urls
    from sheetsync.ops import heartbeats

    settings = load_settings()
    client = redis_urls.client(
        settings.redis_url,
        socket_timeout=REDIS_TIMEOUT_S,
        socket_connect_timeout=REDIS_TIMEOUT_S,
    )
    try:
        alive = {beat.name: beat.age_s for beat in heartbeats.live(client, max_age_s=max_age)}
        wanted = list(dict.fromkeys(names))
        missing = [name for name in wanted if name not in alive]
        last_seen = _last_seen_ages(client, missing) if missing else {}
    finally:
        client.close()
    if missing:
        problems = [_problem(name, last_seen.get(name), alive) for name in missing]
        fail(f"no heartbeat within {max_age:g}s from {', '.join(problems)}")
    fresh = ", ".join(f"{name} ({duration(alive[name])} ago)" for name in wanted)
    out.print(f"ok: {fresh}", markup=False)


def _last_seen_ages(client: redis.Redis, names: list[str]) -> dict[str, float]:
    """Seconds since each name's last heartbeat, for names the index still holds."""
    from sheetsync.redis_keys import HEARTBEATS

    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.zscore(HEARTBEATS, name)
    return {
        name: max(0.0, now_ms - float(seen)) / 1000
        for name, seen in zip(names, pipe.execute(), strict=True)
        if seen is not None
    }


def _problem(name: str, age_s: float | None, alive: dict[str, float]) -> str:
    """``beat@a (last 45s ago)``, or ``beat@b (none recorded; did you mean beat@c?)``."""
    if age_s is not None:
        return f"{name} (last {duration(age_s)} ago)"
    # Most often the host part is wrong (a container's hostname changed): suggest a live
    # process with the same node name first, and otherwise only a near spelling.
    node = name.partition("@")[0]
    same_node = [other for other in alive if other.partition("@")[0] == node]
    close = difflib.get_close_matches(name, same_node, n=1, cutoff=0) or (
        difflib.get_close_matches(name, list(alive), n=1, cutoff=SUGGEST_CUTOFF)
    )
    return f"{name} (none recorded" + (f"; did you mean {close[0]}?)" if close else ")")
