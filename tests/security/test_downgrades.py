"""Downgrades the operator wrote on purpose are said out loud (issue 29, C): Redis TLS
without certificate or host-name checks, version 1 tokens accepted, a development setup.
Each is one line of :func:`sheetsync.downgrades.downgrades`: warned at every process's start
(tests/test_startup.py starts one), shown by ``sheetsync status``
(tests/cli/test_cli_status.py) and on the console's overview (here)."""

from __future__ import annotations

import logging
import os

import pytest
from support.console import running_console

from sheetsync.downgrades import downgrades
from sheetsync.settings import NON_SETTING_VARIABLES, Settings
from sheetsync.startup import check_settings

PASSWORD = "hunter2-secret"
NO_CHECK = f"rediss://:{PASSWORD}@redis.example:6380/0?ssl_cert_reqs=none"
NO_HOSTNAME = (
    f"rediss+sentinel://:{PASSWORD}@s1:26379,s2:26379/sheetsync/0?ssl_check_hostname=false"
)


@pytest.fixture
def settings_with(monkeypatch: pytest.MonkeyPatch):
    """``settings_with(NAME=value, ...)``: the settings of exactly these variables."""

    def settings_with(**variables: str) -> Settings:
        for name in [n for n in os.environ if n.startswith("SHEETSYNC_")]:
            if not name.startswith(NON_SETTING_VARIABLES):
                monkeypatch.delenv(name)
        for name, value in variables.items():
            monkeypatch.setenv(f"SHEETSYNC_{name}", value)
        return Settings.load()

    return settings_with


def test_a_default_setup_has_no_downgrade(settings_with):
    assert downgrades(settings_with()) == []
    for reqs in ("required", "optional", "CERT_REQUIRED"):
        url = f"rediss://redis.example:6380/0?ssl_cert_reqs={reqs}&ssl_check_hostname=true"
        assert downgrades(settings_with(REDIS_URL=url)) == [], reqs


def test_each_downgrade_is_one_line_that_names_its_setting(settings_with):
    [no_check] = downgrades(settings_with(REDIS_URL=NO_CHECK))
    assert no_check.startswith("SHEETSYNC_REDIS_URL has ssl_cert_reqs=none: ")
    assert "rediss://:***@redis.example:6380/0" in no_check

    [no_hostname] = downgrades(settings_with(REDIS_URL="redis://r/0", BROKER_URL=NO_HOSTNAME))
    assert no_hostname.startswith("SHEETSYNC_BROKER_URL has ssl_check_hostname=false: ")

    [accepted] = downgrades(settings_with(PII_ACCEPT_V1_TOKENS="true"))
    assert accepted.startswith("SHEETSYNC_PII_ACCEPT_V1_TOKENS=true: ")

    [development] = downgrades(settings_with(DEVELOPMENT="true"))
    assert development.startswith("SHEETSYNC_DEVELOPMENT=true: ")

    everything = settings_with(
        REDIS_URL=NO_CHECK, BROKER_URL=NO_HOSTNAME, PII_ACCEPT_V1_TOKENS="1", DEVELOPMENT="yes"
    )
    lines = downgrades(everything)
    assert lines == [no_check, no_hostname, accepted, development]
    assert all("\n" not in line and PASSWORD not in line for line in lines)


def test_no_certificate_check_at_all_is_one_downgrade_not_two(settings_with):
    url = "rediss://redis.example:6380/0?ssl_cert_reqs=none&ssl_check_hostname=false"
    [line] = downgrades(settings_with(REDIS_URL=url))
    assert "ssl_cert_reqs=none" in line


def test_a_web_app_that_checks_its_settings_warns_once_per_downgrade(settings_with, caplog):
    caplog.set_level(logging.WARNING, logger="sheetsync.startup")
    settings_with(BROKER_URL=NO_HOSTNAME, DEVELOPMENT="true")

    check_settings()

    warnings = [r for r in caplog.records if r.name == "sheetsync.startup"]
    assert [r.levelno for r in warnings] == [logging.WARNING] * 2
    assert [r.getMessage() for r in warnings] == downgrades(Settings.load())
    assert not any(PASSWORD in r.getMessage() for r in warnings)


def test_the_console_overview_shows_each_downgrade(pipeline_env):
    env = pipeline_env(PII_ACCEPT_V1_TOKENS="true", BROKER_URL=NO_CHECK)
    with running_console(env) as console:
        page = console.request("/")
        assert page.status == 200
        for variable in (
            "SHEETSYNC_BROKER_URL has ssl_cert_reqs=none",
            "SHEETSYNC_PII_ACCEPT_V1_TOKENS=true",
            "SHEETSYNC_DEVELOPMENT=true",  # the emulator stands in for Google
        ):
            assert page.body.count(variable) == 1, variable
        assert "rediss://:***@redis.example:6380/0" in page.body
        assert PASSWORD not in page.body
