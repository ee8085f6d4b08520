"""The optional parts of sheetsync, each installed by an extra (pyproject.toml's
``[project.optional-dependencies]``): a part whose extra is missing says so in one line
that names the ``pip install`` to run, instead of failing on an import.

The distribution is ``sheetsync-stream`` (``sheetsync`` on PyPI is another project);
the import name and the command are ``sheetsync``. Its core (``pip install
sheetsync-stream``) is what a web app needs to emit answers, check its settings and run
sheetsync's migrations, on SQLite. The rest is opt-in:

- ``worker``: the flush workers, beat and the ``sheetsync`` command line (Celery,
  Google's client, Typer and Rich);
- ``web``: ``sheetsync web``, the operators' console (Starlette, Jinja2, uvicorn);
- ``metrics``: ``sheetsync metrics``, the Prometheus exporter;
- ``postgres``: a PostgreSQL ``SHEETSYNC_DATABASE_URL`` (psycopg);
- ``flower``: ``python -m sheetsync.celery.flower``.

``web``, ``metrics`` and ``flower`` bring ``worker`` with them. The Sheets API emulator
(``sheetsync emulator``, the demos) is not an extra but a distribution of its own,
``sheetsync-emulator``, for development only.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Literal

from sheetsync.errors import ConfigError

Extra = Literal["worker", "web", "metrics", "postgres", "flower"]

#: The distribution's name on a package index.
DISTRIBUTION = "sheetsync-stream"
#: The emulator's, and how to install it from a checkout until it is released.
EMULATOR_INSTALL = "pip install sheetsync-emulator (from a checkout: pip install ./emulator)"

#: The top-level modules each extra installs that sheetsync imports.
MODULES: dict[Extra, tuple[str, ...]] = {
    "worker": ("celery", "googleapiclient", "google_auth_httplib2", "orjson", "typer", "rich"),
    "web": ("starlette", "jinja2", "uvicorn", "python_multipart"),
    "metrics": ("prometheus_client",),
    "postgres": ("psycopg",),
    "flower": ("flower", "tornado", "celery"),
}


class MissingExtraError(ConfigError):
    """A part of sheetsync was asked for whose extra is not installed."""


def install_command(extra: Extra) -> str:
    """What to run to add ``extra``: ``pip install 'sheetsync-stream[web]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_message(what: str, extra: Extra) -> str:
    """``sheetsync web: needs the [web] extra: pip install 'sheetsync-stream[web]'``."""
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
