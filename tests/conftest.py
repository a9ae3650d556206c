"""Test-wide fixtures: a fresh workspace, a fixed clock, and no real network."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from memdir.workspace import Workspace

# CI runs are reproducible: the same examples every run, no example database carried over.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# Tests choose hybrid search explicitly: with the bundled embedder installed, every workspace
# would otherwise embed its lines in each maintenance pass (spawned workers inherit this).
os.environ["MEMDIR_EMBEDDER"] = "off"


class _NetworkBlocked(RuntimeError):
    pass


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests never reach a real model provider: outbound internet connections fail loudly."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and host not in {"127.0.0.1", "::1", "localhost"}
            and (self.family in (socket.AF_INET, socket.AF_INET6))
        ):
            raise _NetworkBlocked(f"network access blocked in tests: {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


class FixedClock:
    """A settable clock for tests."""

    def __init__(self, instant: datetime) -> None:
        self.instant = instant

    def __call__(self) -> datetime:
        return self.instant


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))


@pytest.fixture
def ws(tmp_path: Path, clock: FixedClock) -> Workspace:
    return Workspace(tmp_path / "ws", tz="UTC", clock=clock)


# -- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL server for the session (see ``tests/_postgres.py``); its URL."""
    from _postgres import server

    with server() as url:
        yield url


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A workspace URL of its own for one test (a fresh schema on the session's server).

    Its connections are closed after the test, so a long run stays under the server's limit.
    """
    import uuid

    from memdir.store.postgres import _connect
    from memdir.tools._core import close_shared_indexes

    sep = "&" if "?" in postgres_server else "?"
    url = f"{postgres_server}{sep}schema=t_{uuid.uuid4().hex[:16]}"
    yield url
    close_shared_indexes()
    with _connect._DATABASES_LOCK:
        opened = _connect._DATABASES.pop(url, None)
    if opened is not None:
        opened.close()


@pytest.fixture(params=["files", "postgres"])
def served_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh workspace on each store, for a ``memdir serve`` process of the test's own."""
    from _server import store_workspace

    return store_workspace(request, tmp_path)


@pytest.fixture(params=["files", "postgres"])
def any_ws(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The same workspace on each store: a directory, and a PostgreSQL database."""
    return store_workspace(request, tmp_path, clock)


STORES_AND_SERVERS = ("files", "postgres", "remote-files", "remote-postgres")
"""The params of an ``any_ws`` that also opens a namespace on a real ``memdir serve`` over
each store (a module overrides ``any_ws`` with them)."""


def sibling(ws: Workspace, name: str) -> str:
    """The name of another namespace beside ``ws``: ``name`` itself, or on a server (where
    every namespace is one of the key's tenant) ``<ws's namespace>-<name>``."""
    return f"{ws.namespace}-{name}" if ws.remote is not None else name


def store_workspace(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> Workspace:
    """The workspace of ``request.param``: a directory (``files``), a PostgreSQL database
    (``postgres``), or a fresh namespace on a server over either (``remote-files``,
    ``remote-postgres``)."""
    if request.param == "files":
        return Workspace(tmp_path / "ws", tz="UTC", clock=clock)
    if request.param == "postgres":
        return Workspace(request.getfixturevalue("pg_url"), tz="UTC", clock=clock)
    from _server import remote_workspace

    served = request.getfixturevalue("remote_servers").get(request.param.removeprefix("remote-"))
    ws: Workspace = remote_workspace(served, tz="UTC", clock=clock)
    return ws


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real ``memdir serve`` over a fresh workspace of each store, for a module's tests (a
    module may define its own, with other options); see ``tests/_server.py``."""
    from _server import serve_store

    yield from serve_store(request, tmp_path_factory)


@pytest.fixture(scope="session")
def remote_servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """``memdir serve`` over each store, started on first use, for the whole session (see
    ``tests/_server.py``: :class:`RemoteServers`)."""
    from _server import RemoteServers

    servers = RemoteServers(request, tmp_path_factory)
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(params=["files", "postgres"])
def remote_ws(request: pytest.FixtureRequest, remote_servers: Any, clock: FixedClock) -> Workspace:
    """A workspace on a real ``memdir serve`` (over each store), in a fresh namespace of its
    own, opened with a write key of tenant ``acme``."""
    from _server import remote_workspace

    ws: Workspace = remote_workspace(remote_servers.get(request.param), tz="UTC", clock=clock)
    return ws


# -- the web UI --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser_on(ui: Any) -> Iterator[Any]:
    """One chromium for a UI test module, on the module's ``ui`` server (``tests/_ui.py``)."""
    from _ui import browser_page

    yield from browser_page(ui.url)


@pytest.fixture
def page(browser_on: Any) -> Any:
    """The module's browser, logged out, for one test."""
    from _ui import fresh

    return fresh(browser_on)
