"""The PII audit: plaintext canaries anywhere but the sheets are leaks.

Every personal-info value of the run is a unique canary (``chaos.webapp.canary``) stored
encrypted; refresh tokens are secrets of the same kind. Their plaintext may appear in a
sheet and nowhere else: not in Redis (buffers, jobs, broker messages, whose bodies are
base64), not in a log, an alert or an error text in the database.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import Engine, text

from chaos.webapp import CANARY_PATTERN, REFRESH_TOKEN_PATTERN

_PATTERNS = {
    # A whole canary, a canary cut before its domain, or the domain left from a cut one.
    "personal info": re.compile(rf"(?:{CANARY_PATTERN})?@canary\.test|{CANARY_PATTERN}".encode()),
    "refresh token": re.compile(REFRESH_TOKEN_PATTERN.encode()),
}


@dataclass
class PiiAudit:
    #: (where, what) -> the distinct plaintexts found there.
    found: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    scanned: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def leaks(self) -> int:
        return sum(len(values) for values in self.found.values())

    def scan(self, where: str, data: bytes) -> None:
        self.scanned[where] += len(data)
        for what, pattern in _PATTERNS.items():
            for match in pattern.findall(data):
                self.found[(where, what)].add(match.decode(errors="replace"))

    def scan_redis(self, url: str, when: str) -> None:
        """Every key and value of every database of the server, broker bodies decoded."""
        client = redis.Redis.from_url(url, socket_timeout=5)
        try:
            databases = [int(name[2:]) for name in client.info("keyspace")]
            for db in databases:
                conn = redis.Redis.from_url(_with_db(url, db), socket_timeout=5)
                try:
                    for chunk in _redis_contents(conn):
                        raw = chunk if isinstance(chunk, bytes) else str(chunk).encode()
                        for data in _expand(raw):
                            self.scan(f"redis db {db} ({when})", data)
                finally:
                    conn.close()
        except redis.RedisError as exc:
            self.scanned[f"redis ({when}): unreadable, {type(exc).__name__}"] += 0
        finally:
            client.close()

    def scan_files(self, paths: list[Path]) -> None:
        for path in paths:
            self.scan(f"log {path.name}", path.read_bytes())

    def scan_database(self, engine: Engine) -> None:
        with engine.connect() as connection:
            for table in ("sheet_transaction", "dead_letter"):
                messages = connection.execute(
                    text(f"SELECT error_message FROM {table} WHERE error_message IS NOT NULL")
                ).scalars()
                self.scan(f"{table}.error_message", "\n".join(messages).encode())

    def scan_alerts(self, texts: list[str]) -> None:
        self.scan("alerts", "\n".join(texts).encode())


def _with_db(url: str, db: int) -> str:
    return f"{url.rpartition('/')[0]}/{db}"


def _redis_contents(client: redis.Redis) -> Iterator[Any]:
    """Every key, and every value by its type (redis-py answers bytes). Neither sheetsync
    nor Kombu's Redis transport writes streams."""
    for key in client.scan_iter(count=500):
        yield key
        kind = client.type(key)
        if kind == b"string":
            yield client.get(key) or b""
        elif kind == b"list":
            yield from client.lrange(key, 0, -1)
        elif kind == b"hash":
            for name, value in client.hgetall(key).items():
                yield name
                yield value
        elif kind == b"set":
            yield from client.smembers(key)
        elif kind == b"zset":
            yield from client.zrange(key, 0, -1)


def _expand(data: bytes) -> Iterator[bytes]:
    """The value, and the decoded bodies of any Kombu messages inside it."""
    yield data
    if not data.startswith((b"{", b"[")):
        return
    try:
        parsed = json.loads(data)
    except ValueError:
        return
    yield from _bodies(parsed)


def _bodies(value: Any) -> Iterator[bytes]:
    if isinstance(value, list):
        for item in value:
            yield from _bodies(item)
    elif isinstance(value, dict):
        body = value.get("body")
        encoding = (value.get("properties") or {}).get("body_encoding")
        if isinstance(body, str) and encoding == "base64":
            try:
                decoded = base64.b64decode(body)
            except (binascii.Error, ValueError):
                decoded = b""
            yield decoded
        for item in value.values():
            if isinstance(item, list | dict):
                yield from _bodies(item)
