"""A PostgreSQL workspace that cannot be opened is one line saying why, from the CLI and the API.

Each case runs the real ``memdir`` command in a subprocess (``Error: ...`` on one line of
stderr, nothing else there, exit code 1) and the Python API (a :class:`WorkspaceError` whose
message is that line): psycopg missing (its import blocked in the subprocess), a malformed
URL, a refused connection, an unknown host, a server that never answers, an unknown database
or role, and a wrong password (a server of the test's own, with SCRAM authentication).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _postgres import Server, _system_bin, bundled_bin
from memdir.errors import WorkspaceError
from memdir.workspace import Workspace

BLOCK_PSYCOPG = (
    "import sys\n"
    "sys.modules['psycopg'] = None  # an import of it fails, as when it is not installed\n"
    "sys.modules['psycopg_pool'] = None\n"
)


def _cli(
    tmp_path: Path, url: str, *args: str, prelude: str = ""
) -> subprocess.CompletedProcess[str]:
    code = prelude + "from memdir.cli import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args, "-w", url, "search", "tabs"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # no traceback, no pool logs
    assert lines[0].startswith("Error: ")
    return lines[0].removeprefix("Error: ")


def _api_error(url: str) -> str:
    with pytest.raises(WorkspaceError) as info:
        Workspace(url, create=False).exists()
    message = str(info.value)
    assert "\n" not in message
    return message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a server hung, a firewall)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


@pytest.fixture(scope="module")
def password_server() -> Iterator[str]:
    """A server of its own whose TCP clients must give the password ``right``; its URL."""
    bindir = _system_bin() or bundled_bin()
    assert bindir is not None, "no PostgreSQL binaries (see tests/_postgres.py)"
    srv = Server(bindir, password="right")
    try:
        yield srv.start()
    finally:
        srv.stop()


def _same_everywhere(tmp_path: Path, url: str) -> str:
    """The cause, checked to be the same one line from the CLI and from the API."""
    said = _one_error_line(_cli(tmp_path, url))
    assert said == _api_error(url)
    return said


def test_without_psycopg_the_cli_and_the_api_say_what_to_install(tmp_path: Path) -> None:
    url = "postgresql://memdir@127.0.0.1:5432/app"
    said = _one_error_line(_cli(tmp_path, url, prelude=BLOCK_PSYCOPG))
    assert said == (
        "a PostgreSQL workspace needs psycopg 3, which is not installed: "
        "pip install 'memdir[postgres]'"
    )
    api = BLOCK_PSYCOPG + (
        "from memdir.errors import WorkspaceError\n"
        "from memdir.workspace import Workspace\n"
        "try:\n"
        f"    Workspace({url!r})\n"
        "except WorkspaceError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", api], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout == said + "\n" and done.stderr == ""


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("postgresql://u:s3cret@127.0.0.1:notaport/db", "port 'notaport' is not a number"),
        ("postgresql://u:s3cret@[::1:5432/db", "Invalid IPv6 URL"),
        ("postgresql://u:my s3cret@127.0.0.1/db", 'unexpected spaces found in "***"'),
        ("postgresql://u@127.0.0.1/db?password=s3cret&pool_size=x", "pool_size must be"),
        ("postgresql://u@127.0.0.1/db?bogus=1&password=s3cret", "invalid URI query parameter"),
        ("postgresql://u@127.0.0.1/db?connect_timeout=soon", "connect_timeout must be a number"),
    ],
)
def test_a_malformed_url_is_refused_at_once_without_its_password(
    tmp_path: Path, url: str, cause: str
) -> None:
    said = _same_everywhere(tmp_path, url)
    assert said.startswith("malformed PostgreSQL URL postgresql://u")
    assert cause in said
    assert "s3cret" not in said


def test_a_refused_connection_names_host_and_port(tmp_path: Path) -> None:
    port = _free_port()
    said = _same_everywhere(tmp_path, f"postgresql://memdir@127.0.0.1:{port}/app")
    assert said == (
        f"cannot connect to PostgreSQL at postgresql://memdir@127.0.0.1:{port}/app: "
        f"connection refused at 127.0.0.1:{port}"
    )


def test_an_unknown_host_is_named(tmp_path: Path) -> None:
    said = _same_everywhere(tmp_path, "postgresql://memdir@db.invalid:5432/app")
    assert said.endswith(": unknown host db.invalid")


def test_a_server_that_never_answers_is_given_up_after_connect_timeout(
    tmp_path: Path, silent_port: int
) -> None:
    url = f"postgresql://memdir@127.0.0.1:{silent_port}/app?connect_timeout=2&sslmode=disable"
    said = _same_everywhere(tmp_path, url)
    assert said.endswith(": no answer within 2 s (connect_timeout)")


def test_an_unknown_database_or_role_is_named(tmp_path: Path, postgres_server: str) -> None:
    base = postgres_server.rpartition("/")[0]
    said = _same_everywhere(tmp_path, f"{base}/nosuchdb")
    assert said.endswith(": database nosuchdb does not exist at " + base.rpartition("@")[2])
    role = base.replace("postgres@", "nosuchrole@", 1)
    said = _same_everywhere(tmp_path, f"{role}/postgres")
    assert ": authentication failed for user nosuchrole: no such role at " in said


def test_a_wrong_password_is_authentication_failed_for_the_user(
    tmp_path: Path, password_server: str
) -> None:
    url = password_server.replace("postgres@", "postgres:wrong@", 1)
    said = _same_everywhere(tmp_path, url)
    assert said.endswith(": authentication failed for user postgres")
    assert "wrong" not in said
    right = password_server.replace("postgres@", "postgres:right@", 1)
    assert not Workspace(right, create=False).exists()  # the password is the only fault


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    done = _cli(tmp_path, f"postgresql://memdir@127.0.0.1:{_free_port()}/app", "-v")
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "connection refused at 127.0.0.1:" in done.stderr
