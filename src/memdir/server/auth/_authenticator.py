"""From a bearer key to a :class:`Principal`: the one place the server learns who is calling.

Verified records are cached per key id (at most :data:`CACHE_SECONDS`); unknown ids are
remembered as unknown for a second, so random keys cannot hammer the store. :meth:`poll`,
run about once a second by the server, reads the store's change token and forgets the cache
when a key was added or revoked, and writes when keys were last used (at most once a minute).
The secret is checked on every request, in constant time; it is never logged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from memdir.server.auth._keys import Grant, KeyRecord, Scope, parse_key, secret_matches
from memdir.server.auth._store import KeyStore

__all__ = ["CACHE_SECONDS", "AuthError", "KeyAuthenticator", "Principal"]

CACHE_SECONDS: Final = 30.0
"""How long a verified key record is used without asking the store again."""
ABSENT_SECONDS: Final = 1.0
"""How long an unknown key id is remembered as unknown."""
TOUCH_SECONDS: Final = 60.0
"""How often a process writes when its keys were last used."""

Reason = Literal["missing", "invalid", "revoked", "expired"]


class AuthError(Exception):
    """A request that cannot be authenticated.

    Attributes:
        reason: ``missing`` (no key), ``invalid`` (malformed, unknown or wrong secret: one
            reason, so a prober learns nothing), ``revoked`` or ``expired`` (told only to
            whoever holds the secret).
    """

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who is calling, and what they may reach.

    Attributes:
        tenant: the tenant.
        key_id: the key's public id (a JWT's: ``jwt-`` and 16 hex digits of its issuer and
            subject).
        scope: what the key may do.
        grant: the namespaces it reaches.
        expires_at: when the key expires (``None``: never).
        via: how the caller was authenticated: ``"key"`` or ``"jwt"``.
    """

    tenant: str
    key_id: str
    scope: Scope
    grant: Grant
    expires_at: datetime | None = None
    via: str = "key"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class KeyAuthenticator:
    """Checks bearer keys against a :class:`KeyStore`.

    Args:
        store: where the keys are.
        clock: the current instant (aware), for expiry.
        monotonic: seconds for the cache (injectable in tests).
    """

    def __init__(
        self,
        store: KeyStore,
        *,
        clock: Callable[[], datetime] = _utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self._clock = clock
        self._monotonic = monotonic
        self._mutex = threading.Lock()
        self._cache: dict[str, tuple[float, KeyRecord | None]] = {}
        self._token: object = None
        self._used: dict[str, datetime] = {}
        self._touched_at = monotonic()

    def cached(self, key_id: str) -> tuple[bool, KeyRecord | None]:
        """``(True, record or None)`` when ``key_id`` is known here without the store."""
        now = self._monotonic()
        with self._mutex:
            entry = self._cache.get(key_id)
            if entry is None:
                return False, None
            until, record = entry
            if until <= now:
                del self._cache[key_id]
                return False, None
            return True, record

    def lookup(self, key_id: str) -> KeyRecord | None:
        """The record of ``key_id``, from the cache or the store (which may block)."""
        known, record = self.cached(key_id)
        if known:
            return record
        record = self.store.get(key_id)
        keep = CACHE_SECONDS if record is not None else ABSENT_SECONDS
        with self._mutex:
            self._cache[key_id] = (self._monotonic() + keep, record)
        return record

    def verify(self, token: str | None, record: KeyRecord | None) -> Principal:
        """The principal of ``token`` given its looked-up ``record``; :class:`AuthError` else."""
        if token is None:
            raise AuthError("missing", "no API key: send 'Authorization: Bearer mdk_...'")
        parsed = parse_key(token)
        if parsed is None or not secret_matches(record, parsed[1]) or record is None:
            raise AuthError("invalid", "the API key is not valid")
        now = self._clock()
        status = record.status(now)
        if status == "revoked":
            raise AuthError("revoked", f"the API key {record.key_id} was revoked")
        if status == "expired":
            raise AuthError("expired", f"the API key {record.key_id} has expired")
        with self._mutex:
            self._used[record.key_id] = now
        return Principal(
            tenant=record.tenant,
            key_id=record.key_id,
            scope=record.scope,
            grant=record.grant,
            expires_at=record.expires_at,
        )

    def authenticate(self, token: str | None) -> Principal:
        """The principal of a bearer ``token`` (may block on the store).

        Raises:
            AuthError: no key, a malformed, unknown, wrong, revoked or expired key.
        """
        parsed = parse_key(token) if token else None
        record = self.lookup(parsed[0]) if parsed is not None else None
        return self.verify(token, record)

    def poll(self) -> bool:
        """Forget the cache if the store changed, and write when keys were last used.

        Returns whether the store had changed. Blocks on the store: run it off the event loop.
        """
        token = self.store.change_token()
        changed = token != self._token
        if changed:
            with self._mutex:
                self._cache.clear()
            self._token = token
        if self._monotonic() - self._touched_at >= TOUCH_SECONDS:
            with self._mutex:
                used, self._used = self._used, {}
            self._touched_at = self._monotonic()
            if used:
                self.store.touch(used)
        return changed
