"""``rediss://`` options: verification is on unless the URL turns it off, the options are
read once and reach redis-py and Celery alike, and a TLS failure is one line.

The refusals run against a real TLS-only ``redis-server`` whose certificate a throwaway
CA signed (:mod:`support.tls`); the parsing tests need no server.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cli import SCRIPT
from support.paths import ROOT
from support.tls import Pki, TlsRedis, make_ca, start_tls_redis, tls_client

from sheetsync import redis_urls
from sheetsync.celery.config import config_for
from sheetsync.dev.local import free_port
from sheetsync.errors import ConfigError
from sheetsync.settings import Settings
from sheetsync.startup import check_redis

PASSWORD = "tls-options-password"
VERIFIED = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": True}
needs_redis_server = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="needs redis-server"
)


# -- parsing: no server ----------------------------------------------------------------


def test_a_bare_rediss_url_verifies_the_chain_and_the_host_name() -> None:
    url, tls = redis_urls.split_tls("rediss://:pw@redis.example:6380/0")
    assert url == "rediss://:pw@redis.example:6380/0"
    assert tls is not None and tls.options() == VERIFIED
    assert redis_urls.split_tls("redis://redis.example/0") == ("redis://redis.example/0", None)


def test_the_options_leave_the_url_and_become_keyword_arguments() -> None:
    url, tls = redis_urls.split_tls(
        "rediss://h:6380/2?ssl_ca_certs=/etc/ca.pem&socket_timeout=3"
        "&ssl_certfile=/etc/c.pem&ssl_keyfile=/etc/c.key"
    )
    assert url == "rediss://h:6380/2?socket_timeout=3"
    assert tls is not None and tls.options() == {
        **VERIFIED,
        "ssl_ca_certs": "/etc/ca.pem",
        "ssl_certfile": "/etc/c.pem",
        "ssl_keyfile": "/etc/c.key",
    }
    unverified = redis_urls.tls_of("rediss://h/0?ssl_cert_reqs=none")
    assert unverified is not None
    assert unverified.options() == {"ssl_cert_reqs": ssl.CERT_NONE, "ssl_check_hostname": False}
    chain_only = redis_urls.tls_of("rediss://h/0?ssl_check_hostname=false")
    assert chain_only is not None
    assert chain_only.options() == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_check_hostname": False}


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("rediss://h/0?ssl_ca_cert=/ca.pem", "unknown TLS option ssl_ca_cert="),
        ("redis://h/0?ssl_ca_certs=/ca.pem", "ssl_ca_certs need a TLS URL (rediss://)"),
        ("rediss://h/0?ssl_cert_reqs=maybe", "ssl_cert_reqs=maybe: use required"),
        ("rediss://h/0?ssl_keyfile=/k.pem", "ssl_keyfile= needs ssl_certfile="),
        ("rediss://h/0?ssl_check_hostname=perhaps", "ssl_check_hostname=perhaps: use true"),
        ("rediss+sentinel://a:1/svc?ssl_certreqs=none", "unknown TLS option ssl_certreqs="),
    ],
)
def test_settings_refuse_a_tls_option_they_would_not_apply(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.load(redis_url=url)
    message = str(refused.value)
    assert "SHEETSYNC_REDIS_URL" in message and says in message, message
    assert "\n" not in message


def test_celery_gets_the_same_tls_as_the_buffers() -> None:
    """kombu hands ``broker_use_ssl`` to redis-py as it is; with sheetsync's transport
    class it is the only way TLS reaches the broker."""
    from celery import Celery

    url = "rediss://:pw@redis.example:6380/1?ssl_ca_certs=/etc/ca.pem"
    config = config_for(Settings.load(redis_url=url))
    assert config["broker_url"] == "rediss://:pw@redis.example:6380/1"
    assert config["broker_use_ssl"] == {**VERIFIED, "ssl_ca_certs": "/etc/ca.pem"}
    app = Celery("tls-config-test")
    app.conf.update(config)
    with app.connection_for_write() as connection:
        assert connection.ssl == config["broker_use_ssl"]
    assert config_for(Settings.load(redis_url="redis://h/0"))["broker_use_ssl"] is False


def test_a_tls_sentinel_url_gives_kombu_tls_to_the_sentinels_and_the_primary() -> None:
    broker = redis_urls.kombu_broker(
        "rediss+sentinel://:pw@a:26379,b:26380/svc/3?sentinel_password=sp&ssl_ca_certs=/ca.pem"
    )
    assert broker.url == "sentinel://:pw@a:26379/3;sentinel://:pw@b:26380/3"
    tls = {**VERIFIED, "ssl_ca_certs": "/ca.pem"}
    assert broker.use_ssl == tls
    assert broker.transport_options == {
        "master_name": "svc",
        "sentinel_kwargs": {"password": "sp", "ssl": True, **tls},
    }
    plain = redis_urls.kombu_broker("redis+sentinel://a:26379/svc")
    assert (plain.use_ssl, plain.transport_options) == (False, {"master_name": "svc"})


def _tls_section(page: str) -> str:
    text = (ROOT / "docs" / "operating" / page).read_text()
    return text.partition("\n## TLS to Redis\n")[2].partition("\n## ")[0]


def test_the_docs_name_every_tls_option_and_their_urls_verify() -> None:
    configuration = _tls_section("configuration.md")
    deployment = _tls_section("deployment.md")
    assert set(re.findall(r"`(ssl_\w+)=", configuration)) == set(redis_urls.TLS_OPTIONS)
    urls = re.findall(r"rediss(?:\+sentinel)?://[^\s'`]*@[^\s'`]+", configuration + deployment)
    assert len(urls) >= 5, urls
    for url in urls:
        Settings.load(redis_url=url)
        tls = redis_urls.tls_of(url)
        assert tls is not None and tls.options()["ssl_cert_reqs"] == ssl.CERT_REQUIRED, url


# -- refusals, against a TLS-only Redis ------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_ca(tmp_path / "pki")


def _server(pki: Pki, directory: Path, *, check_hostname: bool = True) -> Iterator[TlsRedis]:
    server = start_tls_redis(
        pki, free_port(), directory, client_certs=False, extra=["--requirepass", PASSWORD]
    )
    try:
        ready = tls_client(pki, server.port, password=PASSWORD, ssl_check_hostname=check_hostname)
        server.wait_ready(ready)
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls_redis(pki: Pki, tmp_path: Path) -> Iterator[TlsRedis]:
    """A TLS-only Redis whose certificate (127.0.0.1, localhost) the test CA signed."""
    yield from _server(pki, tmp_path)


def _refusal(url: str) -> str:
    with pytest.raises(ConfigError) as refused:
        check_redis(url, "SHEETSYNC_REDIS_URL", "Redis")
    message = str(refused.value)
    assert "\n" not in message and PASSWORD not in message, message
    return message


@pytest.mark.slow
@needs_redis_server
def test_the_default_refuses_an_unknown_ca_and_only_cert_reqs_none_skips_the_check(
    tls_redis: TlsRedis, pki: Pki, tmp_path: Path
) -> None:
    url = tls_redis.url(0, password=PASSWORD)
    shown = f"rediss://:***@127.0.0.1:{tls_redis.port}/0"
    message = _refusal(url)
    assert message.startswith(f"cannot reach Redis at {shown} (SHEETSYNC_REDIS_URL): "), message
    assert "certificate verify failed" in message
    assert "add ssl_ca_certs=/path/to/ca.pem to the URL" in message

    other = make_ca(tmp_path / "other", "another CA")
    assert "certificate verify failed" in _refusal(f"{url}?ssl_ca_certs={other.ca_cert}")

    check_redis(f"{url}?ssl_cert_reqs=none", "SHEETSYNC_REDIS_URL", "Redis")
    check_redis(f"{url}?ssl_ca_certs={pki.ca_cert}", "SHEETSYNC_REDIS_URL", "Redis")
    missing = tmp_path / "no-such-ca.pem"
    assert _refusal(f"{url}?ssl_ca_certs={missing}").endswith(f"cannot read ssl_ca_certs={missing}")

    plain = _refusal(url.replace("rediss://", "redis://"))
    assert plain.endswith("(a Redis that accepts only TLS needs a rediss:// URL)"), plain
    assert any("wrong version number" in line for line in tls_redis.tls_errors())


@pytest.mark.slow
@needs_redis_server
def test_the_host_name_is_checked_unless_the_url_says_not_to(tmp_path: Path) -> None:
    pki = make_ca(tmp_path / "pki", server_hosts=["redis.internal.example"])
    for server in _server(pki, tmp_path, check_hostname=False):
        url = f"{server.url(0, password=PASSWORD)}?ssl_ca_certs={pki.ca_cert}"
        message = _refusal(url)
        assert "certificate verify failed" in message and "IP address mismatch" in message
        check_redis(f"{url}&ssl_check_hostname=false", "SHEETSYNC_REDIS_URL", "Redis")


@pytest.mark.slow
@needs_redis_server
def test_a_worker_and_the_cli_stop_with_one_line_on_an_untrusted_certificate(
    pipeline_env: Callable[..., dict[str, str]], tls_redis: TlsRedis, tmp_path: Path
) -> None:
    url = tls_redis.url(0, password=PASSWORD)
    env = {
        **os.environ,
        **pipeline_env(redis_url=url, broker_url=url),
        "PYTHONWARNINGS": "ignore",  # Celery's warning about running as root is not ours
    }
    worker = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "sheetsync.celery", "worker", "--pool", "solo",
         "--without-mingle", "--without-gossip"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    status = subprocess.run(
        [str(SCRIPT), "status"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    for done in (worker, status):
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1, done.stdout + done.stderr
        assert f"rediss://:***@127.0.0.1:{tls_redis.port}/0" in lines[0]
        assert "certificate verify failed" in lines[0] and PASSWORD not in lines[0]
    assert worker.returncode == 1
