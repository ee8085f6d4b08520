"""google-api-python-client and google-auth, as a user runs them, against the emulator."""

from __future__ import annotations

from typing import Any

from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build

from sheets_emulator import EmulatorServer


def build_sheets(server: EmulatorServer, http: Any) -> Any:
    return build(
        "sheets",
        "v4",
        http=http,
        static_discovery=True,
        client_options={"api_endpoint": server.url},
    )


def credentials(server: EmulatorServer, refresh_token: str, client_id: str = "x") -> Credentials:
    return Credentials(
        token=None,
        refresh_token=refresh_token,
        token_uri=server.token_uri,
        client_id=client_id,
        client_secret="y",
    )
