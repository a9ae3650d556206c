"""Bearer JWTs of an identity provider: checked against its JWKS, turned into a
:class:`Principal` as a key would be.

A token is accepted only when it is signed with one of the issuer's published keys (its JWKS,
fetched with PyJWT's ``PyJWKClient`` and kept for :data:`JWKS_LIFESPAN` seconds) by an
asymmetric algorithm (:data:`ALGORITHMS`: ``none`` and the HMAC family are refused before any
key is looked at, so a token "signed" with the public key as an HMAC secret goes nowhere), the
key's own algorithm is the token's, and it carries ``exp``, ``iss`` (the configured issuer) and
``aud`` (the configured audience). Its claims then give what a key's record gives:

- the tenant: the claim ``memdir_tenant`` (configurable), a tenant id as a key's;
- the scope: ``scope`` (a space-separated string, or a list) naming ``memdir:read``,
  ``memdir:write`` or ``memdir:admin``; the narrowest when it names several;
- optionally one namespace: the claim ``memdir_namespace`` (configurable), which must be one of
  the tenant's; without it the token reaches every namespace ``<tenant>.*``.

A token cannot be revoked before it expires: issue short-lived ones. An unknown key id makes
the JWKS be fetched again at most once every :data:`REFRESH_COOLDOWN` seconds, so tokens with
made-up key ids cannot make the server hammer the identity provider.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from memdir.errors import ConfigError
from memdir.server.auth._authenticator import AuthError, Principal
from memdir.server.auth._keys import Grant, Scope, check_tenant
from memdir.store.namespaces import validate_namespace

if TYPE_CHECKING:
    from jwt import PyJWK

__all__ = [
    "ALGORITHMS",
    "IssuerUnavailable",
    "JwtAuthenticator",
    "looks_like_jwt",
]

ALGORITHMS: Final = ("RS256", "ES256", "EdDSA")
"""The signature algorithms a token may use."""
SCOPE_PREFIX: Final = "memdir:"
JWKS_LIFESPAN: Final = 300.0
"""Seconds the issuer's keys are used before they are fetched again."""
REFRESH_COOLDOWN: Final = 30.0
"""The least seconds between two fetches caused by a key id that is not in the JWKS."""
FETCH_TIMEOUT: Final = 10.0
"""Seconds a fetch of the JWKS may take."""
LEEWAY: Final = 30.0
"""Seconds of clock difference allowed with the issuer (``exp``, ``nbf``, ``iat``)."""


class IssuerUnavailable(Exception):
    """The issuer's keys cannot be fetched (or make no usable key set)."""


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has the three parts of a compact JWT."""
    return token.count(".") == 2


class JwtAuthenticator:
    """Checks bearer JWTs against an issuer's JWKS (see the module docstring).

    Args:
        jwks_url: where the issuer publishes its keys (``https://``).
        issuer: the ``iss`` a token must have.
        audience: the ``aud`` a token must have (this server's).
        tenant_claim: the claim naming the tenant.
        namespace_claim: the claim naming the one namespace a token reaches (optional in a
            token).
    """

    def __init__(
        self,
        *,
        jwks_url: str,
        issuer: str,
        audience: str,
        tenant_claim: str = "memdir_tenant",
        namespace_claim: str = "memdir_namespace",
    ) -> None:
        import jwt

        self.issuer = issuer
        self.audience = audience
        self.tenant_claim = tenant_claim
        self.namespace_claim = namespace_claim
        self._client = jwt.PyJWKClient(
            jwks_url, cache_jwk_set=True, lifespan=JWKS_LIFESPAN, timeout=FETCH_TIMEOUT
        )
        self._lock = threading.Lock()
        self._refreshed_at = -math.inf

    def authenticate(self, token: str) -> Principal:
        """The principal of a bearer JWT (may fetch the JWKS: run it off the event loop).

        Raises:
            AuthError: the token is not valid, has expired, is not for this server, or names
                no tenant or no memdir scope.
            IssuerUnavailable: the issuer's keys cannot be fetched.
        """
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise AuthError("invalid", "the token is not valid") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            # the header is the caller's: echo a short name only, never a long blob
            shown = repr(alg) if isinstance(alg, str) and len(alg) <= 16 else "another one"
            raise AuthError(
                "invalid", f"the token must be signed with {', '.join(ALGORITHMS)}, not {shown}"
            )
        key = self._key(header.get("kid"))
        if key.algorithm_name != alg:
            raise AuthError("invalid", "the token's algorithm is not its key's")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                issuer=self.issuer,
                audience=self.audience,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthError("expired", "the token has expired") from None
        except (jwt.InvalidAudienceError, jwt.InvalidIssuerError):
            raise AuthError("invalid", "the token was not issued for this server") from None
        except jwt.InvalidTokenError:
            raise AuthError("invalid", "the token is not valid") from None
        return self._principal(claims)

    def _key(self, kid: object) -> PyJWK:
        """The issuer's key ``kid``; the JWKS is fetched again for an unknown one, at most
        once every :data:`REFRESH_COOLDOWN` seconds."""
        import jwt

        if not isinstance(kid, str) or not kid:
            raise AuthError("invalid", "the token names no key (kid)")
        try:
            found = jwt.PyJWKClient.match_kid(self._client.get_signing_keys(), kid)
            if found is None:
                with self._lock:
                    if time.monotonic() - self._refreshed_at >= REFRESH_COOLDOWN:
                        self._refreshed_at = time.monotonic()
                        keys = self._client.get_signing_keys(refresh=True)
                        found = jwt.PyJWKClient.match_kid(keys, kid)
        except (jwt.PyJWKClientError, jwt.PyJWKSetError) as exc:
            raise IssuerUnavailable(str(exc)) from None
        if found is None:
            raise AuthError("invalid", "the token is not signed by a key of the issuer")
        return found

    def _principal(self, claims: dict[str, Any]) -> Principal:
        tenant = claims.get(self.tenant_claim)
        if tenant is None:
            raise AuthError("invalid", f"the token names no tenant (claim {self.tenant_claim})")
        try:
            tenant = check_tenant(tenant)
        except ConfigError as exc:
            raise AuthError("invalid", f"the token's {self.tenant_claim}: {exc}") from None
        prefix = f"{tenant}."
        namespace = claims.get(self.namespace_claim)
        if namespace is not None:
            if not isinstance(namespace, str) or not namespace.startswith(prefix):
                raise AuthError(
                    "invalid", f"the token's {self.namespace_claim} is not one of {prefix}*"
                )
            try:
                validate_namespace(namespace)
            except ConfigError as exc:
                raise AuthError("invalid", f"the token's {self.namespace_claim}: {exc}") from None
        subject = f"{claims['iss']}\n{claims.get('sub', '')}"
        return Principal(
            tenant=tenant,
            key_id="jwt-" + hashlib.sha256(subject.encode("utf-8")).hexdigest()[:16],
            scope=_scope(claims.get("scope")),
            grant=Grant(tenant=tenant, prefix=prefix, namespace=namespace),
            expires_at=datetime.fromtimestamp(claims["exp"], UTC),
            via="jwt",
        )


def _scope(claim: object) -> Scope:
    """The narrowest memdir scope the ``scope`` claim grants."""
    if isinstance(claim, str):
        names = claim.split()
    elif isinstance(claim, list):
        names = [name for name in claim if isinstance(name, str)]
    else:
        names = []
    granted = [scope for scope in Scope for name in names if name == SCOPE_PREFIX + scope.label]
    if not granted:
        raise AuthError(
            "invalid",
            "the token grants no memdir scope: its scope claim must name memdir:read, "
            "memdir:write or memdir:admin",
        )
    return min(granted)
