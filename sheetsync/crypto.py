"""Personal info at rest: AES-256-GCM tokens bound to where they belong, with key rotation.

A flush decrypts thousands of values per batch, so the cipher is AES-GCM (about 1 µs
per value here, against about 13 µs for Fernet). A token is the unpadded urlsafe
base64 of::

    version (1 byte) | key id (4 bytes) | nonce (12 bytes) | ciphertext + tag

The key id is the first 4 bytes of the key's SHA-256, so decryption picks its key
directly instead of trying each one. Every token is written as version 2: its
associated data is the version and key id, then its purpose and context (a
personal-info value: its answer id and question id; a refresh token: its user id).
Changing any byte of a token, or copying it to another answer, question or user, or
to the other purpose, makes it fail authentication, never decrypt.

Version 1 tokens (associated data: version and key id alone) are never written, and
read only while ``SHEETSYNC_PII_ACCEPT_V1_TOKENS`` is set: being bound to nothing, one
decrypts wherever it is pasted (another answer, another user's credential). An upgrade
from version 1 sets it while ``sheetsync pii rotate`` rewrites them as version 2
(``sheetsync pii rotate --check`` counts those left), then removes it.

Keys come from ``SHEETSYNC_PII_KEYS``: the first encrypts, every one decrypts. To
rotate, put a new key first, run :func:`sheetsync.rotation.rotate_pii`, then drop the old key once
:func:`check_pii` finds no token left under it.

Errors never include the value or the token.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sheetsync.errors import CryptoError, MissingKeyError, PiiKeysError, VersionOneTokenError
from sheetsync.settings import get_settings

#: The format every encryption writes: bound to a purpose and a context.
TOKEN_VERSION = 2
#: The format before contexts, read during the migration to version 2, never written.
LEGACY_TOKEN_VERSION = 1
#: Bytes of SHA-256(key) that name the key inside a token.
KEY_ID_BYTES = 4
#: AES-GCM's standard 96-bit nonce; random per value.
NONCE_BYTES = 12
#: AES-256.
KEY_BYTES = 32

_TAG_BYTES = 16
_HEADER_BYTES = 1 + KEY_ID_BYTES
_NONCE_END = _HEADER_BYTES + NONCE_BYTES
_MIN_TOKEN_BYTES = _HEADER_BYTES + NONCE_BYTES + _TAG_BYTES
_VERSION_BYTE = bytes([TOKEN_VERSION])
# binascii with a translation table is about twice as fast as base64.urlsafe_b64*.
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_PADDING = (b"", b"===", b"==", b"=")
_a2b_base64 = binascii.a2b_base64

# The purposes start every context; neither is a prefix of the other, and each field
# after them is length-prefixed, so no two (purpose, fields) share associated data.
_ANSWER_VALUE = b"sheetsync:answer-value"
_REFRESH_TOKEN = b"sheetsync:refresh-token"

VERSION_1_REFUSED = (
    "a version 1 personal-info token (bound to no row) is refused: set "
    "SHEETSYNC_PII_ACCEPT_V1_TOKENS=true while `sheetsync pii rotate` rewrites them"
)
EMPTY_KEYS_MESSAGE = (
    "SHEETSYNC_PII_KEYS is empty: set at least one key, the same as the web app's "
    "(on a first setup, `sheetsync keys generate` prints one)"
)


def generate_key() -> str:
    """A new random key, in the form ``SHEETSYNC_PII_KEYS`` expects."""
    return base64.urlsafe_b64encode(AESGCM.generate_key(bit_length=256)).decode("ascii")


def key_id(key: bytes) -> bytes:
    """The short, non-secret name of ``key`` written into each token."""
    return hashlib.sha256(key).digest()[:KEY_ID_BYTES]


# -- contexts --------------------------------------------------------------------------


#: 4-byte lengths of short fields, made once: ``int.to_bytes`` per row is measurable.
_LENGTHS = tuple(size.to_bytes(4, "big") for size in range(256))


def _field(value: str) -> bytes:
    """``value`` as UTF-8 after its length: fields never run into each other."""
    try:
        data = value.encode()
    except UnicodeEncodeError:  # a lone surrogate: still a context, never an error
        data = value.encode("utf-8", "surrogatepass")
    size = len(data)
    return (_LENGTHS[size] if size < 256 else size.to_bytes(4, "big")) + data


def answer_context(answer_id: str) -> bytes:
    """The start of every context of answer ``answer_id``'s values: append
    :func:`question_context` (the row builder computes this part once per answer)."""
    # _field, inlined: the row builder calls this once per row.
    try:
        data = answer_id.encode()
    except UnicodeEncodeError:
        data = answer_id.encode("utf-8", "surrogatepass")
    size = len(data)
    return _ANSWER_VALUE + (_LENGTHS[size] if size < 256 else size.to_bytes(4, "big")) + data


def question_context(question_id: str) -> bytes:
    """The end of an answer value's context: the question it answers."""
    return _field(question_id)


def answer_value_context(answer_id: str, question_id: str) -> bytes:
    """The context of a personal-info value: its purpose, answer and question."""
    return _ANSWER_VALUE + _field(answer_id) + _field(question_id)


def refresh_token_context(user_id: str) -> bytes:
    """The context of a refresh token: its purpose and its owner."""
    return _REFRESH_TOKEN + _field(user_id)


def _what(context: bytes) -> tuple[str, str]:
    """The kind of token a context is for, and where it belongs, for messages."""
    if context.startswith(_ANSWER_VALUE):
        return "personal-info token", "another answer or question"
    if context.startswith(_REFRESH_TOKEN):
        return "refresh token", "another user"
    return "PII token", "another context"


# -- the keyring -----------------------------------------------------------------------


class Keyring:
    """Keys by id, with their ciphers built once. The first key encrypts.

    Keys that cannot serve (none, or a malformed one) are the configuration's fault:
    :class:`PiiKeysError`, a ConfigError, never a credential's or an answer's failure.
    """

    __slots__ = ("_ciphers", "_header", "_primary", "accept_version_1", "primary_key_id")

    def __init__(
        self, keys: Sequence[bytes] | None = None, *, accept_version_1: bool | None = None
    ) -> None:
        if keys is None:
            keys = get_settings().pii_key_bytes
        if accept_version_1 is None:
            accept_version_1 = get_settings().pii_accept_v1_tokens
        #: Whether version 1 tokens (bound to no row) decrypt: SHEETSYNC_PII_ACCEPT_V1_TOKENS.
        self.accept_version_1 = accept_version_1
        if not keys:
            raise PiiKeysError(EMPTY_KEYS_MESSAGE)
        ciphers: dict[bytes, AESGCM] = {}
        seen: dict[bytes, bytes] = {}
        for position, key in enumerate(keys, start=1):
            if len(key) != KEY_BYTES:
                raise PiiKeysError(f"PII key #{position} must be {KEY_BYTES} bytes, not {len(key)}")
            ident = key_id(key)
            if ident in seen:
                if seen[ident] != key:
                    raise PiiKeysError(
                        f"PII key #{position} has the key id of an earlier, different key: "
                        "generate a new one"
                    )
                continue  # the same key listed twice
            seen[ident] = key
            ciphers[ident] = AESGCM(key)
        self._ciphers = ciphers
        self.primary_key_id = key_id(keys[0])
        self._primary = ciphers[self.primary_key_id]
        self._header = _VERSION_BYTE + self.primary_key_id

    def encrypt(self, plaintext: str, context: bytes) -> str:
        """A version 2 token under the primary key, bound to ``context`` (one of the
        ``*_context`` functions above)."""
        nonce = os.urandom(NONCE_BYTES)
        header = self._header
        sealed = self._primary.encrypt(nonce, plaintext.encode("utf-8"), header + context)
        encoded = binascii.b2a_base64(header + nonce + sealed, newline=False)
        return encoded.translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")

    def decrypt(self, token: str, context: bytes) -> str:
        """The plaintext of ``token``, if it was made for ``context`` (or is version 1,
        while those are accepted); :class:`CryptoError` otherwise,
        :class:`MissingKeyError` for an unknown key, :class:`VersionOneTokenError` for a
        version 1 token while they are refused."""
        # The hot path (thousands per flush) tries the happy case and only works out
        # what went wrong when it fails. A changed version byte or a cut token cannot
        # slip through: the header is authenticated, and a short tag fails.
        try:
            # _b64decode, inlined: a call less per value.
            raw = _a2b_base64(
                token.encode("ascii").translate(_FROM_URLSAFE) + _PADDING[len(token) & 3]
            )
            version = raw[0]
            if version == TOKEN_VERSION:
                associated = raw[:_HEADER_BYTES] + context
            elif version == LEGACY_TOKEN_VERSION:
                if not self.accept_version_1:
                    raise VersionOneTokenError(VERSION_1_REFUSED)
                associated = raw[:_HEADER_BYTES]
            else:
                raise ValueError
            plaintext = self._ciphers[raw[1:_HEADER_BYTES]].decrypt(
                raw[_HEADER_BYTES:_NONCE_END], raw[_NONCE_END:], associated
            )
            return plaintext.decode()
        except (
            binascii.Error,
            InvalidTag,
            UnicodeError,
            AttributeError,
            TypeError,
            KeyError,
            IndexError,
            ValueError,
        ):
            raise self._why_not(token, context) from None

    def _why_not(self, token: str, context: bytes) -> CryptoError:
        what, elsewhere = _what(context)
        try:
            raw = _unpack(token, what)
        except CryptoError as exc:
            return exc
        if raw[1:_HEADER_BYTES] not in self._ciphers:
            return MissingKeyError(
                f"PII token was encrypted with an unknown key (id {raw[1:_HEADER_BYTES].hex()}): "
                "add that key to SHEETSYNC_PII_KEYS"
            )
        if raw[0] == LEGACY_TOKEN_VERSION:
            return CryptoError(f"{what} failed authentication (tampered or corrupt)")
        return CryptoError(
            f"{what} failed authentication: made for {elsewhere}, or tampered or corrupt"
        )

    def header(self, token: str) -> tuple[int, bytes]:
        """``(version, key id)`` of ``token``, read without decrypting it."""
        raw = _unpack(token, "PII token")
        return raw[0], raw[1:_HEADER_BYTES]

    def names_a_key(self, text: object) -> bool:
        """Whether ``text`` has a token's shape under one of these keys (read, not
        decrypted): how rotation finds personal info no question is marked for now."""
        if not isinstance(text, str):
            return False
        try:
            raw = _b64decode(text)
        except (binascii.Error, UnicodeEncodeError):
            return False
        return (
            len(raw) >= _MIN_TOKEN_BYTES
            and raw[0] in (TOKEN_VERSION, LEGACY_TOKEN_VERSION)
            and raw[1:_HEADER_BYTES] in self._ciphers
        )

    def is_current(self, token: str) -> bool:
        """Whether ``token`` is version 2 under the primary key (not checked further)."""
        return self.header(token) == (TOKEN_VERSION, self.primary_key_id)

    def upgrade(self, token: str, context: bytes) -> str:
        """``token`` as version 2 under the primary key, bound to ``context``: the same
        token when it already is. Raises as :meth:`decrypt` does, so a tampered or
        misplaced token is never rewritten into one that decrypts."""
        plaintext = self.decrypt(token, context)
        return token if self.is_current(token) else self.encrypt(plaintext, context)


def token_version(token: str) -> int | None:
    """The format version a stored token declares (its first byte), None if it is not
    one; read without a key."""
    try:
        return _b64decode(token[:4])[0]
    except (binascii.Error, UnicodeEncodeError, IndexError, TypeError):
        return None


def _b64decode(token: str) -> bytes:
    return _a2b_base64(token.encode("ascii").translate(_FROM_URLSAFE) + _PADDING[len(token) & 3])


def _unpack(token: str, what: str) -> bytes:
    try:
        raw = _b64decode(token)
    except (binascii.Error, UnicodeEncodeError):
        raise CryptoError(f"{what} is not valid base64 (truncated or corrupt)") from None
    except (AttributeError, TypeError):
        raise CryptoError(f"{what} must be a string, not {type(token).__name__}") from None
    if len(raw) < _MIN_TOKEN_BYTES:
        raise CryptoError(f"{what} is too short (truncated or not a token)")
    if raw[0] not in (TOKEN_VERSION, LEGACY_TOKEN_VERSION):
        raise CryptoError(f"{what} has unknown format version {raw[0]}")
    return raw


@functools.cache
def default_keyring() -> Keyring:
    """The keyring for ``SHEETSYNC_PII_KEYS``, built once per process."""
    return Keyring()


@functools.lru_cache(maxsize=8)
def _keyring_for(keys: tuple[bytes, ...]) -> Keyring:
    return Keyring(keys)


def reset_keyring() -> None:
    """Forget cached keyrings (after the keys in the environment change)."""
    default_keyring.cache_clear()
    _keyring_for.cache_clear()


def _keyring(keys: Sequence[bytes] | None) -> Keyring:
    return default_keyring() if keys is None else _keyring_for(tuple(keys))


def _require_ids(**ids: str) -> None:
    for name, value in ids.items():
        if not isinstance(value, str) or not value:
            raise CryptoError(f"{name} must be a non-empty string: the token is bound to it")


# -- the web app's calls ---------------------------------------------------------------


def encrypt_answer_value(
    plaintext: str, *, answer_id: str, question_id: str, keys: Sequence[bytes] | None = None
) -> str:
    """The token to store as a PERSONAL_INFO answer value (or as one item of a list).

    It decrypts only as the value of question ``question_id`` in answer ``answer_id``,
    so choose the answer's id before encrypting. Keys: ``SHEETSYNC_PII_KEYS`` unless
    given; the first one encrypts.
    """
    _require_ids(answer_id=answer_id, question_id=question_id)
    return _keyring(keys).encrypt(plaintext, answer_value_context(answer_id, question_id))


def decrypt_answer_value(
    token: str, *, answer_id: str, question_id: str, keys: Sequence[bytes] | None = None
) -> str:
    """The value :func:`encrypt_answer_value` sealed for this answer and question;
    :class:`CryptoError` for a token made for another one, tampered or corrupt."""
    _require_ids(answer_id=answer_id, question_id=question_id)
    return _keyring(keys).decrypt(token, answer_value_context(answer_id, question_id))


def encrypt_refresh_token(
    plaintext: str, *, user_id: str, keys: Sequence[bytes] | None = None
) -> str:
    """The token to store in ``google_credential.refresh_token`` of user ``user_id``."""
    _require_ids(user_id=user_id)
    return _keyring(keys).encrypt(plaintext, refresh_token_context(user_id))


def decrypt_refresh_token(token: str, *, user_id: str, keys: Sequence[bytes] | None = None) -> str:
    """User ``user_id``'s refresh token; :class:`CryptoError` for a token made for
    another user, tampered or corrupt."""
    _require_ids(user_id=user_id)
    return _keyring(keys).decrypt(token, refresh_token_context(user_id))
