"""Redis clients from sheetsync's URLs, a Redis Sentinel deployment included.

``redis://`` / ``rediss://`` / ``unix://`` are redis-py's. A Sentinel-managed primary is

    redis+sentinel://[:password@]host:26379,host2:26379,host3:26379/service[/db]

(``sentinel_password=`` in the query for sentinels that require one). redis-py's
``Sentinel`` finds the current primary for every new connection, so buffers and the
limiter follow a failover; the broker uses kombu's Sentinel transport with the same
sentinels (:func:`kombu_broker`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.sentinel import Sentinel

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
PLAIN_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True)
class SentinelUrl:
    hosts: tuple[tuple[str, int], ...]
    service: str
    db: int
    password: str | None
    sentinel_password: str | None
    tls: bool


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel(url: str) -> SentinelUrl:
    """The parts of a ``redis+sentinel://`` URL; ValueError (one line) when malformed."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    hosts = []
    for host in filter(None, netloc.split(",")):
        name, _, port = host.rpartition(":")
        if not name or not port.isdigit():
            raise ValueError(f"sentinel {host!r} is not host:port")
        hosts.append((name.strip("[]"), int(port)))
    path = [p for p in parts.path.split("/") if p]
    if not hosts or not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError("a Sentinel URL is redis+sentinel://host:26379,host2:26379/service[/db]")
    query = parse_qs(parts.query)
    password = unquote(parts.password) if parts.password else None
    return SentinelUrl(
        hosts=tuple(hosts),
        service=path[0],
        db=int(path[1]) if len(path) == 2 else 0,
        password=password,
        sentinel_password=query.get("sentinel_password", [None])[0],
        tls=parts.scheme.lower().startswith("rediss"),
    )


def client(url: str, **options: Any) -> redis.Redis:
    """A client for ``url``: the Sentinel service's current primary, or a plain URL's."""
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **options)
    found = parse_sentinel(url)
    sentinel_options = {k: v for k, v in options.items() if k.startswith("socket_")}
    if found.sentinel_password:
        sentinel_options["password"] = found.sentinel_password
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(found.hosts), sentinel_kwargs=sentinel_options, **sentinel_options
    )
    extra = {"ssl": True} if found.tls else {}
    primary: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        found.service, db=found.db, password=found.password, **extra, **options
    )
    return primary


def kombu_broker(url: str) -> tuple[str, dict[str, Any]]:
    """kombu's broker URL and transport options for ``url`` (a Sentinel URL becomes one
    ``sentinel://`` URL per sentinel, with the service as ``master_name``)."""
    if not is_sentinel(url):
        return url, {}
    found = parse_sentinel(url)
    auth = f":{found.password}@" if found.password else ""
    broker = ";".join(f"sentinel://{auth}{host}:{port}/{found.db}" for host, port in found.hosts)
    options: dict[str, Any] = {"master_name": found.service}
    if found.sentinel_password:
        options["sentinel_kwargs"] = {"password": found.sentinel_password}
    return broker, options


def eviction_warning(client: redis.Redis) -> str | None:
    """A warning when this Redis may evict keys: buffers and jobs have no expiry and the
    limiter's windows do, so any policy but ``noeviction`` can lose answers or break the
    limits. None when the policy is safe, or the server will not say (managed Redis)."""
    try:
        policy = str(client.config_get("maxmemory-policy").get("maxmemory-policy", ""))
    except redis.RedisError:
        return None
    if not policy or policy == "noeviction":
        return None
    return (
        f"Redis maxmemory-policy is {policy}: at its memory limit it evicts keys, which for "
        "sheetsync means lost buffers or limiter windows; set it to noeviction"
    )
