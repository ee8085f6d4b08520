"""The optional parts of sheetsync, each installed by an extra (pyproject.toml's
``[project.optional-dependencies]``): a part whose extra is missing says so in one line
that names the ``pip install`` to run, instead of failing on an import.

The core (``pip install sheetsync``) is what a web app needs to emit answers and what
the flush workers and beat need, on SQLite. The rest is opt-in:

- ``web``: ``sheetsync web``, the operators' console (Starlette, Jinja2, uvicorn);
- ``metrics``: ``sheetsync metrics``, the Prometheus exporter;
- ``postgres``: a PostgreSQL ``SHEETSYNC_DATABASE_URL`` (psycopg);
- ``flower``: ``python -m sheetsync.celery.flower``.

The Sheets API emulator (``sheetsync emulator``, the demos) is not an extra but a
package of its own, ``sheets-emulator``, for development only.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Literal

from sheetsync.errors import ConfigError

Extra = Literal["web", "metrics", "postgres", "flower"]

#: The top-level modules each extra installs that sheetsync imports.
MODULES: dict[Extra, tuple[str, ...]] = {
    "web": ("starlette", "jinja2", "uvicorn", "python_multipart"),
    "metrics": ("prometheus_client",),
    "postgres": ("psycopg",),
    "flower": ("flower", "tornado"),
}


class MissingExtraError(ConfigError):
    """A part of sheetsync was asked for whose extra is not installed."""


def install_command(extra: Extra) -> str:
    """What to run to add ``extra``: ``pip install 'sheetsync[web]'``."""
    return f"pip install 'sheetsync[{extra}]'"


def missing_message(what: str, extra: Extra) -> str:
    """``sheetsync web: needs the [web] extra: pip install 'sheetsync[web]'``."""
    return f"{what}: needs the [{extra}] extra: {install_command(extra)}"


def missing_modules(extra: Extra) -> list[str]:
    """The modules of ``extra`` this environment cannot import (found, not imported)."""
    return [name for name in MODULES[extra] if find_spec(name) is None]


def require(extra: Extra, what: str) -> None:
    """Raise a one-line :class:`MissingExtraError` unless ``extra`` is installed;
    ``what`` names the part that needs it (``sheetsync web``)."""
    if missing_modules(extra):
        raise MissingExtraError(missing_message(what, extra))


def extra_providing(module: str) -> Extra | None:
    """The extra that installs ``module`` (a dotted name is taken by its top level)."""
    top = module.partition(".")[0]
    for extra, names in MODULES.items():
        if top in names:
            return extra
    return None
