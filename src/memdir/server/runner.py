"""Run the application under uvicorn: bind the socket first, say where it listens once it is
ready, and shut down gracefully.

The socket is bound here, before uvicorn starts, so ``--port 0`` can report the port chosen,
and ``--workers N`` processes share it. ``memdir serve: listening on URL`` goes to stdout when
every worker has finished starting (the keys are read). On SIGTERM or SIGINT, uvicorn stops
accepting connections and requests in flight get ``graceful_timeout`` seconds to finish; every
store write is atomic, so one cut short by the end of that time leaves nothing half-written.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable

import uvicorn
from uvicorn.supervisors import Multiprocess

from memdir.errors import ConfigError
from memdir.server.settings import CONFIG_ENV, ServerSettings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

__all__ = ["bind", "serve"]

_FACTORY = "memdir.server.app:app_from_env"
_READY_TIMEOUT = 120.0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free port).

    Raises:
        ConfigError: the address cannot be bound (in use, unknown host, no permission).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def bound_url(settings: ServerSettings, sock: socket.socket) -> str:
    """The URL clients reach the socket at (``[::1]`` for an IPv6 address)."""
    port = sock.getsockname()[1]
    host = settings.host
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass  # a host name
    return f"{settings.scheme}://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn's server, saying when it is ready."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            self._on_ready()


class _Supervisor(Multiprocess):
    """uvicorn's worker supervisor, saying when every worker is ready."""

    def __init__(
        self, config: uvicorn.Config, sockets: list[socket.socket], on_ready: Callable[[], None]
    ) -> None:
        super().__init__(config, sockets)
        self._on_ready = on_ready

    def init_processes(self) -> None:
        super().init_processes()
        can_wait = all(hasattr(p, "wait_until_ready") for p in self.processes)  # uvicorn 0.51+
        if can_wait and not all(
            p.wait_until_ready(_READY_TIMEOUT, self.should_exit) for p in self.processes
        ):
            return  # a worker failed to start: the supervisor stops, with its log saying why
        self._on_ready()


def serve(settings: ServerSettings) -> None:
    """Serve ``settings`` until SIGTERM or SIGINT (blocks).

    Raises:
        ConfigError: the address cannot be bound, or the keys cannot be read.
        WorkspaceError: the store cannot be reached.
        SystemExit: the application failed to start (its log says why).
    """
    from memdir.server.app import preflight

    preflight(settings)
    sock = bind(settings.host, settings.port)
    url = bound_url(settings, sock)
    os.environ[CONFIG_ENV] = settings.to_env()  # for the factory, in this process or a worker
    metrics_dir = _multiprocess_metrics(settings)
    config = uvicorn.Config(
        _FACTORY,
        factory=True,
        workers=settings.workers,
        lifespan="on",
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=int(settings.graceful_timeout),
        ssl_certfile=settings.ssl_certfile,
        ssl_keyfile=settings.ssl_keyfile,
        log_level="warning",
    )

    def ready() -> None:
        if settings.ui_local:
            _say(f"memdir ui: open {url}/ui/ (workspace {_shown(settings.workspace)})")
        else:
            _say(f"memdir serve: listening on {url} (workspace {_shown(settings.workspace)})")

    # uvicorn raises the signal again once it has shut down gracefully; for SIGTERM (what a
    # service manager sends) that finished stop is a success: exit 0, not "killed".
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        if settings.workers == 1:
            server = _Server(config, ready)
            server.run(sockets=[sock])
            if not server.started:
                raise SystemExit(3)
        else:
            _Supervisor(config, [sock], ready).run()
    finally:
        sock.close()
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _multiprocess_metrics(settings: ServerSettings) -> str | None:
    """With several workers, a fresh private directory where each keeps its metrics, so
    that any of them answers ``/metrics`` with the sums of all (prometheus-client's
    multiprocess mode); the directory made here, to remove at exit (``None``: none made).
    A ``$PROMETHEUS_MULTIPROC_DIR`` set by the operator is used as it is."""
    if settings.workers == 1 or not settings.metrics or os.environ.get(MULTIPROC_ENV):
        return None
    made = tempfile.mkdtemp(prefix="memdir-metrics-")  # mode 0700
    os.environ[MULTIPROC_ENV] = made  # read by prometheus-client when a worker imports it
    return made


def _shown(workspace: str) -> str:
    from memdir.store._urls import is_postgres_url, redact_url

    return redact_url(workspace) if is_postgres_url(workspace) else workspace
