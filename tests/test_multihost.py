"""One user's memory shared by two agent hosts over a network, one of them killed mid-work.

The setup of ``_netns.py``: a PostgreSQL server in a network namespace of its own, reached
over veth links from two agent hosts, each a network namespace with a host name of its own.
Every process of a host runs there (``ip netns exec``) and uses the public API on one
namespace of the workspace (``alice``): ledger appends (``append_block``), flushes
(``MemoryFlushManager``) and consolidations (``MemoryConsolidator``), with the models of
:mod:`memdir.testing`. The workers are those of ``test_memory_crash.py`` and
``test_pg_multiprocess.py``, with short lock rows (2 s), so that a dead host's are taken over
within the test. The consolidation lease is long (10 min) so that nothing the test does on a
slow machine outlasts it; the host that takes a dead host's lease over moves its own lease
clock past the expiry instead of waiting for it. The test process itself cannot reach the
server: every check is read back by a process on a host.

Without network namespaces (not root) these tests fail, saying so: CI runs as root.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _netns import Hosts, NetnsUnavailable, hosts
from memdir.memory._lease import LeaseInfo
from test_memory_crash import WORKER, assert_one_consolidation_at_a_time
from test_pg_multiprocess import SHORT_LOCKS

USER = "alice"
LEASE_SECONDS = 600
"""The consolidation lease of the workers: far longer than anything the test does between a
host pausing in a consolidation and the takeover, however slow the machine."""

PRELUDE = SHORT_LOCKS + (
    "from datetime import timedelta\n"
    "from memdir.memory import MemoryConsolidator\n"
    "from memdir.store.workspace import Workspace as _Workspace\n"
    "MemoryConsolidator.__init__.__kwdefaults__['lease_ttl'] = "
    f"timedelta(seconds={LEASE_SECONDS})\n"
    "MemoryConsolidator.__init__.__kwdefaults__['max_memory_tokens'] = 100_000\n"
    f"_Workspace.__init__.__kwdefaults__['namespace'] = {USER!r}\n"
)
"""Run first in every host process: short lock rows and lease, room in MEMORY.md for every
note the hosts append (none is trimmed away), and Alice's namespace."""

# The scripts below run after WORKER with the mode "-" (which does nothing): they use its
# workspace ``ws`` and its model functions ``extract`` and ``merge``.

CONTENDER = r"""
import os
from test_memory_crash import _contender

class Gate:  # the start barrier of processes on two hosts: a file they wait for
    def __init__(self, path):
        self.path = path

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.path):
            assert time.monotonic() < deadline, "the start gate never opened"
            time.sleep(0.01)

_contender(root, int(sys.argv[5]), Gate(sys.argv[6]), sys.argv[7])
"""

APPENDER = r"""
from memdir.store.ledger import append_block

for i in range(int(sys.argv[6])):
    append_block(ws, [f"{sys.argv[5]} note {i}"], header="Memory Add")
    print(i, flush=True)  # acknowledged: the append returned
print(json.dumps({"appended": int(sys.argv[6])}))
"""

TAKEOVER = r"""
# Host b's lease clock, moved to chosen instants around the dead lease's expiry: what b does
# then is what it would do at those instants, without waiting for them.
from memdir.memory import _lease

dead = _lease.LeaseInfo.parse(ws.read_versioned("memory/.consolidation.lease").data)
offset = timedelta(0)
_real_now = _lease.Lease._now
_lease.Lease._now = lambda self: _real_now(self) + offset
attempts = []
for label, at in (
    ("now", None),
    ("a minute before it expires", dead.expires_at - timedelta(seconds=60)),
    ("a second after it expired", dead.expires_at + timedelta(seconds=1)),
):
    if at is not None:
        offset = at - datetime.now().astimezone()
    result = asyncio.run(MemoryConsolidator(ws, FunctionModel(merge)).consolidate())
    attempts.append([label, result.skipped])
print(json.dumps({"attempts": attempts, "added": list(result.added)}))
"""

READER = r"""
from test_pg_multiprocess import ledger_bullets

lease = ws.read_versioned("memory/.consolidation.lease")
history = [e.name for e in ws.listdir("memory/.history") if e.name.startswith("MEMORY.")]
print(json.dumps({
    "bullets": ledger_bullets(ws),
    "ledgers": [ws.read_text(rel) for _, rel in ws.ledgers()],
    "memory": ws.read_text("MEMORY.md"),
    "lease": lease.data.decode() if lease is not None else None,
    "history": [ws.read_text(f"memory/.history/{name}") for name in sorted(history)],
}))
"""


# -- running processes on the hosts -----------------------------------------------------------


def start(
    net: Hosts,
    host: str,
    url: str,
    script: str,
    *args: str,
    pause: str | None = None,
    marker: Path | None = None,
) -> subprocess.Popen[str]:
    """Start ``WORKER`` (mode and arguments ``args``) then ``script`` on ``host``."""
    env = net.env()
    if pause is not None:
        assert marker is not None
        env |= {
            "MEMDIR_TEST_PAUSE_AT": pause,
            "MEMDIR_TEST_PAUSE_FILE": str(marker),
            "MEMDIR_TEST_PAUSE_SECONDS": "600",
        }
    code = PRELUDE + WORKER + script
    argv = net.command(host, [sys.executable, "-c", code, url, *args])
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen[str], *, timeout: float = 240) -> Any:
    """Wait for a host process; its last line of output, as JSON."""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def run(net: Hosts, host: str, url: str, *args: str, script: str = "") -> Any:
    """Run a worker on ``host`` to the end (``flush SESSION COUNT``, ``consolidate - 0``)."""
    return finish(start(net, host, url, script, *args))


def read_state(net: Hosts, host: str, url: str) -> dict[str, Any]:
    """What ``host`` reads of Alice's memory: ledgers, MEMORY.md, the lease, the history."""
    state: dict[str, Any] = run(net, host, url, "-", "-", "0", script=READER)
    return state


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 180
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"no {path.name} within 180 s"
        time.sleep(0.02)


def memory_bullets(text: str) -> Counter[str]:
    return Counter(ln[2:] for ln in text.splitlines() if ln.startswith("- "))


def assert_whole_lines(ledgers: list[str]) -> None:
    """Every line of every ledger is a blank, a block heading or a bullet: nothing torn."""
    for text in ledgers:
        for line in text.splitlines():
            assert line == "" or line.startswith(("## ", "- ")), f"torn line {line!r}"
        assert text.endswith("\n")


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def net() -> Iterator[Hosts]:
    """The server's and the two agent hosts' network namespaces, for the module."""
    try:
        with hosts() as made:
            yield made
    except NetnsUnavailable as exc:
        pytest.fail(
            f"the multi-host tests make network namespaces, which needs root "
            f"(CAP_NET_ADMIN, as in CI): {exc}",
            pytrace=False,
        )


@pytest.fixture
def urls(net: Hosts) -> Iterator[dict[str, str]]:
    """A fresh schema for the test, as each host reaches it; the hosts' processes end after."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield {host: f"{url}?schema={schema}" for host, url in net.urls.items()}
    for host in net.host_ns:
        net.kill(host)


# -- both hosts at once ------------------------------------------------------------------------


def test_two_hosts_append_flush_and_consolidate_one_memory(
    net: Hosts, urls: dict[str, str], tmp_path: Path
) -> None:
    gate, trace = tmp_path / "go", tmp_path / "trace.txt"
    procs = [
        start(net, host, urls[host], CONTENDER, "-", "-", "0", str(index), str(gate), str(trace))
        for index, host in enumerate(["a", "a", "b", "b"])
    ]
    notes = 150
    procs += [start(net, h, urls[h], APPENDER, "-", "-", "0", h, str(notes)) for h in "ab"]
    gate.touch()
    for proc in procs[:4]:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for proc in procs[4:]:
        assert finish(proc) == {"appended": notes}

    state = read_state(net, "b", urls["b"])
    expected = {f"process {i} turn {t} fact" for i in range(4) for t in range(4)}
    expected |= {f"shared turn {t} fact" for t in range(4)}
    expected |= {f"{h} note {i}" for h in "ab" for i in range(notes)}
    counts = Counter(state["bullets"])
    assert set(counts) == expected  # nothing lost
    assert all(n == 1 for n in counts.values()), counts.most_common(3)  # nothing doubled
    assert_whole_lines(state["ledgers"])
    # Each host's notes in the order it appended them.
    for h in "ab":
        mine = [b for b in state["bullets"] if b.startswith(f"{h} note ")]
        assert mine == [f"{h} note {i}" for i in range(notes)]

    assert_one_consolidation_at_a_time(trace.read_text(encoding="utf-8"))

    run(net, "a", urls["a"], "consolidate", "-", "0")  # whatever came in while others held it
    memory = memory_bullets(read_state(net, "b", urls["b"])["memory"])
    assert set(memory) == expected and all(n == 1 for n in memory.values())


# -- a host killed in a consolidation ----------------------------------------------------------


def _memory(*sessions: str) -> str:
    lines = [f"- remembered {s} fact {i}" for s in sessions for i in range(4)]
    return "# Memory\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("point", ["consolidate:before-replace", "consolidate:after-replace"])
def test_a_host_killed_in_a_consolidation_loses_nothing_and_its_lease_expires(
    net: Hosts, urls: dict[str, str], tmp_path: Path, point: str
) -> None:
    a, b = urls["a"], urls["b"]
    run(net, "a", a, "flush", "s1", "4")
    run(net, "b", b, "consolidate", "-", "0")
    old, new = _memory("s1"), _memory("s1", "s2")
    assert read_state(net, "a", a)["memory"] == old
    run(net, "a", a, "flush", "s2", "4")

    # Host a consolidates s2 and stops there, holding the lease; both hosts append meanwhile.
    marker = tmp_path / "paused"
    paused = start(net, "a", a, "", "consolidate", "-", "0", pause=point, marker=marker)
    wait_for(marker, paused)
    appender_a = start(net, "a", a, APPENDER, "-", "-", "0", "a", "100000")
    notes_b = 100
    appender_b = start(net, "b", b, APPENDER, "-", "-", "0", "b", str(notes_b))
    flush_b = start(net, "b", b, "", "flush", "s3", "4")
    busy = start(net, "b", b, "", "consolidate", "-", "0")
    assert finish(busy) == {"skipped": "busy", "added": []}  # one consolidation at a time
    assert finish(appender_b) == {"appended": notes_b}
    assert finish(flush_b)["skipped"] is None  # appends need no lease
    assert appender_a.stdout is not None
    for _ in range(20):  # host a is appending too when it dies
        assert appender_a.stdout.readline(), appender_a.communicate()[1]
    held = read_state(net, "b", b)
    assert held["memory"] in (old, new)

    assert net.kill("a")  # the host dies: every process of it, kill -9
    paused.communicate(timeout=60)
    acked = 20 + len(appender_a.stdout.read().splitlines())  # what the pipe still held
    appender_a.communicate(timeout=60)
    dead = LeaseInfo.parse(read_state(net, "b", b)["lease"].encode())
    assert dead is not None and dead.host == "agent-a"

    # Host b cannot see that host a's process died: it takes the lease over when it expires.
    takeover = run(net, "b", b, "-", "-", "0", script=TAKEOVER)
    assert takeover["attempts"] == [
        ["now", "busy"],
        ["a minute before it expires", "busy"],
        ["a second after it expired", None],
    ]

    state = read_state(net, "b", b)
    taken = LeaseInfo.parse(state["lease"].encode())
    assert taken is not None and taken.host == "agent-b" and taken.token != dead.token
    counts = Counter(state["bullets"])
    notes_a = {k for k in counts if k.startswith("a note ")}
    # Every append host a saw return is there; the one it died in is there whole, or absent.
    assert notes_a in (
        {f"a note {i}" for i in range(acked)},
        {f"a note {i}" for i in range(acked + 1)},
    )
    expected = {f"remembered {s} fact {i}" for s in ("s1", "s2", "s3") for i in range(4)}
    expected |= {f"b note {i}" for i in range(notes_b)} | notes_a
    assert set(counts) == expected and all(n == 1 for n in counts.values())
    assert_whole_lines(state["ledgers"])
    memory = memory_bullets(state["memory"])
    assert set(memory) == expected and all(n == 1 for n in memory.values())
    assert state["memory"].startswith(new if point.endswith("after-replace") else old)
    assert old in state["history"]
    assert run(net, "b", b, "consolidate", "-", "0") == {"skipped": "nothing_new", "added": []}
