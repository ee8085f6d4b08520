"""What a setting's value must look like: each ``*_problem`` function returns why a
value is refused (a phrase for the one-line error), or None. A field names its own in its
:class:`sheetsync.settings.meta.Setting`; the console's and Flower's start-up use the
others. :func:`import_callable` loads a setting that names a function.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

from sheetsync.errors import ConfigError

#: A PII key must have at least this many distinct byte values (a random 32-byte key
#: has about 30; an all-zero or repeated-pattern key has a handful).
MIN_DISTINCT_KEY_BYTES = 16
PII_KEY_BYTES = 32
_URLSAFE_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
#: ``package.module:function``.
DOTTED_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
#: The shortest credential a network-facing operator surface accepts (the console's
#: token, Flower's password): 32 characters, as ``openssl rand -hex 32`` gives 64.
MIN_CREDENTIAL_CHARS = 32
#: Hosts a plain-http webhook may use.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: The databases sheetsync runs on, by URL scheme.
DATABASE_SCHEMES = ("sqlite", "postgresql", "postgres", "postgresql+psycopg")


def pii_key_problem(text: str) -> str | None:
    """Why ``text`` is not a PII key: urlsafe base64 of 32 random-looking bytes."""
    raw = strict_urlsafe_b64decode(text)
    if raw is None:
        return "is not urlsafe base64 (generate one: sheetsync keys generate)"
    if len(raw) != PII_KEY_BYTES:
        return f"must decode to {PII_KEY_BYTES} bytes, not {len(raw)}"
    if len(set(raw)) < MIN_DISTINCT_KEY_BYTES:
        return "is too weak (almost every byte the same): generate one with sheetsync keys generate"
    return None


def split_commas(value: object) -> object:
    """A comma-separated setting's text as a tuple of its items (blank text: none); an
    empty item (a stray comma) is refused."""
    if isinstance(value, str):
        if not value.strip():
            return ()
        parts = [part.strip() for part in value.split(",")]
        if not all(parts):
            raise ValueError("holds an empty key (a stray comma?)")
        return tuple(parts)
    return value


def pii_keys_problem(keys: tuple[str, ...]) -> str | None:
    """Why a list of PII keys is refused: the first key that is not one, by position."""
    for position, key in enumerate(keys, start=1):
        problem = pii_key_problem(key)
        if problem:
            return f"key #{position} {problem}"
    return None


def strict_urlsafe_b64decode(text: str) -> bytes | None:
    """The bytes of urlsafe base64 ``text`` (padding optional), or None for anything
    else: no other characters, no whitespace, no standard-alphabet ``+`` or ``/``."""
    body = text.rstrip("=")
    if len(text) - len(body) > 2 or not body or not set(body) <= _URLSAFE_ALPHABET:
        return None
    try:
        return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None


def insecure_url_problem(url: str) -> str | None:
    """Why a webhook URL is refused: not http(s), or plain http to a remote host."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return None
    return "must be an https:// URL (plain http only to localhost)"


def credential_problem(text: str) -> str | None:
    """Why ``text`` is too weak to guard an operator surface reachable over a network."""
    if len(text) < MIN_CREDENTIAL_CHARS:
        return (
            f"must be at least {MIN_CREDENTIAL_CHARS} characters, not {len(text)} "
            "(make one: openssl rand -hex 32)"
        )
    return None


def tls_files_problem(certfile: str | None, keyfile: str | None) -> str | None:
    """Why a server cannot serve TLS with ``certfile`` and ``keyfile`` (PEM; the
    certificate file may carry its chain): one given without the other, or they do not
    load (missing, unreadable, not PEM, or a key that does not match). None: neither
    given, or both load."""
    if certfile is None and keyfile is None:
        return None
    if certfile is None or keyfile is None:
        return "a TLS certificate and its key go together: give both files or neither"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as exc:
        shown = f" ({exc.reason})" if exc.reason else ""
        return (
            f"cannot load the TLS certificate {certfile} with the key {keyfile}: not a PEM "
            f"certificate and its matching private key{shown}"
        )
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return f"cannot load the TLS certificate {certfile} with the key {keyfile}: {reason}"
    return None


def hook_problem(text: str) -> str | None:
    """Why ``text`` is neither a webhook URL nor a ``package.module:function`` path."""
    if "://" in text:
        return insecure_url_problem(text)
    if DOTTED_PATH.fullmatch(text):
        return None
    return f"must be an https:// URL or a dotted path package.module:function, not {text[:60]!r}"


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r}"
    return None


def database_url_problem(url: str) -> str | None:
    """Why sheetsync cannot run on the database at ``url``."""
    scheme, separator, _ = url.partition("://")
    if separator and scheme.lower() in DATABASE_SCHEMES:
        return None
    shown = scheme.lower() if separator else "a URL without a scheme"
    return (
        f"sheetsync runs on SQLite (sqlite:///path) or PostgreSQL "
        f"(postgresql://user@host/db), not {shown}"
    )


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` is not a Redis URL sheetsync can connect to (plain, TLS, Sentinel)."""
    from sheetsync import redis_urls

    scheme = url.partition("://")[0].lower()
    if scheme not in (*redis_urls.SENTINEL_SCHEMES, *redis_urls.PLAIN_SCHEMES):
        return "must be a redis:// or rediss:// (or redis+sentinel://) URL"
    try:
        if scheme in redis_urls.SENTINEL_SCHEMES:
            redis_urls.parse_sentinel(url)
        else:
            redis_urls.split_tls(url)
    except ValueError as exc:
        return str(exc)
    return None


def import_callable(dotted: str, variable: str) -> Callable[..., object]:
    """The function ``package.module:function`` names, for the setting ``variable``;
    ConfigError (one line) if it cannot be imported or is not callable."""
    module_name, _, name = dotted.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(
            f"{variable}: cannot import {dotted!r} (expected package.module:function)"
        ) from None
    if not callable(found):
        raise ConfigError(f"{variable}: {dotted!r} is not callable")
    function: Callable[..., object] = found
    return function
