"""``GET /o/oauth2/v2/auth``: Google's OAuth 2 authorization endpoint, and its codes.

Google shows a person its consent screen, then sends their browser back to the app's
``redirect_uri`` with a ``code`` and the app's ``state`` (or ``error=access_denied``).
The token endpoint (:mod:`sheets_emulator.oauth`) exchanges the code, once, for an
access token, a refresh token and an ID token.

The emulator's consent page asks for the Google account (any id: it is the ID token's
``sub``, and the account is created if it is new), the scopes to grant (Google lets a
person untick one) and Allow or Deny. Its form is a GET of the same URL with parameters
of the emulator's own, which a test adds itself to skip the page:

- ``emulator_account``: the account that consents;
- ``emulator_decision``: ``allow`` or ``deny``;
- ``emulator_scope`` (repeatable): the scopes granted besides ``openid``, ``email`` and
  ``profile``; without it, every scope asked for.

As Google does, a refresh token comes with a code of ``access_type=offline`` the first
time an account grants this client offline access, and again only with
``prompt=consent``; after the account was revoked, the next consent is a first one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from aiohttp import web
from multidict import MultiMapping

from sheets_emulator.accounts import AccountBook
from sheets_emulator.api_errors import OAuthError
from sheets_emulator.responses import STATE_KEY
from sheets_emulator.state import EmulatorState

#: Where Google's authorization endpoint lives (on accounts.google.com).
AUTHORIZATION_PATH = "/o/oauth2/v2/auth"
#: Seconds a code may wait for its exchange. Google publishes no figure: its codes are
#: short-lived.
CODE_LIFETIME_S = 600
#: Seconds an ID token is valid, as Google's are.
ID_TOKEN_LIFETIME_S = 3600
#: The ``iss`` of Google's ID tokens.
ISSUER = "https://accounts.google.com"
#: Scopes Google grants without a checkbox (who the person is).
IDENTITY_SCOPES = frozenset({"openid", "email", "profile"})
#: Any other scope is one of Google's APIs.
_API_SCOPE = re.compile(r"^https://www\.googleapis\.com/auth/[A-Za-z0-9._/-]+$")
_PROMPTS = frozenset({"none", "consent", "select_account"})
#: Google's ``sub``: up to 255 ASCII characters; the emulator takes printable ones.
_ACCOUNT_ID = re.compile(r"^[\x21-\x7e]{1,255}$")
#: The parameters of the emulator's own, never sent back to the app.
_OWN_PARAMETERS = ("emulator_account", "emulator_decision", "emulator_scope")


class ConsentError(Exception):
    """A request the authorization endpoint refuses with an error page, as Google does
    (Google never sends such a request back to a redirect URI it cannot trust)."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description


@dataclass(frozen=True)
class AuthorizationRequest:
    """The parameters of ``/o/oauth2/v2/auth`` that Google documents."""

    client_id: str
    redirect_uri: str
    scopes: tuple[str, ...]
    access_type: str
    prompt: frozenset[str]
    state: str | None
    login_hint: str
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> AuthorizationRequest:
        """The request, checked in Google's order; :class:`ConsentError` otherwise."""
        client_id = query.get("client_id", "")
        if not client_id:
            raise ConsentError("invalid_request", "Missing required parameter: client_id")
        redirect_uri = query.get("redirect_uri", "")
        if not redirect_uri:
            raise ConsentError("invalid_request", "Missing required parameter: redirect_uri")
        parts = urlsplit(redirect_uri)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ConsentError(
                "invalid_request", f"Invalid parameter value for redirect_uri: {redirect_uri}"
            )
        response_type = query.get("response_type", "")
        if not response_type:
            raise ConsentError("invalid_request", "Required parameter is missing: response_type")
        if response_type != "code":
            raise ConsentError(
                "unsupported_response_type",
                f"The emulator serves response_type=code only, not {response_type}",
            )
        scopes = tuple(dict.fromkeys(query.get("scope", "").split()))
        if not scopes:
            raise ConsentError("invalid_request", "Missing required parameter: scope")
        invalid = [s for s in scopes if s not in IDENTITY_SCOPES and not _API_SCOPE.match(s)]
        if invalid:
            raise ConsentError(
                "invalid_scope", f"Some requested scopes were invalid. {{invalid={invalid}}}"
            )
        access_type = query.get("access_type", "online")
        if access_type not in ("online", "offline"):
            raise ConsentError("invalid_request", f"Invalid access_type: {access_type}")
        prompt = frozenset(query.get("prompt", "").split())
        if prompt - _PROMPTS or ("none" in prompt and len(prompt) > 1):
            raise ConsentError("invalid_request", f"Invalid prompt: {query.get('prompt')}")
        code_challenge = query.get("code_challenge") or None
        method = query.get("code_challenge_method", "plain" if code_challenge else "")
        if code_challenge is not None and method not in ("plain", "S256"):
            raise ConsentError("invalid_request", f"Invalid code_challenge_method: {method}")
        return cls(
            client_id=client_id,
            redirect_uri=redirect_uri,
            scopes=scopes,
            access_type=access_type,
            prompt=prompt,
            state=query.get("state"),
            login_hint=query.get("login_hint", ""),
            nonce=query.get("nonce") or None,
            code_challenge=code_challenge,
            code_challenge_method=method,
        )

    def granted(self, chosen: Sequence[str] | None) -> tuple[str, ...]:
        """The scopes granted: the identity scopes asked for, and ``chosen`` of the others
        (every one when ``chosen`` is None: the person ticked nothing off)."""
        if chosen is None:
            return self.scopes
        kept = set(chosen)
        return tuple(s for s in self.scopes if s in IDENTITY_SCOPES or s in kept)


@dataclass(frozen=True)
class Grant:
    """What one authorization code stands for, until its exchange."""

    client_id: str
    redirect_uri: str
    account_id: str
    scopes: tuple[str, ...]
    #: A refresh token comes with the exchange.
    offline: bool
    #: On the state's clock.
    expires_at: float
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str


class ConsentBook:
    """The codes issued and not yet exchanged, and which accounts granted which client
    offline access. It lives as long as the account book it goes with
    (:func:`consent_book`), so ``POST /_emulator/reset`` forgets it with the accounts."""

    def __init__(self) -> None:
        self._codes: dict[str, Grant] = {}
        self._spent: set[str] = set()
        self._offline: set[tuple[str, str]] = set()

    def consent(
        self,
        request: AuthorizationRequest,
        account_id: str,
        scopes: tuple[str, ...],
        *,
        first_again: bool,
        now: float,
    ) -> str:
        """The person allowed: a new code. ``first_again``: the account is new or was
        revoked since, so a consent for offline access is a first one again."""
        key = (account_id, request.client_id)
        if first_again:
            self._offline.discard(key)
        offline = request.access_type == "offline" and (
            "consent" in request.prompt or key not in self._offline
        )
        if request.access_type == "offline":
            self._offline.add(key)
        code = "4/emulator-" + secrets.token_urlsafe(24)
        self._codes[code] = Grant(
            client_id=request.client_id,
            redirect_uri=request.redirect_uri,
            account_id=account_id,
            scopes=scopes,
            offline=offline,
            expires_at=now + CODE_LIFETIME_S,
            nonce=request.nonce,
            code_challenge=request.code_challenge,
            code_challenge_method=request.code_challenge_method,
        )
        return code

    def account_of(self, code: str) -> str | None:
        """The account a code was issued for (None when unknown), without spending it."""
        grant = self._codes.get(code)
        return grant.account_id if grant is not None else None

    def redeem(
        self,
        code: str,
        *,
        client_id: str,
        redirect_uri: str,
        code_verifier: str | None,
        now: float,
    ) -> Grant:
        """Spend a code; Google's token-endpoint errors when it cannot be."""
        grant = self._codes.get(code)
        if grant is None:
            if code in self._spent:  # used already
                raise OAuthError(400, "invalid_grant", "Bad Request")
            raise OAuthError(400, "invalid_grant", "Malformed auth code.")
        if grant.expires_at <= now:
            del self._codes[code]
            self._spent.add(code)
            raise OAuthError(400, "invalid_grant", "Bad Request")
        if grant.client_id != client_id:
            raise OAuthError(400, "invalid_grant", "Bad Request")
        if grant.redirect_uri != redirect_uri:
            raise OAuthError(400, "redirect_uri_mismatch", "Bad Request")
        if grant.code_challenge is not None:
            if not code_verifier:
                raise OAuthError(400, "invalid_grant", "Missing code verifier.")
            if not hmac.compare_digest(
                _challenge(code_verifier, grant.code_challenge_method), grant.code_challenge
            ):
                raise OAuthError(400, "invalid_grant", "Invalid code verifier.")
        del self._codes[code]
        self._spent.add(code)
        return grant


def _challenge(verifier: str, method: str) -> str:
    if method == "plain":
        return verifier
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


_books: weakref.WeakKeyDictionary[AccountBook, ConsentBook] = weakref.WeakKeyDictionary()


def consent_book(state: EmulatorState) -> ConsentBook:
    """The state's consents: kept with its account book, and gone with it on reset."""
    book = _books.get(state.accounts)
    if book is None:
        book = _books[state.accounts] = ConsentBook()
    return book


def new_refresh_token() -> str:
    """A refresh token shaped like Google's (``1//...``)."""
    return "1//emulator-" + secrets.token_urlsafe(32)


def id_token(grant: Grant, client_secret: str) -> str:
    """An OpenID Connect ID token for the grant: ``iss``, ``azp``, ``aud`` (the client),
    ``sub`` (the account), ``iat``, ``exp`` and the request's ``nonce``.

    Google signs its ID tokens with RS256 and publishes the keys; the emulator has no key
    pair and signs with HS256 over the client secret (OpenID Connect's symmetric
    signature). A client that decodes the token of the token endpoint's direct answer
    without checking the signature, as Google's OpenID Connect documentation allows,
    reads it as it reads Google's.
    """
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "azp": grant.client_id,
        "aud": grant.client_id,
        "sub": grant.account_id,
        "iat": now,
        "exp": now + ID_TOKEN_LIFETIME_S,
    }
    if grant.nonce is not None:
        claims["nonce"] = grant.nonce
    signing_input = f"{_b64_json({'alg': 'HS256', 'typ': 'JWT'})}.{_b64_json(claims)}"
    signature = hmac.new(client_secret.encode(), signing_input.encode(), hashlib.sha256)
    return f"{signing_input}.{_b64(signature.digest())}"


def _b64_json(value: Mapping[str, Any]) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


async def authorize(request: web.Request) -> web.StreamResponse:
    """The consent page; with ``emulator_decision``, the person's answer: back to the
    app's redirect URI with a code (or ``error=access_denied``) and its state."""
    state = request.app[STATE_KEY]
    query = request.query
    try:
        auth = AuthorizationRequest.parse(query)
        decision = query.get("emulator_decision")
        if decision is None:
            return _html(_consent_page(request.path, query, auth, state.accounts), 200)
        if decision == "deny":
            return _redirect(auth.redirect_uri, {"error": "access_denied"}, auth.state)
        if decision != "allow":
            raise ConsentError("invalid_request", "emulator_decision must be allow or deny")
        account_id = query.get("emulator_account", "").strip()
        if not _ACCOUNT_ID.match(account_id):
            raise ConsentError(
                "invalid_request",
                "emulator_account must be 1 to 255 printable ASCII characters, no spaces",
            )
    except ConsentError as error:
        return _html(_error_page(error), 400)
    chosen = query.getall("emulator_scope") if "emulator_scope" in query else None
    scopes = auth.granted(chosen)
    account = state.accounts.accounts.get(account_id)
    code = consent_book(state).consent(
        auth,
        account_id,
        scopes,
        first_again=account is None or account.revoked,
        now=state.clock(),
    )
    return _redirect(auth.redirect_uri, {"code": code, "scope": " ".join(scopes)}, auth.state)


def _redirect(redirect_uri: str, params: dict[str, str], state: str | None) -> web.Response:
    """A 302 to the redirect URI, its own query kept, with ``state`` first as Google's."""
    parts = urlsplit(redirect_uri)
    ours = ({"state": state} if state is not None else {}) | params
    query = urlencode([*parse_qsl(parts.query, keep_blank_values=True), *ours.items()])
    location = urlunsplit(parts._replace(query=query))
    return web.Response(status=302, headers={"Location": location, "Cache-Control": "no-store"})


def _html(text: str, status: int) -> web.Response:
    return web.Response(
        text=text,
        status=status,
        content_type="text/html",
        charset="utf-8",
        headers={"Cache-Control": "no-store"},
    )


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 36rem;
       color: #202124; }
code { word-break: break-all; }
li { margin: 0.3rem 0; }
input[type=text] { width: 100%; padding: 0.3rem; box-sizing: border-box; }
button { margin: 1rem 0.5rem 0 0; padding: 0.4rem 1.2rem; }
.muted { color: #5f6368; }
"""


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def _consent_page(
    path: str,
    query: MultiMapping[str],
    auth: AuthorizationRequest,
    accounts: AccountBook,
) -> str:
    hidden = "".join(
        f"<input type='hidden' name='{escape(name)}' value='{escape(value)}'>"
        for name, value in query.items()
        if name not in _OWN_PARAMETERS
    )
    scope_items = "".join(
        f"<li><code>{escape(scope)}</code> <span class='muted'>(who you are)</span></li>"
        if scope in IDENTITY_SCOPES
        else (
            f"<li><label><input type='checkbox' name='emulator_scope' "
            f"value='{escape(scope)}' checked> <code>{escape(scope)}</code></label></li>"
        )
        for scope in auth.scopes
    )
    known = "".join(
        f"<option value='{escape(account_id)}'>" for account_id in sorted(accounts.accounts)
    )
    access = (
        "offline: the app gets a refresh token"
        if auth.access_type == "offline"
        else "online: no refresh token"
    )
    body = (
        "<h1>Sign in with Google</h1>"
        "<p class='muted'>The Sheets API emulator's consent page: no password, any account."
        "</p>"
        f"<p>The app <code>{escape(auth.client_id)}</code> asks for:</p>"
        f"<form method='get' action='{escape(path)}'>{hidden}"
        "<input type='hidden' name='emulator_scope' value=''>"
        f"<ul>{scope_items}</ul>"
        f"<p class='muted'>Access: {escape(access)}. It will send you back to "
        f"<code>{escape(auth.redirect_uri)}</code>.</p>"
        "<label>Google account (the ID token's <code>sub</code>; a new one is created)"
        f"<input type='text' name='emulator_account' list='accounts' required "
        f"value='{escape(auth.login_hint)}'></label>"
        f"<datalist id='accounts'>{known}</datalist>"
        "<button type='submit' name='emulator_decision' value='allow'>Allow</button>"
        "<button type='submit' name='emulator_decision' value='deny' formnovalidate>"
        "Deny</button></form>"
    )
    return _page("Sign in with Google (emulator)", body)


def _error_page(error: ConsentError) -> str:
    body = (
        "<h1>Access blocked: this app's request is invalid</h1>"
        f"<p>Error 400: <code>{escape(error.error)}</code></p>"
        f"<p>{escape(error.description)}</p>"
    )
    return _page(f"Error 400: {error.error}", body)
