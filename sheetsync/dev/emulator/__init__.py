"""A local Sheets API v4 emulator: google-api-python-client and google-auth talk to it
unchanged (``client_options={"api_endpoint": server.url}``, ``token_uri=server.token_uri``).

- :class:`EmulatorServer`: the emulator on a background thread (tests, demos).
- :func:`serve`: the emulator in the foreground (``sheetsync emulator``).
- :class:`EmulatorAdmin`: a client for its ``/_emulator/`` admin API.
"""

from sheetsync.dev.emulator.admin import EmulatorAdmin, EmulatorAdminError
from sheetsync.dev.emulator.quotas import QuotaLimits
from sheetsync.dev.emulator.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    EmulatorServer,
    EmulatorStartError,
    serve,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "EmulatorAdmin",
    "EmulatorAdminError",
    "EmulatorServer",
    "EmulatorStartError",
    "QuotaLimits",
    "serve",
]
