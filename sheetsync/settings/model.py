"""Settings: one frozen, typed object read from ``SHEETSYNC_*`` environment variables.

pydantic-settings does the parsing: it is well kept, types every field, and its errors
name the field, which we turn into one line that names the variable. Secrets are
``SecretStr`` or kept out of the repr. The fields are :mod:`sheetsync.settings.fields`;
each field's own check (its :class:`~sheetsync.settings.meta.Setting`) runs here, and so
do the rules that join several settings.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import os
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from sheetsync.errors import ConfigError
from sheetsync.redis_keys import DEFAULT_GOOGLE_CLIENT, RateKind
from sheetsync.settings import checks
from sheetsync.settings.fields import Fields
from sheetsync.settings.meta import ENV_PREFIX, setting_of

#: ``SHEETSYNC_*`` variables that are read elsewhere, not settings (tests, benchmarks, CLI).
NON_SETTING_VARIABLES = ("SHEETSYNC_CLI_TRACEBACK", "SHEETSYNC_TEST_", "SHEETSYNC_BENCH_")

log = logging.getLogger("sheetsync.settings")


@dataclass(frozen=True)
class RateLimits:
    """Sheets requests of one kind per window: for one Google account, for the project."""

    account: int
    project: int


_CLIENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class GoogleClient:
    """An OAuth client, and its Cloud project's limits (None: the general settings')."""

    name: str
    client_id: str | None
    client_secret: SecretStr | None
    write_limit_per_project: int | None = None
    read_limit_per_project: int | None = None


class Settings(Fields):
    """Everything sheetsync reads from the environment. Immutable once built.

    Each field's docstring is its description in the docs' settings reference, and its
    :class:`~sheetsync.settings.meta.Setting` says which processes it takes effect in and
    how its value is checked.
    """

    _google_clients: dict[str, GoogleClient] = PrivateAttr(default_factory=dict)

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        """An optional text setting set to "" is unset (``SHEETSYNC_BROKER_URL=``)."""
        if value == "" and info.field_name in _optional_text(cls):
            return None
        return value

    @field_validator("*")
    @classmethod
    def _check_value(cls, value: Any, info: ValidationInfo) -> Any:
        """The check the field declares, on the parsed value (a secret's text)."""
        assert info.field_name is not None  # a field validator's, always
        check = setting_of(cls.model_fields[info.field_name]).check
        if check is None or value is None:
            return value
        problem = check(_text(value))
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check_google(self) -> Settings:
        # A client secret (and with it refresh tokens and decrypted rows) goes only to
        # Google over https, unless this is a development setup on purpose.
        if self.google_client_secret is None or self.development:
            return self
        for name, url in (
            ("google_api_endpoint", self.google_api_endpoint),
            ("google_token_uri", self.google_token_uri),
        ):
            if not url.lower().startswith("https://"):
                raise ValueError(
                    f"{ENV_PREFIX}{name.upper()}: is not https, and a client secret is set: "
                    f"sheetsync would send the secret, refresh tokens and answers to it in "
                    f"plain text (unset it to use Google; for the emulator set "
                    f"{ENV_PREFIX}DEVELOPMENT=true)"
                )
        return self

    @model_validator(mode="after")
    def _load_google_clients(self) -> Settings:
        if self.google_clients_file is not None:
            clients = _read_google_clients(self.google_clients_file)
            self._google_clients = {client.name: client for client in clients}
        return self

    @model_validator(mode="after")
    def _check_delays(self) -> Settings:
        # Celery's Redis transport runs a task twice once its countdown passes the
        # visibility timeout, so every delay sent as a countdown must stay below it.
        limit = self.visibility_timeout_s
        # (a float power: 2 ** 7200 as an int times a float would raise OverflowError)
        longest_retry = self.retry_base_s * 2.0 ** min(self.retry_max, 1000)
        for name, value in (
            ("flush_delay_s", self.flush_delay_s),
            ("rate_window_s", self.rate_window_s + self.rate_margin_s),
            ("retry_base_s", longest_retry),
            ("google_timeout_s", self.google_timeout_s),
        ):
            if value >= limit:
                raise ValueError(
                    f"{ENV_PREFIX}{name.upper()}: gives a countdown of {value:g} s, which must "
                    f"stay below SHEETSYNC_VISIBILITY_TIMEOUT_S ({limit:g} s)"
                )
        return self

    def rate_limits(self, kind: RateKind) -> RateLimits:
        """Requests of ``kind`` per window: its own setting where set, else the general
        one of its scope (``RATE_LIMIT_PER_ACCOUNT``, ``RATE_LIMIT_PER_PROJECT``)."""
        if kind == "read":
            account, project = self.rate_read_limit_per_account, self.rate_read_limit_per_project
        else:
            account, project = self.rate_write_limit_per_account, self.rate_write_limit_per_project
        return RateLimits(
            account=self.rate_limit_per_account if account is None else account,
            project=self.rate_limit_per_project if project is None else project,
        )

    def rate_limit(
        self,
        kind: RateKind,
        scope: Literal["account", "project"],
        google_client: str = DEFAULT_GOOGLE_CLIENT,
    ) -> int:
        """Requests of ``kind`` per window, for one account or for the project of
        ``google_client``."""
        limits = self.rate_limits(kind)
        if scope == "account":
            return limits.account
        client = self.google_client(google_client)
        own = client.read_limit_per_project if kind == "read" else client.write_limit_per_project
        return limits.project if own is None else own

    def google_client(self, name: str | None) -> GoogleClient:
        """The OAuth client a credential names (None: ``GOOGLE_CLIENT_ID``'s)."""
        if name is None or name == DEFAULT_GOOGLE_CLIENT:
            return GoogleClient(
                DEFAULT_GOOGLE_CLIENT, self.google_client_id, self.google_client_secret
            )
        client = self._google_clients.get(name)
        if client is None:
            raise ConfigError(
                f"an owner's credential names the Google client {name!r}, which "
                f"{ENV_PREFIX}GOOGLE_CLIENTS_FILE does not hold"
            )
        return client

    @property
    def google_clients(self) -> tuple[str, ...]:
        """The names of every OAuth client, the default first."""
        return (DEFAULT_GOOGLE_CLIENT, *self._google_clients)

    @property
    def celery_broker_url(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def pii_key_bytes(self) -> tuple[bytes, ...]:
        keys = (checks.strict_urlsafe_b64decode(k.get_secret_value()) for k in self.pii_keys)
        return tuple(key for key in keys if key is not None)  # all valid: checked at load

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Read the environment; a bad value raises one-line :class:`ConfigError`.

        A ``SHEETSYNC_*`` variable that is not a setting (a typo, most likely) is logged
        as a warning: it is not an error, because platforms set variables of their own
        (Kubernetes adds ``<SERVICE>_PORT`` for every service).
        """
        try:
            settings = cls(**overrides)
        except ValidationError as exc:
            raise ConfigError(_one_line(exc)) from None
        for warning in unknown_variables(os.environ):
            if warning not in _warned:  # settings are read again (CLI, tests): say it once
                _warned.add(warning)
                log.warning("%s", warning, extra={"event": "settings.unknown_variable"})
        return settings


def _text(value: Any) -> Any:
    """What a check gets: a secret's text, a tuple's items so; anything else as it is."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, tuple):
        return tuple(_text(item) for item in value)
    return value


def _is_optional_text(field: FieldInfo) -> bool:
    annotation = field.annotation
    if not isinstance(annotation, types.UnionType):
        return False
    members = set(typing.get_args(annotation)) - {type(None)}
    return type(None) in typing.get_args(annotation) and members <= {str, SecretStr}


@functools.cache
def _optional_text(model: type[Fields]) -> frozenset[str]:
    """The fields of ``model`` that are optional text (``str | None``, a secret's too)."""
    return frozenset(name for name, field in model.model_fields.items() if _is_optional_text(field))


#: The unknown-variable warnings this process gave already.
_warned: set[str] = set()


def unknown_variables(environ: Any) -> list[str]:
    """One line per ``SHEETSYNC_*`` variable in ``environ`` that is not a setting."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    lines = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        if name.startswith(NON_SETTING_VARIABLES):
            continue
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"{name} is not a sheetsync setting and is ignored{hint}")
    return lines


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["loc"]:
        variable = f"{ENV_PREFIX}{str(error['loc'][0]).upper()}"
        return f"{variable}: {message}"
    return message


@functools.cache
def _load_once() -> Settings | ConfigError:
    try:
        return Settings.load()
    except ConfigError as exc:
        return exc


def get_settings() -> Settings:
    """The process-wide settings, read and checked once: a bad value is found once, and
    every later call raises the same one-line error at once."""
    loaded = _load_once()
    if isinstance(loaded, ConfigError):
        raise ConfigError(str(loaded))
    return loaded


def reset_settings() -> None:
    """Forget the cached settings (tests and the CLI change the environment)."""
    _load_once.cache_clear()


def _read_google_clients(path: str) -> list[GoogleClient]:
    """The clients of ``GOOGLE_CLIENTS_FILE``; a ValueError naming the variable on any
    fault (never a secret's text)."""
    where = f"{ENV_PREFIX}GOOGLE_CLIENTS_FILE ({path})"
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where}: cannot be read as JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: must be an object of clients by name")
    clients = []
    for name, entry in data.items():
        if not _CLIENT_NAME.fullmatch(name) or name == DEFAULT_GOOGLE_CLIENT:
            raise ValueError(
                f"{where}: client name {name[:40]!r} must match [a-z0-9][a-z0-9_-]{{0,31}} "
                f"and not be {DEFAULT_GOOGLE_CLIENT!r}"
            )
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(field), str) and entry[field]
            for field in ("client_id", "client_secret")
        ):
            raise ValueError(f"{where}: client {name!r} needs client_id and client_secret")
        limits = {}
        for field in ("write_limit_per_project", "read_limit_per_project"):
            value = entry.get(field)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{where}: client {name!r}: {field} must be an integer >= 1")
            limits[field] = value
        unknown = sorted(set(entry) - {"client_id", "client_secret", *limits})
        if unknown:
            raise ValueError(f"{where}: client {name!r}: unknown field(s) {', '.join(unknown)}")
        clients.append(
            GoogleClient(name, entry["client_id"], SecretStr(entry["client_secret"]), **limits)
        )
    return clients
