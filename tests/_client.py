"""The Python clients of ``memdir serve`` for the tests: the sync one as it is, the async one
driven from a test's thread through an anyio portal (its event loop runs in a thread of its
own), so one test body checks both.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from _server import Served
from memdir.client import AsyncMemdirClient, MemdirClient

KINDS = ("sync", "async")


class Blocking:
    """An async client (or namespace client) whose coroutine calls are run through a portal
    and answered here, as the sync client's are."""

    def __init__(self, portal: BlockingPortal, target: Any) -> None:
        self._portal = portal
        self._target = target

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._target, name)
        if not inspect.iscoroutinefunction(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._portal.call(functools.partial(found, *args, **kwargs))

        return call

    def namespace(self, name: str) -> Blocking:
        """The namespace client, blocking too."""
        return Blocking(self._portal, self._target.namespace(name))

    def __repr__(self) -> str:
        return repr(self._target)


@contextlib.contextmanager
def open_client(kind: str, url: str, api_key: str | None, **options: Any) -> Iterator[Any]:
    """A sync client, or an async one behind :class:`Blocking`, closed afterwards."""
    if kind == "sync":
        with MemdirClient(url, api_key, **options) as client:
            yield client
        return
    with start_blocking_portal() as portal:
        client = AsyncMemdirClient(url, api_key, **options)
        try:
            yield Blocking(portal, client)
        finally:
            portal.call(client.aclose)


@contextlib.contextmanager
def client_of(served: Served, kind: str, key: str, **options: Any) -> Iterator[Any]:
    """A client of ``served`` with the key named ``key``."""
    with open_client(kind, served.server.url, served.keys.secrets[key], **options) as client:
        yield client
