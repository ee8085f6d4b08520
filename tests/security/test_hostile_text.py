"""Text that reaches a person: error texts in the CLI, URLs in `status`, alerts in Slack.

Error texts come from outside (Google, a database driver, an operator's typo) and may
carry rich markup or terminal escape sequences; URLs carry passwords; alert text lands
in a Slack channel, where ``<!channel>`` pings everyone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from support.alerts import AlertSink
from support.cli import Cli
from support.waiting import wait_until

from sheetsync.alerts import drain_alerts, send_alert, slack_text
from sheetsync.dev.local import free_port, redis_answers
from sheetsync.settings import Settings

HOSTILE = "bad [/] [bold red]markup[/] \x1b[2J\x1b]0;title\x07 \x9b31m end"


@pytest.mark.parametrize("command", [["dlq", "list"], ["dlq", "show", "{id}"]])
def test_dlq_listings_show_hostile_error_text_literally(cli: Cli, command: list[str]) -> None:
    entry_id = cli.add_dead_letter(error_message=HOSTILE)

    result = cli.ok(*[part.format(id=entry_id) for part in command])

    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\x9b" not in result.stdout
    assert "[/]" in result.stdout  # shown, not read as markup
    assert "[bold red]markup[/]" in result.stdout
    assert "\\x1b[2J" in result.stdout  # the escape is shown as text


def test_dlq_show_json_keeps_the_text_as_stored(cli: Cli) -> None:
    entry_id = cli.add_dead_letter(error_message=HOSTILE)

    shown = json.loads(cli.ok("dlq", "show", str(entry_id), "--json").stdout)

    assert shown["error_message"] == HOSTILE  # JSON escapes it; a script gets the truth


@pytest.fixture(scope="module")
def redis_with_password() -> Iterator[int]:
    """A redis-server of its own that requires ``hunter2secret``; yields its port."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not on PATH")
    port = free_port()
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            "hunter2secret",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: redis_answers(f"redis://:hunter2secret@127.0.0.1:{port}/0"), timeout=10)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2secret@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password=hunter2secret",
        "redis://default:hunter2secret@127.0.0.1:{port}/0?socket_timeout=5",
    ],
)
def test_status_never_prints_a_password_in_a_url(
    cli: Cli, redis_with_password: int, url: str
) -> None:
    env = {"SHEETSYNC_REDIS_URL": url.format(port=redis_with_password)}

    shown = cli.ok("status", env=env)
    as_json = cli.ok("status", "--json", env=env)

    for result in (shown, as_json):
        assert "hunter2secret" not in result.stdout + result.stderr
    assert f"127.0.0.1:{redis_with_password}" in shown.stdout
    assert "***" in shown.stdout


def test_alert_text_cannot_ping_or_link_in_slack() -> None:
    sink = AlertSink()
    try:
        settings = Settings.load(alert_webhook_url=sink.url)
        assert send_alert("form <!channel> <https://evil.example|click> & more", settings=settings)
        drain_alerts(5)  # the alert is posted by this process's sender thread
    finally:
        sink.close()
    [sent] = sink.texts
    assert "<!channel>" not in sent and "<https://" not in sent
    assert "&lt;!channel&gt;" in sent and "&amp; more" in sent


def test_slack_text_escapes_exactly_the_three_control_characters() -> None:
    assert slack_text("a < b > c & d") == "a &lt; b &gt; c &amp; d"
    assert slack_text("plain [text] *bold*") == "plain [text] *bold*"
