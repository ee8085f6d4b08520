"""Settings that would leak secrets or weaken keys are refused once, at start-up; the
emulator (a development tool with no auth) stays on loopback unless asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sheetsync import emit_answer_submitted
from sheetsync.crypto import generate_key
from sheetsync.errors import ConfigError
from sheetsync.settings import (
    DEFAULT_GOOGLE_API_ENDPOINT,
    DEFAULT_GOOGLE_TOKEN_URI,
    Settings,
)
from sheetsync.startup import check_settings

SCRIPT = Path(sys.executable).with_name("sheetsync")


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "http://hooks.example.com/x", "ftp://example.com/hook", "hooks"],
)
def test_a_webhook_must_be_https_unless_on_loopback(url: str) -> None:
    with pytest.raises(ConfigError, match="SHEETSYNC_ALERT_WEBHOOK_URL: must be an https"):
        Settings.load(alert_webhook_url=url)


@pytest.mark.parametrize(
    "url", ["https://hooks.slack.com/services/T/B/x", "http://127.0.0.1:9000/hook"]
)
def test_https_and_loopback_webhooks_are_accepted(url: str) -> None:
    settings = Settings.load(alert_webhook_url=url)
    assert settings.alert_webhook_url is not None


@pytest.mark.parametrize(
    "key",
    [
        generate_key().replace("-", "+").replace("_", "/") + "+/",  # the standard alphabet
        generate_key()[:-2] + "!!",
        "A" * 43 + "=",  # all zero bytes
        "AQEB" * 10 + "AQE=",  # one byte repeated
    ],
    ids=["standard-alphabet", "stray-characters", "all-zero", "repeated"],
)
def test_a_malformed_or_weak_pii_key_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match="SHEETSYNC_PII_KEYS: key #1"):
        Settings.load(pii_keys=key)


def test_a_generated_key_is_accepted_with_or_without_padding() -> None:
    key = generate_key()
    assert Settings.load(pii_keys=f"{key},{key.rstrip('=')}").pii_key_bytes[0]


def test_the_defaults_point_at_google_over_https() -> None:
    settings = Settings.load(google_client_secret="real")
    assert settings.google_api_endpoint == DEFAULT_GOOGLE_API_ENDPOINT
    assert settings.google_token_uri == DEFAULT_GOOGLE_TOKEN_URI
    assert DEFAULT_GOOGLE_API_ENDPOINT.startswith("https://")


@pytest.mark.parametrize("variable", ["google_api_endpoint", "google_token_uri"])
def test_a_client_secret_is_never_paired_with_a_plain_http_endpoint(variable: str) -> None:
    with pytest.raises(ConfigError, match=f"SHEETSYNC_{variable.upper()}: is not https"):
        Settings.load(google_client_secret="real", **{variable: "http://emulator:8085"})
    # An explicit development setup may.
    Settings.load(google_client_secret="x", development=True, **{variable: "http://e:8085"})


def test_a_contradiction_is_found_once_at_start_up_not_in_every_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SHEETSYNC_FLUSH_DELAY_S", "7200")
    loads = []
    real_load = Settings.load.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        Settings, "load", classmethod(lambda cls, **kw: loads.append(1) or real_load(cls, **kw))
    )

    with pytest.raises(ConfigError, match="SHEETSYNC_FLUSH_DELAY_S: "):
        check_settings()  # the web app's start-up
    for _ in range(3):  # had it started anyway: the same line, without checking again
        with pytest.raises(ConfigError, match="SHEETSYNC_FLUSH_DELAY_S: "):
            emit_answer_submitted("answer_1")

    assert len(loads) == 1


def test_the_emulator_refuses_a_non_loopback_host_without_the_flag(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(SCRIPT), "emulator", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "0.0.0.0 is not a loopback address" in line and "--allow-remote" in line


def listening_sockets() -> str:
    """The local addresses of IPv4 TCP sockets, as /proc/net/tcp shows them (hex)."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return " ".join(line.split()[1] for line in lines)


def test_the_emulator_listens_on_a_remote_interface_only_when_asked(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEETSYNC_")}
    process = subprocess.Popen(
        [str(SCRIPT), "emulator", "--host", "0.0.0.0", "--port", "0", "--allow-remote"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        port = int(first.rstrip().rsplit(":", 1)[1])
        assert f"00000000:{port:04X}" in listening_sockets(), first  # every interface
    finally:
        process.terminate()
        process.wait(timeout=30)
