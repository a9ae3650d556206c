"""A real ``memdir serve`` process for the tests, and keys made by the real ``memdir keys``.

:class:`ServerProcess` runs ``python -m memdir serve -w <dir or URL> --port 0`` and waits
(bounded) for the line saying where it listens, then for ``/readyz``. Keys come from
``memdir keys create --json`` run as a process, as an operator would make them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from memdir.workspace import Workspace

READY_LINE = re.compile(r"memdir serve: listening on (http://\S+)")
START_TIMEOUT = 60.0


def memdir(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m memdir ARGS`` in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "memdir", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=dict(os.environ),
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"memdir {' '.join(args[:4])} failed: {done.stderr}")
    return done


def create_key(workspace: str, tenant: str, scope: str, *extra: str) -> dict[str, Any]:
    """A key made by ``memdir keys create --json`` (``key`` holds the secret)."""
    done = memdir("keys", "create", "-w", workspace, "--tenant", tenant, "--scope", scope,
                  "--json", *extra)  # fmt: skip
    record: dict[str, Any] = json.loads(done.stdout)
    return record


@dataclass(frozen=True, slots=True)
class Keys:
    """The keys the server tests use, by name, and their ids."""

    secrets: dict[str, str]
    ids: dict[str, str]

    def headers(self, name: str) -> dict[str, str]:
        """``Authorization: Bearer <key>`` for the key ``name``."""
        return {"Authorization": f"Bearer {self.secrets[name]}"}


def make_keys(workspace: str, wanted: Sequence[tuple[str, str, str, Sequence[str]]]) -> Keys:
    """Keys ``(name, tenant, scope, more options)`` made by the real CLI."""
    secrets: dict[str, str] = {}
    ids: dict[str, str] = {}
    for name, tenant, scope, extra in wanted:
        record = create_key(workspace, tenant, scope, *extra)
        secrets[name], ids[name] = record["key"], record["key_id"]
    return Keys(secrets=secrets, ids=ids)


class ServerProcess:
    """``memdir serve`` over ``workspace`` in a process of its own, on a free loopback port.

    Args:
        workspace: a directory or a ``postgresql://`` URL.
        args: more options of ``memdir serve``.
        env: more environment variables of the server process.
        prefix: a command the server runs under (it must ``exec`` it, so the process id is
            the server's): ``("unshare", "--uts", ...)``.
    """

    def __init__(
        self,
        workspace: str,
        *args: str,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.workspace = workspace
        # The tests send far more than a tenant's default rate; test_server_limits sets one.
        self.args = args if "--rate" in args else ("--rate", "0", *args)
        self.env = {**os.environ, **(env or {})}
        self.prefix = tuple(prefix)
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []

    def start(self) -> ServerProcess:
        """Start the server and wait until it says where it listens and answers ``/readyz``."""
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "memdir", "serve", "-w", self.workspace,
             "--port", "0", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=self.env,
        )  # fmt: skip
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=self._keep, args=(self.proc.stderr,), daemon=True).start()
        while not self.url:
            try:
                line = self._lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                self.stop()
                raise AssertionError(f"memdir serve did not start: {self.log()}") from None
            if line is None:
                raise AssertionError(f"memdir serve exited: {self.log()}")
            found = READY_LINE.search(line)
            if found:
                self.url = found[1]
        ready = httpx.get(f"{self.url}/readyz", timeout=30)
        assert ready.status_code == 200, ready.text
        return self

    def _read(self, stream: Any) -> None:
        with stream:  # closed at the end: a pipe left open warns when it is collected
            for line in stream:
                self._lines.put(line)
        self._lines.put(None)

    def _keep(self, stream: Any) -> None:
        with stream:
            for line in stream:
                self.stderr.append(line)

    def log(self) -> str:
        """What the server wrote on stderr so far."""
        return "".join(self.stderr)

    def access_log(self) -> list[dict[str, Any]]:
        """The JSON access-log lines written so far."""
        lines = []
        for line in list(self.stderr):
            if line.startswith("{"):
                lines.append(json.loads(line))
        return lines

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Stop the server (SIGTERM: a graceful shutdown); its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        return self.proc.returncode

    def client(self, key: str | None = None) -> httpx.Client:
        """An HTTP client of this server (with ``key`` as its bearer)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


# The keys of the server tests: (name, tenant, scope, more options of `memdir keys create`).
KEYS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("acme_read", "acme", "read", ()),
    ("acme_write", "acme", "write", ()),
    ("acme_admin", "acme", "admin", ()),
    ("beta_write", "beta", "write", ()),
    ("beta_admin", "beta", "admin", ()),
    ("team1", "acme", "write", ("--namespace-prefix", "acme.team1.")),
    ("alice_only", "acme", "write", ("--namespace", "acme.alice")),
)


@dataclass(frozen=True, slots=True)
class Served:
    """A running server over one store, and its keys.

    Attributes:
        store: ``files`` or ``postgres``.
        workspace: the workspace the server serves (a directory or a URL).
        server: the server process.
        keys: the keys of :data:`KEYS`.
    """

    store: str
    workspace: str
    server: ServerProcess
    keys: Keys

    def client(self, key: str | None = None) -> httpx.Client:
        """A client of the server with the key named ``key`` (none: no key)."""
        return self.server.client(self.keys.secrets[key] if key else None)

    def local(self, namespace: str) -> Workspace:
        """The namespace ``namespace`` opened in this process, on the server's store (to read
        what the server wrote, or write what it must read)."""
        from memdir.workspace import Workspace

        return Workspace(self.workspace, namespace=namespace, create=False)


def store_workspace(request: pytest.FixtureRequest, tmp: Any) -> str:
    """A fresh workspace on the store ``request.param``: a directory, or a PostgreSQL schema."""
    if request.param == "files":
        return str(tmp / "ws")
    url: str = request.getfixturevalue("postgres_server")
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}schema=t_{uuid.uuid4().hex[:16]}"


def serve_store(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    *args: str,
    env: dict[str, str] | None = None,
) -> Iterator[Served]:
    """A module fixture's body: a server over a fresh workspace of ``request.param``.

    It runs without background maintenance: a consolidation of its own between a test's steps
    would change what the test reads (``test_server_maintenance.py`` tests it).
    """
    workspace = store_workspace(request, tmp_path_factory.mktemp("served"))
    keys = make_keys(workspace, KEYS)
    server = ServerProcess(workspace, "--no-maintenance", *args, env=env).start()
    try:
        yield Served(store=request.param, workspace=workspace, server=server, keys=keys)
    finally:
        server.stop()


def expired_key(served: Served) -> dict[str, Any]:
    """A write key of tenant ``acme`` made to expire in 30 days, then expired at once (see
    :func:`expire_key`)."""
    made = create_key(served.workspace, "acme", "write", "--expires", "30d")
    expire_key(served, made["key_id"])
    return made


def expire_key(served: Served, key_id: str) -> None:
    """Move a key's expiry into the past (as if it had run out), before it is ever used."""
    from memdir.workspace import Workspace

    past = datetime.now(UTC) - timedelta(minutes=5)
    if served.store == "files":
        path = Path(served.workspace) / ".memdir-server" / "keys.json"
        document = json.loads(path.read_text())
        for record in document["keys"]:
            if record["key_id"] == key_id:
                record["expires_at"] = past.isoformat()
        path.write_text(json.dumps(document))
        return
    ws = Workspace(served.workspace, create=False)
    schema = ws.store.db.schema  # type: ignore[attr-defined]
    ws.store.db.transaction(  # type: ignore[attr-defined]
        lambda cur: cur.execute(
            f'UPDATE "{schema}".api_keys SET expires_at = %s WHERE key_id = %s', (past, key_id)
        )
    )


def spy_on_pool(app: Any) -> list[str]:
    """Make the application's namespace pool record each namespace it is asked for; the list
    it records into (empty while nothing reached the store)."""
    from memdir.server.pool import NamespacePool

    calls: list[str] = []

    class Spy(NamespacePool):
        def opened(self, ns: str) -> Workspace | None:
            calls.append(ns)
            return super().opened(ns)

        def get(self, ns: str, *, create: bool) -> Workspace | None:
            calls.append(ns)
            return super().get(ns, create=create)

    app.state.memdir.pool = Spy(app.state.memdir.root)
    return calls


def spied_app(tmp: Path) -> tuple[Any, str, list[str]]:
    """The application over a fresh workspace ``tmp/ws``, in this process, with an admin key of
    tenant ``acme`` and :func:`spy_on_pool` on its namespace pool: the application, the key,
    and the list the spy records into."""
    from memdir.server.app import create_app
    from memdir.server.settings import ServerSettings

    where = str(tmp / "ws")
    key = create_key(where, "acme", "admin")["key"]
    app = create_app(ServerSettings(workspace=where))
    return app, key, spy_on_pool(app)


def pausing(point: str, marker: Path) -> dict[str, str]:
    """The environment of a server whose requests stop at ``pause_point(point)`` (creating
    ``marker``) until the server is killed."""
    return {
        "MEMDIR_TEST_PAUSE_AT": point,
        "MEMDIR_TEST_PAUSE_FILE": str(marker),
        "MEMDIR_TEST_PAUSE_SECONDS": "600",
    }


def fresh_namespace(tenant: str = "acme") -> str:
    """A namespace name no other test uses."""
    return f"{tenant}.t{uuid.uuid4().hex[:12]}"


def wait_for(check: Any, what: str, *, bound: float = 60.0) -> Any:
    """Poll ``check()`` until it returns something true (bounded); that value."""
    deadline = time.monotonic() + bound
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {bound:g} s for {what}")
        time.sleep(0.05)


class RemoteServers:
    """``memdir serve`` over each store, started on first use and shared by a test session:
    what remote workspaces (``Workspace("http://127.0.0.1:PORT", ...)``) are opened on."""

    def __init__(
        self, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> None:
        self._request = request
        self._tmp = tmp_path_factory
        self._running: dict[str, Served] = {}

    def get(self, store: str) -> Served:
        """The server over ``store`` (``files`` or ``postgres``), started if need be."""
        if store not in self._running:
            if store == "files":
                workspace = str(self._tmp.mktemp("remote") / "ws")
            else:
                url: str = self._request.getfixturevalue("postgres_server")
                sep = "&" if "?" in url else "?"
                workspace = f"{url}{sep}schema=r_{uuid.uuid4().hex[:16]}"
            keys = make_keys(workspace, KEYS)
            # No background maintenance, as in serve_store: a consolidation of its own (the
            # daily tick at midnight) between two reads of a test would change what they read.
            server = ServerProcess(workspace, "--no-maintenance").start()
            self._running[store] = Served(store, workspace, server, keys)
        return self._running[store]

    def close(self) -> None:
        """Stop every server started."""
        for served in self._running.values():
            served.server.stop()
        self._running.clear()


def remote_workspace(served: Served, *, key: str = "acme_write", **options: Any) -> Any:
    """A workspace in a fresh namespace on the server ``served``, with the key ``key``."""
    from memdir.workspace import Workspace

    return Workspace(
        served.server.url,
        namespace=fresh_namespace(),
        api_key=served.keys.secrets[key],
        **options,
    )


@contextlib.contextmanager
def launched(args: Sequence[str], ready: re.Pattern[str]) -> Iterator[str]:
    """``python -m memdir ARGS`` running until the end of the block; the URL its ready line
    (``ready``, whose group 1 is the URL) names. Stopped with SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdir", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=dict(os.environ),
    )
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def read(stream: Any, into: Any, *, stdout: bool) -> None:
        with stream:  # closed here: a pipe left open warns when it is collected
            for line in stream:
                into(line)
        if stdout:
            lines.put(None)

    for stream, into, stdout in (
        (proc.stdout, lines.put, True),
        (proc.stderr, errors.append, False),
    ):
        threading.Thread(
            target=read, args=(stream, into), kwargs={"stdout": stdout}, daemon=True
        ).start()
    try:
        url = ""
        while not url:
            line = lines.get(timeout=START_TIMEOUT)
            assert line is not None, f"memdir {args[0]} exited: {''.join(errors)}"
            found = ready.search(line)
            url = found[1] if found else ""
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
