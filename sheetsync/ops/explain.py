"""Any failure as one line an operator can act on: the command line's and the console's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sheetsync.errors import ConfigError, SheetSyncError
from sheetsync.text import mask_url

if TYPE_CHECKING:
    from sqlalchemy.exc import DBAPIError


def _configured(name: str) -> str:
    """A URL from the settings, masked; ``?`` when the settings themselves are broken."""
    return mask_url(_configured_raw(name))


def _configured_raw(name: str) -> str:
    """A URL from the settings (to be masked before it is shown); ``?`` when the
    settings themselves are broken."""
    from sheetsync.settings import get_settings

    try:
        url: str = getattr(get_settings(), name)
    except ConfigError:
        return "?"
    return url


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe(exc: BaseException) -> str | None:
    """The one-line message for a failure we know how to explain, else None."""
    if isinstance(exc, SheetSyncError):
        return first_line(exc)
    # Only what this failure can be is imported: a module never loaded raised nothing.
    import sys

    if "redis" in sys.modules:
        import redis.exceptions

        from sheetsync.startup import describe_redis_error

        if isinstance(exc, redis.exceptions.RedisError):
            return describe_redis_error(exc, _configured_raw("redis_url"), "SHEETSYNC_REDIS_URL")
    if "kombu" in sys.modules:
        import kombu.exceptions

        if isinstance(exc, kombu.exceptions.OperationalError):
            return (
                f"cannot reach the Celery broker at {_configured('celery_broker_url')}: "
                f"{first_line(exc)}"
            )
    if "sqlalchemy" in sys.modules:
        import sqlalchemy.exc

        if isinstance(exc, sqlalchemy.exc.DBAPIError):
            return _describe_database(exc)
        if isinstance(exc, sqlalchemy.exc.ArgumentError):
            return f"SHEETSYNC_DATABASE_URL: {first_line(exc)}"
    if "alembic" in sys.modules:
        from alembic.util.exc import CommandError

        if isinstance(exc, CommandError):
            return f"migration failed: {first_line(exc)}"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return _describe_missing_module(exc.name)
    return None


def _describe_missing_module(name: str) -> str:
    from sheetsync import extras

    missing = f"the Python module {name} is not installed"
    extra = extras.extra_providing(name)
    if extra is None:
        return f"{missing}: reinstall {extras.DISTRIBUTION} with its dependencies"
    return f"{missing}: it comes with the [{extra}] extra: {extras.install_command(extra)}"


def _describe_database(exc: DBAPIError) -> str:
    from sheetsync.startup import describe_database_error

    return describe_database_error(exc, _configured_raw("database_url"))
