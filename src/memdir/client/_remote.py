"""A workspace on a ``memdir serve`` server: ``Workspace("https://host", namespace=...)``.

:func:`open_remote` finds the server's client (one per server URL and key in a process, so
every workspace on it shares its connections), checks the namespace against the key (the key's
own namespace when none is given), and returns what the workspace holds: the namespace's
calls (search, add, sessions, flush, consolidation and maintenance, run by the server with
its model) and its :class:`RemoteStore` (the files, for everything else).
"""

from __future__ import annotations

import hashlib
import threading

from memdir.client._config import check_url, find_key
from memdir.client._remote_store import RemoteStore
from memdir.client._sync import MemdirClient, NamespaceClient
from memdir.client._types import WhoAmI
from memdir.errors import ConfigError
from memdir.store.namespaces import validate_namespace

__all__ = ["RemoteMemory", "open_remote"]

_CLIENTS: dict[tuple[str, str], tuple[MemdirClient, WhoAmI]] = {}
_LOCK = threading.Lock()


class RemoteMemory(NamespaceClient):
    """The calls of a remote workspace's namespace (``Workspace.remote``), with its key's
    identity.

    Attributes:
        whoami: the key's tenant, scope and reach.
    """

    def __init__(self, client: MemdirClient, name: str, whoami: WhoAmI) -> None:
        super().__init__(client, name)
        self.whoami = whoami


def _client(url: str, api_key: str | None) -> tuple[MemdirClient, WhoAmI]:
    """The process's client of ``url`` with this key, and who the key is (asked once)."""
    entry = (check_url(url), hashlib.sha256(find_key(api_key).encode()).hexdigest())
    with _LOCK:
        found = _CLIENTS.get(entry)
    if found is not None:
        return found
    client = MemdirClient(url, api_key)
    try:
        who = client.whoami()
    except BaseException:
        client.close()
        raise
    with _LOCK:
        found = _CLIENTS.setdefault(entry, (client, who))
    if found[0] is not client:
        client.close()
    return found


def open_remote(
    url: str, namespace: str | None, api_key: str | None = None
) -> tuple[RemoteMemory, RemoteStore]:
    """The calls and the store of ``namespace`` on the server at ``url``.

    Args:
        url: the server (``https://host[/base]``; ``http://`` only to loopback).
        namespace: the namespace; ``None``: the one the key is bound to.
        api_key: the key; default ``$MEMDIR_API_KEY``, else the file ``$MEMDIR_API_KEY_FILE``.

    Raises:
        ConfigError: no key, a bad URL, no namespace given for a key bound to none, or one the
            key does not reach.
        RemoteError: the server cannot be reached, or refuses the key.
    """
    client, who = _client(url, api_key)
    if namespace is None:
        if who.namespace is None:
            raise ConfigError(
                f"a workspace on a memdir server is one namespace: give -n "
                f"{who.namespace_prefix}<name> (namespace='{who.namespace_prefix}<name>'); "
                f"this key reaches the namespaces starting with {who.namespace_prefix!r}"
            )
        namespace = who.namespace
    name = validate_namespace(namespace)
    reach = who.namespace or f"{who.namespace_prefix}<name>"
    if (who.namespace is not None and name != who.namespace) or (
        who.namespace is None
        and not (name.startswith(who.namespace_prefix) and name != who.namespace_prefix)
    ):
        raise ConfigError(
            f"namespace {name!r} is out of this key's reach on {client.url}: it reaches {reach}"
        )
    return RemoteMemory(client, name, who), RemoteStore(client, name)
