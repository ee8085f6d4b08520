"""gspread, as its users run it, against the emulator: the only change is the endpoint.

gspread has Google's URLs built in (``gspread.urls``) and takes a ``requests`` session
of the caller's (``gspread.Client(credentials, session=...)``). A google-auth
``AuthorizedSession`` with a transport adapter mounted on Google's Sheets host sends every
Sheets call to the emulator instead; the token refreshes at the emulator's token URI.
Nothing of gspread is patched.
"""

from __future__ import annotations

from typing import Any

import gspread
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials
from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter

GOOGLE_SHEETS = "https://sheets.googleapis.com"


class ToEmulator(HTTPAdapter):
    """Sends what is addressed to Google's Sheets API to the emulator at ``url``."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url.rstrip("/")

    def send(self, request: PreparedRequest, **kwargs: Any) -> Response:
        assert request.url is not None
        request.url = request.url.replace(GOOGLE_SHEETS, self.url, 1)
        return super().send(request, **kwargs)


def gspread_client(url: str, refresh_token: str) -> gspread.Client:
    """A gspread client of the account with ``refresh_token``, talking to the emulator."""
    credentials = Credentials(
        token=None,
        refresh_token=refresh_token,
        token_uri=f"{url}/token",
        client_id="x",
        client_secret="y",
    )
    session = AuthorizedSession(credentials)
    session.mount(f"{GOOGLE_SHEETS}/", ToEmulator(url))
    return gspread.Client(credentials, session=session)
