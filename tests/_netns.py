"""Three hosts on one machine: a PostgreSQL server and two agent hosts, in network namespaces.

:func:`hosts` makes three network namespaces (``ip netns add``), links the server's to each
agent host's with a veth pair on a private /30 (``10.231.1.0/30`` to host ``a``,
``10.231.2.0/30`` to host ``b``), starts a throwaway PostgreSQL server inside the server's
namespace listening on its two veth addresses only, and removes all of it afterwards, even
on failure. An agent host's processes run with ``ip netns exec`` under a host name of their
own (``unshare --uts``), so that, as on real hosts, a process of one cannot see whether a
process of the other is alive: a lease or a lock left by a dead host is taken over only when
it expires. This needs root (``CAP_NET_ADMIN`` and ``CAP_SYS_ADMIN``), as CI has.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _postgres import Server, _system_bin, bundled_bin

HOSTS = ("a", "b")
_NET = "10.231"


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, or no ``ip``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hosts:
    """The namespaces of a running setup and the server's URL as each host reaches it."""

    server_ns: str
    host_ns: dict[str, str]
    urls: dict[str, str]
    tests_dir: Path = field(default=Path(__file__).resolve().parent)

    def command(self, host: str, args: Sequence[str]) -> list[str]:
        """``args`` run on agent host ``host`` (its network namespace and host name)."""
        rename = 'hostname "$0" && exec "$@"'
        return [
            "ip", "netns", "exec", self.host_ns[host], "unshare", "--uts", "--",
            "sh", "-c", rename, f"agent-{host}", *args,
        ]  # fmt: skip

    def in_server_ns(self, args: Sequence[str]) -> list[str]:
        """``args`` run in the server's network namespace, which reaches both agent hosts (at
        :meth:`host_addr`) and outlives them."""
        return ["ip", "netns", "exec", self.server_ns, *args]

    @staticmethod
    def host_addr(host: str) -> str:
        """Agent host ``host``'s address as the server's namespace reaches it."""
        return f"{_NET}.{HOSTS.index(host) + 1}.2"

    def env(self) -> dict[str, str]:
        """The environment for a host's Python processes: the test modules importable."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_TEST_")}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(self.tests_dir), os.environ.get("PYTHONPATH", "")) if p
        )
        return env

    def pids(self, host: str) -> list[int]:
        """Every process running in host ``host``'s network namespace."""
        return _pids(self.host_ns[host])

    def kill(self, host: str) -> list[int]:
        """``kill -9`` every process of host ``host`` (the host dies); their pids."""
        found = self.pids(host)
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return found


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetnsUnavailable(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")


def _pids(ns: str) -> list[int]:
    done = subprocess.run(
        ["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30, check=False
    )
    return [int(p) for p in done.stdout.split()]


def _pg_bin() -> Path:
    found = _system_bin() or bundled_bin()
    if found is None:
        raise RuntimeError(
            "the multi-host tests need PostgreSQL's binaries: apt-get install postgresql-15, "
            "or set MEMDIR_TEST_PG_BIN"
        )
    return found


@contextlib.contextmanager
def hosts(*, server_options: str = "") -> Iterator[Hosts]:
    """Make the three namespaces and the server; tear them down when the block ends.

    Args:
        server_options: more ``postgres`` options (``-c name=value ...``).

    Raises:
        NetnsUnavailable: namespaces or veth links cannot be made (run as root).
    """
    if shutil.which("ip") is None:
        raise NetnsUnavailable("the 'ip' command (iproute2) is not installed")
    if os.geteuid() != 0:
        raise NetnsUnavailable(f"running as uid {os.geteuid()}, not root (needs CAP_NET_ADMIN)")
    tag = uuid.uuid4().hex[:8]
    server_ns = f"memdir-{tag}-db"
    host_ns = {h: f"memdir-{tag}-{h}" for h in HOSTS}
    made: list[str] = []
    srv: Server | None = None
    try:
        for ns in (server_ns, *host_ns.values()):
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        listen = []
        for i, host in enumerate(HOSTS, start=1):
            # Both ends are created inside their namespaces: no name is ever taken on the host.
            _ip(
                "link", "add", f"to-{host}", "netns", server_ns, "type", "veth",
                "peer", "name", "to-db", "netns", host_ns[host],
            )  # fmt: skip
            _ip("-n", server_ns, "addr", "add", f"{_NET}.{i}.1/30", "dev", f"to-{host}")
            _ip("-n", host_ns[host], "addr", "add", f"{_NET}.{i}.2/30", "dev", "to-db")
            _ip("-n", server_ns, "link", "set", f"to-{host}", "up")
            _ip("-n", host_ns[host], "link", "set", "to-db", "up")
            listen.append(f"{_NET}.{i}.1")
        srv = Server(
            _pg_bin(),
            netns=server_ns,
            listen=",".join(listen),
            clients=f"{_NET}.0.0/16",
            options=server_options,
        )
        first = srv.start()
        urls = {h: first.replace(listen[0], listen[i]) for i, h in enumerate(HOSTS)}
        yield Hosts(server_ns=server_ns, host_ns=host_ns, urls=urls)
    finally:
        if srv is not None:
            srv.stop()
        for ns in made:
            for pid in _pids(ns):  # nothing started in the namespaces outlives them
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(NetnsUnavailable):
                _ip("netns", "del", ns)
