"""The protections a deployment's settings turn off on purpose (downgrades), one line
each: every process warns of them at start (:mod:`sheetsync.startup`), and ``sheetsync
status`` and the console show them."""

from __future__ import annotations

import ssl

from sheetsync import redis_urls
from sheetsync.settings import Settings
from sheetsync.text import mask_url


def downgrades(settings: Settings) -> list[str]:
    """One line per protection ``settings`` turn off on purpose, naming the setting;
    a URL shown is masked."""
    lines = []
    urls = (("REDIS_URL", settings.redis_url), ("BROKER_URL", settings.broker_url))
    for name, url in urls:
        tls = redis_urls.tls_of(url) if url else None
        if tls is None:
            continue
        where = f"SHEETSYNC_{name} has"
        if tls.cert_reqs == ssl.CERT_NONE:
            lines.append(
                f"{where} ssl_cert_reqs=none: Redis's certificate is not checked at all "
                f"({mask_url(url or '')}), so anyone on the path can read and change the "
                "traffic, the Redis password included"
            )
        elif not tls.check_hostname:
            lines.append(
                f"{where} ssl_check_hostname=false: any certificate of the CA passes for "
                f"Redis ({mask_url(url or '')})"
            )
    if settings.pii_accept_v1_tokens:
        lines.append(
            "SHEETSYNC_PII_ACCEPT_V1_TOKENS=true: version 1 personal-info tokens (bound to "
            "no row) decrypt wherever they are pasted; remove it once `sheetsync pii rotate "
            "--check` finds none left"
        )
    if settings.development:
        lines.append(
            "SHEETSYNC_DEVELOPMENT=true: the Google client secret, refresh tokens and "
            "answers may go to endpoints that are not https (the emulator's); never in "
            "production"
        )
    return lines
