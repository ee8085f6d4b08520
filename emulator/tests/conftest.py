"""Fixtures for the emulator tests: one server for the session, reset before each test.

Clients are what a user runs: google-api-python-client over google-auth's
``AuthorizedHttp`` for the Sheets API, :class:`EmulatorAdmin` for the admin API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httplib2
import pytest
from emulator_support.google import build_sheets, credentials
from google_auth_httplib2 import AuthorizedHttp

from sheets_emulator import EmulatorAdmin, EmulatorServer

Connect = Callable[..., Any]


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[EmulatorServer]:
    with EmulatorServer() as server:
        yield server


@pytest.fixture
def emulator_admin(emulator_server: EmulatorServer) -> EmulatorAdmin:
    admin = EmulatorAdmin(emulator_server.url)
    admin.reset()
    return admin


@pytest.fixture
def connect(emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin) -> Connect:
    """``connect("alice")``: register the account; return its ``service.spreadsheets()``
    (its tokens minted for the OAuth client ``client_id``).

    The resource is built once per client: googleapiclient spends ~0.1 s of CPU building
    ``spreadsheets()`` (it renders docstrings for every method), so callers keep it.
    """

    def connect(
        account_id: str = "owner",
        *,
        register: bool = True,
        timeout: float = 5.0,
        client_id: str = "x",
    ) -> Any:
        refresh_token = f"refresh-{account_id}"
        if register:
            emulator_admin.add_account(account_id, refresh_token)
        creds = credentials(emulator_server, refresh_token, client_id)
        http = AuthorizedHttp(creds, http=httplib2.Http(timeout=timeout))
        return build_sheets(emulator_server, http).spreadsheets()

    return connect


@pytest.fixture
def anonymous_sheets(emulator_server: EmulatorServer) -> Any:
    """``service.spreadsheets()`` over a plain ``httplib2.Http``: no bearer token at all."""
    return build_sheets(emulator_server, httplib2.Http(timeout=5)).spreadsheets()
