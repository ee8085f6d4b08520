"""Google accounts, their refresh tokens, and the access tokens the token endpoint issues.

Revoking an account invalidates its refresh tokens and its access tokens at once.
Registering the account again (with the same or a new refresh token) restores it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from sheets_emulator.api_errors import ApiError, OAuthError

#: Seconds an access token lives, as Google reports it.
ACCESS_TOKEN_LIFETIME_S = 3599
#: The scope granted when the client asks for none.
DEFAULT_SCOPE = "https://www.googleapis.com/auth/spreadsheets"


@dataclass
class Account:
    account_id: str
    refresh_tokens: set[str] = field(default_factory=set)
    revoked: bool = False


@dataclass(frozen=True)
class AccessToken:
    account_id: str
    expires_at: float
    #: The OAuth client it was minted for: its Cloud project's quotas apply.
    client_id: str = ""


class AccountBook:
    def __init__(self) -> None:
        self.accounts: dict[str, Account] = {}
        self._owner_of_refresh_token: dict[str, str] = {}
        self._access_tokens: dict[str, AccessToken] = {}

    def register(self, account_id: str, refresh_token: str) -> Account:
        """Add the account (or restore a revoked one) with ``refresh_token`` valid for it."""
        account = self.accounts.setdefault(account_id, Account(account_id))
        if account.revoked:
            account.revoked = False
            account.refresh_tokens.clear()
        previous_owner = self._owner_of_refresh_token.get(refresh_token)
        if previous_owner is not None and previous_owner != account_id:
            self.accounts[previous_owner].refresh_tokens.discard(refresh_token)
        account.refresh_tokens.add(refresh_token)
        self._owner_of_refresh_token[refresh_token] = account_id
        return account

    def revoke(self, account_id: str) -> bool:
        """Invalidate every token of the account; False when it is unknown."""
        account = self.accounts.get(account_id)
        if account is None:
            return False
        account.revoked = True
        for token in account.refresh_tokens:
            self._owner_of_refresh_token.pop(token, None)
        self._access_tokens = {
            token: access
            for token, access in self._access_tokens.items()
            if access.account_id != account_id
        }
        return True

    def account_for_refresh_token(self, refresh_token: str) -> str | None:
        return self._owner_of_refresh_token.get(refresh_token)

    def refresh(self, refresh_token: str, now: float, client_id: str = "") -> tuple[str, str]:
        """Exchange a refresh token for (account id, new access token for ``client_id``)."""
        account_id = self._owner_of_refresh_token.get(refresh_token)
        if account_id is None or self.accounts[account_id].revoked:
            raise OAuthError(400, "invalid_grant", "Token has been expired or revoked.")
        self._expire(now)
        access_token = "ya29.emulator-" + secrets.token_urlsafe(24)
        self._access_tokens[access_token] = AccessToken(
            account_id, now + ACCESS_TOKEN_LIFETIME_S, client_id
        )
        return account_id, access_token

    def authenticate(self, authorization: str | None, now: float) -> str:
        """The account of a ``Bearer`` header, or the 401 :class:`ApiError` Google sends."""
        return self.access_token(authorization, now).account_id

    def access_token(self, authorization: str | None, now: float) -> AccessToken:
        """The live token of a ``Bearer`` header (its account and client), or the 401."""
        scheme, _, token = (authorization or "").partition(" ")
        access = self._access_tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if access is None or access.expires_at <= now:
            raise ApiError.unauthenticated()
        return access

    def _expire(self, now: float) -> None:
        expired = [
            token for token, access in self._access_tokens.items() if access.expires_at <= now
        ]
        for token in expired:
            del self._access_tokens[token]
