"""Redis clients from sheetsync's URLs: TLS and a Redis Sentinel deployment included.

``redis://`` / ``rediss://`` / ``unix://`` are redis-py's. A Sentinel-managed primary is

    redis+sentinel://[:password@]host:26379,host2:26379,host3:26379/service[/db]

(``sentinel_password=`` in the query for sentinels that require one). redis-py's
``Sentinel`` finds the current primary for every new connection, so buffers and the
limiter follow a failover; the broker uses kombu's Sentinel transport with the same
sentinels (:func:`kombu_broker`).

TLS: ``rediss://`` (and ``rediss+sentinel://``: the sentinels and the primary) verify
the server's certificate against the system's CAs and check its host name, unless the
query says otherwise with redis-py's (and kombu's) own option names:

    ssl_ca_certs=/path/ca.pem       trust this CA (a private CA)
    ssl_certfile=/path/client.pem   present this client certificate
    ssl_keyfile=/path/client.key    its key (when not in the certificate file)
    ssl_check_hostname=false        verify the chain, not the host name
    ssl_cert_reqs=none              no verification at all (explicit, never the default)

They are parsed here only (:func:`split_tls`), and handed on as redis-py keyword
arguments and as Celery's ``broker_use_ssl``, so every client of a URL gets the same
TLS: buffers, limiter, broker, beat, Flower, console, exporter and CLI.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
from redis.sentinel import Sentinel

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
PLAIN_SCHEMES = ("redis", "rediss", "unix")
TLS_SCHEMES = ("rediss", "rediss+sentinel")

#: ``ssl_cert_reqs`` values, as redis-py (none/optional/required) and Celery (CERT_*) spell them.
CERT_REQS = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
    "cert_none": ssl.CERT_NONE,
    "cert_optional": ssl.CERT_OPTIONAL,
    "cert_required": ssl.CERT_REQUIRED,
}
_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
TLS_FILE_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
TLS_OPTIONS = ("ssl_cert_reqs", *TLS_FILE_OPTIONS, "ssl_check_hostname")


@dataclass(frozen=True)
class Tls:
    """A ``rediss`` URL's TLS options (the defaults: verify the chain and the host name)."""

    cert_reqs: ssl.VerifyMode = ssl.CERT_REQUIRED
    check_hostname: bool = True
    files: dict[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """The ``ssl_*`` keyword arguments of redis-py's SSL connections; also Celery's
        ``broker_use_ssl``, which kombu hands to redis-py as they are."""
        return {
            "ssl_cert_reqs": self.cert_reqs,
            "ssl_check_hostname": self.check_hostname and self.cert_reqs != ssl.CERT_NONE,
            **self.files,
        }


def split_tls(url: str) -> tuple[str, Tls | None]:
    """``url`` without its ``ssl_*`` query options, and its TLS (None: not TLS).

    ValueError (one line) for an unknown or repeated ``ssl_*`` option, a bad value, or
    TLS options on a URL that is not ``rediss``."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    given: dict[str, str] = {}
    for name, value in pairs:
        if not name.lower().startswith("ssl"):
            continue
        if name not in TLS_OPTIONS:
            raise ValueError(f"unknown TLS option {name}= (known: {', '.join(TLS_OPTIONS)})")
        if name in given:
            raise ValueError(f"{name}= is given twice")
        given[name] = value
    scheme = parts.scheme.lower()
    if scheme not in TLS_SCHEMES:
        if given:
            raise ValueError(f"{', '.join(given)} need a TLS URL (rediss://), not {scheme}://")
        return url, None
    rest = urlencode([(k, v) for k, v in pairs if k not in given])
    stripped = urlunsplit(parts._replace(query=rest)) if given else url
    return stripped, _tls_from(given)


def _tls_from(given: dict[str, str]) -> Tls:
    reqs = given.get("ssl_cert_reqs", "required")
    if reqs.lower() not in CERT_REQS:
        raise ValueError(f"ssl_cert_reqs={reqs}: use required (the default), optional or none")
    hostname = given.get("ssl_check_hostname", "true")
    if hostname.lower() not in _BOOLEANS:
        raise ValueError(f"ssl_check_hostname={hostname}: use true or false")
    files = {name: given[name] for name in TLS_FILE_OPTIONS if given.get(name)}
    if "ssl_keyfile" in files and "ssl_certfile" not in files:
        raise ValueError("ssl_keyfile= needs ssl_certfile= (the client certificate)")
    return Tls(CERT_REQS[reqs.lower()], _BOOLEANS[hostname.lower()], files)


def tls_of(url: str) -> Tls | None:
    """The TLS options of ``url`` (None: plain text)."""
    return split_tls(url)[1]


@dataclass(frozen=True)
class SentinelUrl:
    hosts: tuple[tuple[str, int], ...]
    service: str
    db: int
    password: str | None
    sentinel_password: str | None
    tls: Tls | None


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel(url: str) -> SentinelUrl:
    """The parts of a ``redis+sentinel://`` URL; ValueError (one line) when malformed."""
    url, tls = split_tls(url)
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
    query = dict(parse_qsl(parts.query))
    password = unquote(parts.password) if parts.password else None
    return SentinelUrl(
        hosts=tuple(hosts),
        service=path[0],
        db=int(path[1]) if len(path) == 2 else 0,
        password=password,
        sentinel_password=query.get("sentinel_password"),
        tls=tls,
    )


def client(url: str, **options: Any) -> redis.Redis:
    """A client for ``url``: the Sentinel service's current primary, or a plain URL's."""
    if not is_sentinel(url):
        plain, tls = split_tls(url)
        return redis.Redis.from_url(plain, **(tls.options() if tls else {}), **options)
    found = parse_sentinel(url)
    # TLS to the sentinels and to the primary alike.
    tls_options = {"ssl": True, **found.tls.options()} if found.tls else {}
    sentinel_options = {k: v for k, v in options.items() if k.startswith("socket_")}
    if found.sentinel_password:
        sentinel_options["password"] = found.sentinel_password
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(found.hosts), sentinel_kwargs={**sentinel_options, **tls_options}, **sentinel_options
    )
    primary: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        found.service, db=found.db, password=found.password, **tls_options, **options
    )
    return primary


@dataclass(frozen=True)
class KombuBroker:
    """What Celery needs to reach a broker URL the way :func:`client` does."""

    url: str
    transport_options: dict[str, Any]
    #: Celery's ``broker_use_ssl``: the TLS options, or False for plain text.
    use_ssl: dict[str, Any] | bool


def kombu_broker(url: str) -> KombuBroker:
    """kombu's broker URL, transport options and TLS for ``url`` (a Sentinel URL becomes
    one ``sentinel://`` URL per sentinel, with the service as ``master_name``).

    kombu applies TLS only through ``broker_use_ssl`` here: sheetsync names its own
    transport class, so kombu's ``rediss`` scheme handling never runs (and that, left
    alone, turns verification off)."""
    if not is_sentinel(url):
        plain, tls = split_tls(url)
        return KombuBroker(plain, {}, tls.options() if tls else False)
    found = parse_sentinel(url)
    auth = f":{found.password}@" if found.password else ""
    broker = ";".join(f"sentinel://{auth}{host}:{port}/{found.db}" for host, port in found.hosts)
    options: dict[str, Any] = {"master_name": found.service}
    sentinel_kwargs: dict[str, Any] = {}
    if found.sentinel_password:
        sentinel_kwargs["password"] = found.sentinel_password
    if found.tls:
        sentinel_kwargs.update(ssl=True, **found.tls.options())
    if sentinel_kwargs:
        options["sentinel_kwargs"] = sentinel_kwargs
    return KombuBroker(broker, options, found.tls.options() if found.tls else False)


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
