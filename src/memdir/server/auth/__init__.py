"""Who may call ``memdir serve``: API keys per tenant, their stores, and the authenticator.

- :mod:`._keys`: the key format (``mdk_<key_id>_<secret>``), minting, hashing, the rules of a
  record, :class:`Scope` and :class:`Grant`;
- :mod:`._files` and :mod:`._postgres`: where a workspace keeps its keys;
- :mod:`._authenticator`: bearer key to :class:`Principal`, with a cache that forgets revoked
  keys within about a second;
- :mod:`._jwt`: an identity provider's bearer JWT to :class:`Principal` (optional; it needs
  PyJWT, imported when it is used).

Nothing here needs the web framework: ``memdir keys`` uses it without the server extra.
"""

from __future__ import annotations

from memdir.server.auth._authenticator import AuthError, KeyAuthenticator, Principal
from memdir.server.auth._jwt import IssuerUnavailable, JwtAuthenticator, looks_like_jwt
from memdir.server.auth._keys import (
    KEY_PREFIX,
    Grant,
    KeyRecord,
    Scope,
    check_tenant,
    mint_key,
    parse_key,
)
from memdir.server.auth._store import KeyStore, open_key_store

__all__ = [
    "KEY_PREFIX",
    "AuthError",
    "Grant",
    "IssuerUnavailable",
    "JwtAuthenticator",
    "KeyAuthenticator",
    "KeyRecord",
    "KeyStore",
    "Principal",
    "Scope",
    "check_tenant",
    "looks_like_jwt",
    "mint_key",
    "open_key_store",
    "parse_key",
]
