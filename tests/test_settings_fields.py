"""Every setting carries its own metadata (sheetsync.settings.meta.Setting: the processes
it takes effect in, the check of its value), and what is read from it is what the
settings did before it moved onto the fields: the same checks with the same one-line
errors, "" unsetting the same optional settings, the same rate limits."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from sheetsync.crypto import generate_key
from sheetsync.errors import ConfigError
from sheetsync.redis_keys import RATE_KINDS
from sheetsync.settings import Process, RateLimits, Setting, Settings, setting_of
from sheetsync.settings import checks as setting_checks

#: The settings whose value has a check of its own, and a value each refuses, with the
#: start of the one-line error.
REFUSED = {
    "redis_url": ("mysql://db", "must be a redis:// or rediss://"),
    "broker_url": ("amqp://guest@localhost//", "must be a redis:// or rediss://"),
    "database_url": ("mysql://app@db/forms", "sheetsync runs on SQLite"),
    "pii_keys": ("A" * 43 + "=", "key #1 is too weak"),
    "timezone": ("Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
    "alert_webhook_url": ("http://hooks.example.com/x", "must be an https:// URL"),
    "owner_hook": ("not a hook", "must be an https:// URL or a dotted path"),
    "web_token": ("short", "must be at least 32 characters"),
}
#: The optional settings an empty variable leaves unset.
EMPTY_IS_UNSET = {
    "broker_url",
    "google_client_id",
    "google_client_secret",
    "google_clients_file",
    "alert_webhook_url",
    "link_authorizer",
    "web_token",
    "owner_hook",
}
SCOPES: tuple[Literal["account", "project"], ...] = ("account", "project")
SPECIFIC_RATES = {
    ("read", "account"): "rate_read_limit_per_account",
    ("write", "account"): "rate_write_limit_per_account",
    ("read", "project"): "rate_read_limit_per_project",
    ("write", "project"): "rate_write_limit_per_project",
}


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_carries_its_metadata(name: str) -> None:
    field = Settings.model_fields[name]
    setting = setting_of(field)
    assert setting.readers, name
    assert all(isinstance(process, Process) for process in setting.readers), name
    assert all(isinstance(note, str) for note in setting.readers.values()), name
    assert field.description, f"{name} has no docstring"


def test_a_field_without_its_metadata_is_found() -> None:
    class Bare(BaseSettings):
        plain: int = Field(1)

    with pytest.raises(LookupError, match="one Setting"):
        setting_of(Bare.model_fields["plain"])
    with pytest.raises(ValueError, match="at least one process"):
        Setting({})


def test_the_settings_with_a_check_are_the_ones_that_had_one() -> None:
    checked = {name for name, f in Settings.model_fields.items() if setting_of(f).check}
    assert checked == set(REFUSED)


@pytest.mark.parametrize("name", list(REFUSED))
def test_each_check_refuses_in_one_line_naming_the_variable(name: str) -> None:
    value, message = REFUSED[name]
    with pytest.raises(ConfigError) as raised:
        Settings.load(**{name: value})
    assert str(raised.value).startswith(f"SHEETSYNC_{name.upper()}: {message}"), raised.value


def test_a_check_gets_a_secret_as_text_and_a_key_list_item_by_item() -> None:
    good, weak = generate_key(), "A" * 43 + "="
    assert setting_checks.pii_keys_problem((good, weak)) == (
        "key #2 is too weak (almost every byte the same): generate one with sheetsync keys generate"
    )
    with pytest.raises(ConfigError, match=r"^SHEETSYNC_PII_KEYS: key #2 is too weak"):
        Settings.load(pii_keys=f"{good},{weak}")
    with pytest.raises(ConfigError, match=r"^SHEETSYNC_PII_KEYS: holds an empty key"):
        Settings.load(pii_keys=f"{good},")
    settings = Settings.load(pii_keys=f" {good} ", web_token="x" * 32)
    assert [key.get_secret_value() for key in settings.pii_keys] == [good]
    assert isinstance(settings.web_token, SecretStr)


def test_a_huge_retry_count_is_one_line_not_an_overflow() -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.load(retry_max=7200)
    assert str(raised.value).startswith("SHEETSYNC_RETRY_BASE_S: gives a countdown of "), raised


def test_an_empty_value_unsets_the_same_optional_settings() -> None:
    settings = Settings.load(**dict.fromkeys(EMPTY_IS_UNSET, ""))
    assert {name for name in EMPTY_IS_UNSET if getattr(settings, name) is not None} == set()
    for name, field in Settings.model_fields.items():
        if name in EMPTY_IS_UNSET or name == "pii_keys" or field.annotation is str:
            continue
        with pytest.raises(ConfigError, match=f"^SHEETSYNC_{name.upper()}: "):
            Settings.load(**{name: ""})


def test_the_rate_limits_default_to_the_general_setting_of_their_scope() -> None:
    settings = Settings.load(rate_limit_per_account=7, rate_limit_per_project=70)
    for kind in RATE_KINDS:
        assert settings.rate_limits(kind) == RateLimits(account=7, project=70)
        assert settings.rate_limit(kind, "account") == 7
        assert settings.rate_limit(kind, "project") == 70


@pytest.mark.parametrize(("kind", "scope"), list(SPECIFIC_RATES))
def test_each_specific_rate_setting_sets_its_own_limit_alone(kind: str, scope: str) -> None:
    settings = Settings.load(**{SPECIFIC_RATES[kind, scope]: 3})
    for other_kind in RATE_KINDS:
        for other_scope in SCOPES:
            expected = {"account": 60, "project": 300}[other_scope]
            if (other_kind, other_scope) == (kind, scope):
                expected = 3
            limits = settings.rate_limits(other_kind)
            assert getattr(limits, other_scope) == expected, (other_kind, other_scope)
            assert settings.rate_limit(other_kind, other_scope) == expected


def test_more_google_clients_come_from_a_file_each_with_its_projects_limits(tmp_path) -> None:
    path = tmp_path / "clients.json"
    path.write_text(
        '{"acme": {"client_id": "a-id", "client_secret": "a-secret",'
        ' "write_limit_per_project": 900}}'
    )
    settings = Settings.load(google_clients_file=str(path), rate_limit_per_project=70)
    assert settings.google_clients == ("default", "acme")
    acme = settings.google_client("acme")
    assert (acme.client_id, acme.client_secret.get_secret_value()) == ("a-id", "a-secret")
    assert settings.rate_limit("write", "project", "acme") == 900
    assert settings.rate_limit("read", "project", "acme") == 70  # the general one
    assert settings.rate_limit("write", "project") == 70  # the default client's
    assert settings.google_client(None).name == "default"
    with pytest.raises(ConfigError, match="names the Google client 'other'"):
        settings.google_client("other")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json", "cannot be read as JSON"),
        ('["acme"]', "must be an object of clients by name"),
        ('{"Acme!": {}}', "client name 'Acme!' must match"),
        ('{"default": {}}', "and not be 'default'"),
        ('{"acme": {"client_id": "x"}}', "needs client_id and client_secret"),
        (
            '{"acme": {"client_id": "x", "client_secret": "s", "write_limit_per_project": 0}}',
            "write_limit_per_project must be an integer >= 1",
        ),
        (
            '{"acme": {"client_id": "x", "client_secret": "s", "secret": "s"}}',
            "unknown field(s) secret",
        ),
    ],
)
def test_a_bad_google_clients_file_is_one_line_naming_the_variable(
    tmp_path, content: str, says: str
) -> None:
    path = tmp_path / "clients.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        Settings.load(google_clients_file=str(path))
    message = str(caught.value)
    assert "SHEETSYNC_GOOGLE_CLIENTS_FILE" in message and says in message, message
    assert "\n" not in message
