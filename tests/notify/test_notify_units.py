"""Narrow checks of the notification rules: settings, the once-an-hour claim, and what
happens when the task cannot be sent. The end-to-end tests are in test_owner_hook.py."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest

from sheetsync import notify
from sheetsync.dispatch import set_dispatcher
from sheetsync.errors import ConfigError
from sheetsync.redis_keys import owner_notified_key
from sheetsync.settings import Settings
from sheetsync.startup import check_settings


class Recording:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail = fail

    def send_notification(self, notification: dict[str, Any]) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.sent.append(notification)


@pytest.fixture
def dispatcher() -> Any:
    recording = Recording()
    set_dispatcher(recording)  # type: ignore[arg-type]
    yield recording
    set_dispatcher(None)


def settings(**values: Any) -> Settings:
    return Settings(owner_hook="support.notify_hooks:record", **values)


@pytest.mark.parametrize(
    ("hook", "problem"),
    [
        ("http://hooks.example.com/x", "must be an https:// URL (plain http only to localhost)"),
        ("ftp://example.com/hook", "must be an https:// URL"),
        ("just words", "must be an https:// URL or a dotted path package.module:function"),
    ],
)
def test_a_bad_hook_is_one_line(hook: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.load(owner_hook=hook)
    assert str(caught.value).startswith(f"SHEETSYNC_OWNER_HOOK: {problem}")
    assert "\n" not in str(caught.value)


def test_check_settings_imports_a_dotted_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHEETSYNC_OWNER_HOOK", "support.notify_hooks:nothing_here")
    with pytest.raises(ConfigError, match=r"cannot import 'support\.notify_hooks:nothing_here'"):
        check_settings()
    monkeypatch.setenv("SHEETSYNC_OWNER_HOOK", "https://hooks.example.com/owners")
    assert check_settings().owner_hook is not None


def test_once_per_owner_and_topic(dispatcher: Recording) -> None:
    client = fakeredis.FakeRedis()
    for _ in range(3):
        notify.notify(client, notify.CREDENTIAL_INVALID, "u1", form_id="f1", settings=settings())
    notify.notify(client, notify.LINK_PAUSED, "u1", link_id=7, settings=settings())
    notify.notify(client, notify.CREDENTIAL_INVALID, "u2", settings=settings())
    assert [(n["topic"], n["owner"]) for n in dispatcher.sent] == [
        (notify.CREDENTIAL_INVALID, "u1"),
        (notify.LINK_PAUSED, "u1"),
        (notify.CREDENTIAL_INVALID, "u2"),
    ]
    assert 3590 < client.ttl(owner_notified_key("u1", notify.CREDENTIAL_INVALID)) <= 3600
    first = notify.Notification.from_json(dispatcher.sent[0])
    assert first.message.startswith("Reconnect Google")
    assert set(first.to_json()) == {
        "topic", "owner", "form_id", "link_id", "spreadsheet_id", "message", "time"
    }  # fmt: skip


def test_a_send_that_fails_releases_the_claim() -> None:
    client = fakeredis.FakeRedis()
    set_dispatcher(Recording(fail=True))  # type: ignore[arg-type]
    try:
        assert not notify.notify(client, notify.LINK_FAILED, "u1", settings=settings())
    finally:
        set_dispatcher(None)
    assert not client.exists(owner_notified_key("u1", notify.LINK_FAILED))


def test_delivery_failed_releases_the_claim(dispatcher: Recording) -> None:
    client = fakeredis.FakeRedis()
    notify.notify(client, notify.LINK_FAILED, "u1", settings=settings())
    notify.delivery_failed(client, notify.Notification.from_json(dispatcher.sent[0]))
    assert notify.notify(client, notify.LINK_FAILED, "u1", settings=settings())


def test_backoff_doubles() -> None:
    configured = settings(owner_hook_retry_base_s=2)
    assert [notify.retry_delay_s(n, configured) for n in (1, 2, 3)] == [2, 4, 8]


def test_no_hook_no_claim(dispatcher: Recording) -> None:
    client = fakeredis.FakeRedis()
    assert not notify.notify(client, notify.LINK_FAILED, "u1", settings=Settings())
    assert not client.keys() and not dispatcher.sent
