"""API keys: their format, how they are minted and hashed, and the rules every record obeys.

A key is ``mdk_<key_id>_<secret>``: ``key_id`` is 16 lowercase base32 characters (10 random
bytes; public: it names the key in lists, logs and ``memdir keys revoke``) and ``secret`` is 43
base64url characters (32 random bytes). Only ``sha256(secret)`` is stored: a 256-bit random
secret has no dictionary to guess from, so a slow password hash would cost ~100 ms a request
and protect nothing more. The secret is shown once, when the key is minted.

A key belongs to one tenant (``[a-z0-9][a-z0-9-]{0,62}``, no dot) and reaches the namespaces
whose names start with its prefix: ``"<tenant>."`` or a narrower ``"<tenant>.team1."``, or
exactly one namespace. A tenant id has no dot, so ``"t1."`` starts a name that starts with
``"t2."`` only when ``t1 == t2``: tenants cannot overlap.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from memdir.errors import ConfigError
from memdir.store.namespaces import validate_namespace

__all__ = [
    "KEY_PREFIX",
    "Grant",
    "KeyRecord",
    "Scope",
    "check_record",
    "check_tenant",
    "hash_secret",
    "mint_key",
    "parse_key",
    "secret_matches",
]

KEY_PREFIX: Final = "mdk_"
_KEY = re.compile(r"mdk_(?P<id>[a-z2-7]{16})_(?P<secret>[A-Za-z0-9_-]{43})")
_KEY_ID = re.compile(r"[a-z2-7]{16}")
_TENANT = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_MAX_LABEL = 200
# What an unknown key id's secret is compared with: both failures take the same path.
_DUMMY_DIGEST: Final = hashlib.sha256(b"memdir: no such key").digest()


class Scope(enum.IntEnum):
    """What a key may do; each scope includes the ones below it.

    Attributes:
        READ: search and read.
        WRITE: also add, append and replace.
        ADMIN: also the tenant's export, import and maintenance runs.
    """

    READ = 1
    WRITE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        """``"read"``, ``"write"`` or ``"admin"``."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: object) -> Scope:
        """The scope named ``text``; :class:`ConfigError` for any other value."""
        for scope in cls:
            if text == scope.label:
                return scope
        raise ConfigError(f"unknown scope {str(text)[:40]!r}: use read, write or admin")


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """The namespaces a key reaches.

    Attributes:
        tenant: the tenant.
        prefix: ``"<tenant>."`` or a narrower prefix ending in a dot.
        namespace: when set, the one namespace the key reaches.
    """

    tenant: str
    prefix: str
    namespace: str | None = None

    def allows(self, ns: str) -> bool:
        """Whether ``ns`` (a valid namespace name) is one of the key's namespaces."""
        if self.namespace is not None:
            return ns == self.namespace
        return len(ns) > len(self.prefix) and ns.startswith(self.prefix)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRecord:
    """A key as stored: everything but its secret.

    Attributes:
        key_id: the public part of the key.
        secret_sha256: SHA-256 of the secret.
        tenant: the tenant it belongs to.
        namespace_prefix: the prefix of the names it reaches.
        namespace: the one namespace it reaches, if set.
        scope: what it may do.
        label: the operator's note (``"ci"``, ``"alice's laptop"``).
        created_at: when it was minted.
        expires_at: when it stops working (``None``: never).
        revoked_at: when it was revoked (``None``: it is not).
        last_used_at: when it last authenticated a request (written at most once a minute).
    """

    key_id: str
    secret_sha256: bytes
    tenant: str
    namespace_prefix: str
    namespace: str | None
    scope: Scope
    label: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def grant(self) -> Grant:
        """The namespaces this key reaches."""
        return Grant(tenant=self.tenant, prefix=self.namespace_prefix, namespace=self.namespace)

    def status(self, now: datetime) -> str:
        """``"active"``, ``"revoked"`` or ``"expired"`` at ``now``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values (the digest in hex, times in ISO 8601 UTC)."""
        return {
            "key_id": self.key_id,
            "secret_sha256": self.secret_sha256.hex(),
            "tenant": self.tenant,
            "namespace_prefix": self.namespace_prefix,
            "namespace": self.namespace,
            "scope": self.scope.label,
            "label": self.label,
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "revoked_at": _iso(self.revoked_at),
            "last_used_at": _iso(self.last_used_at),
        }

    @classmethod
    def from_json(cls, data: object) -> KeyRecord:
        """The record :meth:`to_json` made, checked; :class:`ConfigError` saying what is wrong."""
        if not isinstance(data, dict):
            raise ConfigError(f"a key record is a JSON object, not {type(data).__name__}")
        try:
            record = cls(
                key_id=str(data["key_id"]),
                secret_sha256=bytes.fromhex(str(data["secret_sha256"])),
                tenant=str(data["tenant"]),
                namespace_prefix=str(data["namespace_prefix"]),
                namespace=None if data.get("namespace") is None else str(data["namespace"]),
                scope=Scope.parse(data["scope"]),
                label=str(data.get("label") or ""),
                created_at=_when(data["created_at"]),
                expires_at=_when(data.get("expires_at")),
                revoked_at=_when(data.get("revoked_at")),
                last_used_at=_when(data.get("last_used_at")),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ConfigError(f"a key record is damaged ({type(exc).__name__}: {exc})") from None
        check_record(record)
        return record


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat()


def _when(value: object) -> Any:
    if value is None:
        return None
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        raise ValueError(f"time {value!r} has no zone")
    return parsed.astimezone(UTC)


def check_tenant(tenant: object) -> str:
    """``tenant`` if it is a valid tenant id, else :class:`ConfigError` saying why."""
    if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
        shown = str(tenant)[:70]
        raise ConfigError(
            f"invalid tenant {shown!r}: use 1-63 lowercase letters, digits and '-', starting "
            "with a letter or a digit (no dot: a tenant owns the namespaces '<tenant>.*')"
        )
    return tenant


def check_record(record: KeyRecord) -> KeyRecord:
    """``record`` if it obeys every rule of a key, else :class:`ConfigError` naming the rule.

    Checked when a key is minted and again whenever a record is loaded, so a hand-edited or
    damaged store never widens a key.
    """
    if not _KEY_ID.fullmatch(record.key_id):
        raise ConfigError(f"invalid key id {record.key_id[:40]!r}")
    if len(record.secret_sha256) != hashlib.sha256().digest_size:
        raise ConfigError(f"key {record.key_id}: the stored digest is not a SHA-256 digest")
    tenant = check_tenant(record.tenant)
    prefix = record.namespace_prefix
    own = f"{tenant}."
    if not prefix.startswith(own) or not prefix.endswith("."):
        raise ConfigError(
            f"namespace prefix {prefix[:70]!r} must start with {own!r} and end with '.' (so "
            f"that 'acme.team1.' cannot reach 'acme.team10.x')"
        )
    if prefix != own:
        try:
            validate_namespace(prefix[:-1])
        except ConfigError as exc:
            raise ConfigError(f"namespace prefix {prefix[:70]!r} is not valid: {exc}") from None
    if record.namespace is not None:
        validate_namespace(record.namespace)
        if not (len(record.namespace) > len(prefix) and record.namespace.startswith(prefix)):
            raise ConfigError(
                f"namespace {record.namespace!r} is not under the prefix {prefix!r} of the key"
            )
    if len(record.label) > _MAX_LABEL or not record.label.isprintable():
        raise ConfigError(f"a key label is at most {_MAX_LABEL} printable characters")
    for name in ("created_at", "expires_at", "revoked_at", "last_used_at"):
        value = getattr(record, name)
        if value is not None and value.tzinfo is None:
            raise ConfigError(f"key {record.key_id}: {name} has no time zone")
    return record


def hash_secret(secret: str) -> bytes:
    """SHA-256 of a key's secret."""
    return hashlib.sha256(secret.encode("ascii", errors="replace")).digest()


def secret_matches(record: KeyRecord | None, secret: str) -> bool:
    """Whether ``secret`` is ``record``'s, compared in constant time.

    Without a record the secret is compared with a fixed digest, so an unknown key id and a
    wrong secret cost the same.
    """
    expected = record.secret_sha256 if record is not None else _DUMMY_DIGEST
    return hmac.compare_digest(expected, hash_secret(secret)) and record is not None


def parse_key(token: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a key in the memdir format, else ``None``."""
    match = _KEY.fullmatch(token)
    if match is None:
        return None
    return match["id"], match["secret"]


def mint_key(
    *,
    tenant: str,
    scope: Scope,
    now: datetime,
    namespace_prefix: str | None = None,
    namespace: str | None = None,
    label: str = "",
    expires_at: datetime | None = None,
) -> tuple[str, KeyRecord]:
    """A new key and its record: ``(key, record)``; the key is never stored.

    Args:
        tenant: the tenant the key belongs to.
        scope: what it may do.
        now: the time of minting (aware).
        namespace_prefix: a narrower prefix than ``"<tenant>."`` (ending in a dot).
        namespace: the one namespace the key reaches (within the prefix).
        label: a note for the operator.
        expires_at: when the key stops working (after ``now``).

    Raises:
        ConfigError: a rule of :func:`check_record` is broken, or ``expires_at`` is not after
            ``now``.
    """
    check_tenant(tenant)
    if expires_at is not None and expires_at <= now:
        raise ConfigError("a key must expire in the future")
    key_id = base64.b32encode(secrets.token_bytes(10)).decode("ascii").lower()
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
    record = KeyRecord(
        key_id=key_id,
        secret_sha256=hash_secret(secret),
        tenant=tenant,
        namespace_prefix=namespace_prefix if namespace_prefix is not None else f"{tenant}.",
        namespace=namespace,
        scope=scope,
        label=label,
        created_at=now,
        expires_at=expires_at,
    )
    check_record(record)
    return f"{KEY_PREFIX}{key_id}_{secret}", record


def revoked(record: KeyRecord, at: datetime) -> KeyRecord:
    """``record`` revoked at ``at`` (an earlier revocation is kept)."""
    return record if record.revoked_at is not None else replace(record, revoked_at=at)
