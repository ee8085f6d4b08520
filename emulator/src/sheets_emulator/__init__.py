"""A local Google Sheets API v4 emulator: google-api-python-client, google-auth and
gspread talk to it unchanged but for the endpoint (``client_options={"api_endpoint":
server.url}``, ``token_uri=server.token_uri``).

- :class:`EmulatorServer`: the emulator on a background thread (tests, demos).
- :func:`serve`: the emulator in the foreground (the ``sheets-emulator`` command).
- :class:`EmulatorAdmin`: a client for its ``/_emulator/`` admin API.
- :class:`EmulatorError`: the root of every error it raises.
"""

from sheets_emulator.admin import EmulatorAdmin
from sheets_emulator.errors import (
    EmulatorAdminError,
    EmulatorConfigError,
    EmulatorError,
    EmulatorStartError,
)
from sheets_emulator.quotas import QuotaLimits
from sheets_emulator.server import DEFAULT_HOST, DEFAULT_PORT, EmulatorServer, serve

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "EmulatorAdmin",
    "EmulatorAdminError",
    "EmulatorConfigError",
    "EmulatorError",
    "EmulatorServer",
    "EmulatorStartError",
    "QuotaLimits",
    "__version__",
    "serve",
]
