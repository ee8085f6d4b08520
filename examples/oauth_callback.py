"""Connecting an owner's Google account: Google's consent screen, then the credential
sheetsync writes their sheets with. docs/integration/going-live.md walks through it, and
tests/docs/test_going_live.py runs it against the Sheets API emulator.

Two routes of a Flask app. Signing in is your app's: its login puts the user's id in the
session (``session["user_id"]``), and the user has a ``users`` row.

- ``GET /connect`` sends the signed-in owner to Google's consent screen. It asks for
  their spreadsheets and who they are, for offline access (a refresh token), with a
  ``state`` kept in their session.
- ``GET /oauth/callback`` is where Google sends them back. It checks the state,
  exchanges the code at Google's token endpoint, reads their Google account id from
  the ID token, stores the refresh token encrypted in ``google_credential`` and tells
  sheetsync, which replays the answers that waited for them.

The same code runs against Google and the emulator; only the environment differs:

    SHEETSYNC_GOOGLE_CLIENT_ID       your OAuth client, and its secret:
    SHEETSYNC_GOOGLE_CLIENT_SECRET   the same settings the workers refresh tokens with
    SHEETSYNC_GOOGLE_CLIENTS_FILE    optional: more clients, each of its own Cloud project
    OAUTH_CLIENT_BY_USER             optional: {"user id": "client name"}, which owner
                                     consents to which of them (your accounts table's
                                     column, in your app)
    SHEETSYNC_GOOGLE_TOKEN_URI       unset: Google's (the emulator's /token in development)
    GOOGLE_AUTH_URI                  unset: Google's (the emulator's /o/oauth2/v2/auth)
    OAUTH_REDIRECT_URI               the callback's URL, as registered for the client
    FLASK_SECRET_KEY                 signs the session cookie

    flask --app examples/oauth_callback.py run
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import requests
from flask import Flask, redirect, request, session, url_for
from flask.typing import ResponseReturnValue
from google.auth import jwt
from sqlalchemy.exc import SQLAlchemyError

import sheetsync
from sheetsync import crypto, db
from sheetsync.errors import ConfigError, SheetSyncError
from sheetsync.models import CredentialStatus, GoogleCredential
from sheetsync.redis_keys import DEFAULT_GOOGLE_CLIENT
from sheetsync.settings import GoogleClient, Settings, get_settings

#: Google's authorization endpoint; GOOGLE_AUTH_URI replaces it (the emulator's).
GOOGLE_AUTH_URI = "https://accounts.google.com/o/oauth2/v2/auth"
SHEETS_SCOPE = "https://www.googleapis.com/auth/spreadsheets"
#: Who the owner is (the ID token, its ``sub``), and their spreadsheets.
SCOPES = f"openid {SHEETS_SCOPE}"
#: The ``iss`` of Google's ID tokens.
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")

log = logging.getLogger(__name__)


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.from_prefixed_env()  # FLASK_SECRET_KEY -> SECRET_KEY
    if not app.secret_key:
        raise ConfigError("set FLASK_SECRET_KEY: it signs the session that holds the state")
    # Google's redirect back is a top-level GET from another site: a Lax cookie comes with it.
    app.config["SESSION_COOKIE_SAMESITE"] = app.config["SESSION_COOKIE_SAMESITE"] or "Lax"
    sheetsync.check_settings()
    settings = get_settings()
    if not (settings.google_client_id and settings.google_client_secret):
        raise ConfigError(
            "set SHEETSYNC_GOOGLE_CLIENT_ID and SHEETSYNC_GOOGLE_CLIENT_SECRET: the OAuth "
            "client the owners consent to"
        )

    @app.get("/connect")
    def connect() -> ResponseReturnValue:
        user_id = signed_in_user()
        if user_id is None:
            return "Sign in first.", 401
        client = settings.google_client(client_for(user_id))
        state = secrets.token_urlsafe(32)
        session["oauth_state"] = state  # bound to this browser's session, checked on return
        session["oauth_client"] = client.name  # the code is spent with the same client
        query = urlencode(
            {
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": redirect_uri(),
                "scope": SCOPES,
                "access_type": "offline",  # a refresh token, for the workers
                "prompt": "consent",  # a refresh token every time, not only the first
                "state": state,
            }
        )
        return redirect(f"{os.environ.get('GOOGLE_AUTH_URI') or GOOGLE_AUTH_URI}?{query}")

    @app.get("/oauth/callback")
    def oauth_callback() -> ResponseReturnValue:
        user_id = signed_in_user()
        expected = session.pop("oauth_state", None)
        client = settings.google_client(session.pop("oauth_client", None))
        if user_id is None:
            return "Sign in first.", 401
        returned = request.args.get("state", "").encode()
        if not isinstance(expected, str) or not hmac.compare_digest(expected.encode(), returned):
            return "This link is stale or not yours: connect Google again from your settings.", 400
        if "error" in request.args:  # access_denied: the owner said no
            return "Google was not connected: your sheets get no answers until you allow it.", 400
        try:
            tokens = exchange(settings, client, request.args.get("code", ""))
            account_id = google_account_id(tokens.get("id_token", ""), client)
        except GoogleRefused as refused:
            log.warning("Google connection of user %s failed: %s", user_id, refused)
            return "Google did not connect your account; please try again.", 502
        if SHEETS_SCOPE not in tokens.get("scope", "").split():
            return (
                "Google was connected without access to your spreadsheets: connect again "
                "and leave the Google Sheets box ticked.",
                400,
            )
        refresh_token = tokens.get("refresh_token")
        if not refresh_token:  # only without prompt=consent, for an account that consented before
            return "Google sent no refresh token; please connect again.", 502
        store_credential(user_id, account_id, refresh_token, tokens["scope"], client.name)
        try:
            # Marks it VALID (already done above) and makes the owner's dead letters due
            # now: beat replays them at its next pass. Its own transaction, after ours.
            sheetsync.credential_reconnected(user_id)
        except (SheetSyncError, SQLAlchemyError) as exc:
            log.warning(
                "user %s reconnected, but their dead letters were not made due (%s): "
                "run `sheetsync credentials reconnect %s`",
                user_id,
                type(exc).__name__,
                user_id,
            )
        return "Google is connected: your forms' answers go to your sheets."

    return app


def signed_in_user() -> str | None:
    """Your app's signed-in user (its login sets this)."""
    user_id = session.get("user_id")
    return user_id if isinstance(user_id, str) else None


def client_for(user_id: str) -> str | None:
    """The OAuth client this owner consents to, by its name in
    ``SHEETSYNC_GOOGLE_CLIENTS_FILE`` (an enterprise owner's own Cloud project, or one
    of several you spread owners over); None: ``SHEETSYNC_GOOGLE_CLIENT_ID``'s. Yours to
    decide, from your accounts table; here, from ``OAUTH_CLIENT_BY_USER``."""
    chosen = json.loads(os.environ.get("OAUTH_CLIENT_BY_USER") or "{}").get(user_id)
    return chosen if isinstance(chosen, str) else None


def redirect_uri() -> str:
    """The callback's URL, exactly as registered for the OAuth client, in the consent
    request and again in the code's exchange."""
    return os.environ.get("OAUTH_REDIRECT_URI") or url_for("oauth_callback", _external=True)


class GoogleRefused(Exception):  # noqa: N818 (reads as what happened)
    """The token endpoint refused the code, did not answer, or sent an unusable ID token."""


def exchange(settings: Settings, client: GoogleClient, code: str) -> dict[str, Any]:
    """The code for tokens: a POST to the token endpoint, authenticated with the client's
    secret. Only Google's error code is kept (never the code or a token)."""
    secret = client.client_secret
    try:
        response = requests.post(
            settings.google_token_uri,
            data={
                "grant_type": "authorization_code",
                "code": code,
                "client_id": client.client_id,
                "client_secret": secret.get_secret_value() if secret else "",
                "redirect_uri": redirect_uri(),
            },
            timeout=settings.google_timeout_s,
        )
    except requests.RequestException as exc:
        raise GoogleRefused(f"the token endpoint did not answer ({type(exc).__name__})") from None
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise GoogleRefused(f"the token endpoint answered {response.status_code}, not JSON")
    if response.status_code != 200:
        raise GoogleRefused(f"the token endpoint refused the code: {body.get('error')}")
    return body


def google_account_id(id_token: str, client: GoogleClient) -> str:
    """The ID token's ``sub``: the owner's Google account, stable and never reused.

    The token comes straight from the token endpoint, over HTTPS (sheetsync's settings
    refuse a plain-http one outside development) and for our client secret, so, as
    Google's OpenID Connect documentation allows, its signature is not checked; its
    issuer, audience and expiry are. An ID token from anywhere else (a browser) must be
    verified: ``google.oauth2.id_token.verify_oauth2_token``.
    """
    try:
        claims: dict[str, Any] = jwt.decode(id_token, verify=False)  # type: ignore[no-untyped-call]
    except ValueError:  # google-auth's MalformedError: not a JWT
        raise GoogleRefused("no usable ID token (is the openid scope asked for?)") from None
    if claims.get("iss") not in GOOGLE_ISSUERS or claims.get("aud") != client.client_id:
        raise GoogleRefused("an ID token for another issuer or client")
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or expires <= time.time():
        raise GoogleRefused("an expired ID token")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise GoogleRefused("an ID token without sub")
    return subject


def store_credential(
    user_id: str, account_id: str, refresh_token: str, scopes: str, client_name: str
) -> None:
    """Insert or update the owner's credential, the refresh token encrypted for them,
    with the client it was issued to (NULL for the default one).

    VALID in the same transaction: if this process stops before ``credential_reconnected``,
    the new token is still used (the dead letters then wait for their own retry time).
    """
    sealed = crypto.encrypt_refresh_token(refresh_token, user_id=user_id)
    google_client = None if client_name == DEFAULT_GOOGLE_CLIENT else client_name
    with db.get_sessionmaker().begin() as db_session:
        credential = db_session.get(GoogleCredential, user_id)
        if credential is None:
            db_session.add(
                GoogleCredential(
                    user_id=user_id,
                    google_account_id=account_id,
                    refresh_token=sealed,
                    scopes=scopes,
                    status=CredentialStatus.VALID,
                    google_client=google_client,
                )
            )
            return
        if credential.google_account_id != account_id:
            log.info("user %s connected another Google account than before", user_id)
        credential.google_account_id = account_id
        credential.refresh_token = sealed
        credential.scopes = scopes
        credential.google_client = google_client
        credential.status = CredentialStatus.VALID
