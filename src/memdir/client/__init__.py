"""A client of ``memdir serve``: the memory tools and every route of the REST API, from Python.

``MemdirClient`` (sync) and ``AsyncMemdirClient`` (async) have the same calls. A namespace's
``memory_search``, ``memory_get``, ``memory_add``, ``session_search``, ``session_list`` and
``session_history`` return the text the tools of :mod:`memdir.tools` return on the same store;
the other calls return the library's types (``SearchHit``, ``AddResult``, ``FlushResult``...).

Example::

    from memdir.client import MemdirClient

    with MemdirClient("https://memory.example.com") as client:  # key: $MEMDIR_API_KEY
        alice = client.namespace("acme.alice")
        alice.add("Wang Lei prefers PostgreSQL 16")
        for hit in alice.search("database"):
            print(hit.path, hit.line_number, hit.content)

Requests that fail for want of a connection, or answer 429, 502, 503 or 504, are retried with
jittered back-off (``Retry-After`` honoured); each write carries an ``Idempotency-Key``, the
same on its retries. Errors are :class:`RemoteError` subclasses (all ``MemdirError``). See
``docs/client.md``.
"""

from memdir.client._async import AsyncMemdirClient, AsyncNamespaceClient
from memdir.client._errors import (
    AuthError,
    ConnectionFailed,
    NamespaceNotFound,
    NotFound,
    QuotaExceeded,
    RateLimited,
    RemoteError,
    VersionConflict,
)
from memdir.client._sync import MemdirClient, NamespaceClient
from memdir.client._types import (
    Compacted,
    ConversationSize,
    Lease,
    Ledger,
    MaintenanceStatus,
    MemoryMd,
    SessionSummary,
    WhoAmI,
)

__all__ = [
    "AsyncMemdirClient",
    "AsyncNamespaceClient",
    "AuthError",
    "Compacted",
    "ConnectionFailed",
    "ConversationSize",
    "Lease",
    "Ledger",
    "MaintenanceStatus",
    "MemdirClient",
    "MemoryMd",
    "NamespaceClient",
    "NamespaceNotFound",
    "NotFound",
    "QuotaExceeded",
    "RateLimited",
    "RemoteError",
    "SessionSummary",
    "VersionConflict",
    "WhoAmI",
]
