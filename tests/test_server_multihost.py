"""Two `memdir serve` replicas on two hosts, one PostgreSQL: stateless replicas of one memory.

The setup of ``_netns.py``: PostgreSQL in a network namespace of its own, two agent hosts
reaching it over veth links. A replica runs on each host (``memdir serve --host 0.0.0.0``);
a driver in the server's namespace reaches both over the network, as a load balancer would.
Keys are made and revoked with the real CLI on a host. Host ``a`` is killed (``kill -9`` of
all its processes) while writes run through it: the driver retries each unanswered write on
``b`` with the same ``Idempotency-Key``, and every write acknowledged is there once. Without
network namespaces (not root) these tests fail, saying so: CI runs as root.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from _netns import Hosts, NetnsUnavailable, hosts

PORT = 8000
START_TIMEOUT = 90.0

DRIVER = r"""
import json, sys, time
import httpx

urls = json.loads(sys.argv[1])
key, ns, step = sys.argv[2], sys.argv[3], sys.argv[4]
headers = {"Authorization": f"Bearer {key}"}
out = {}
if step == "write-a-read-b":
    with httpx.Client(timeout=60) as http:
        added = http.post(f"{urls['a']}/v1/namespaces/{ns}/memories", headers=headers,
                          json={"text": "the kiln reaches 1280 degrees"})
        found = http.get(f"{urls['b']}/v1/namespaces/{ns}/search", headers=headers,
                         params={"q": "kiln degrees"})
        memory_b = http.get(f"{urls['b']}/v1/namespaces/{ns}/memory-md", headers=headers)
    out = {"added": added.status_code, "citation": added.json().get("citation"),
           "found": found.status_code,
           "hits": [h["content"] for h in found.json().get("hits", [])],
           "memory_b": memory_b.status_code}
elif step == "refused-by":
    # each replica until it refuses the key (bounded), then the answer it gives
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=30) as http:
        for host, url in sorted(urls.items()):
            while True:
                answer = http.get(f"{url}/v1/whoami", headers=headers)
                if answer.status_code == 401 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            out[host] = {"status": answer.status_code, "code": answer.json().get("code")}
print(json.dumps(out))
"""

# Writers adding through host a until it dies, then through b, each retry of a write with its
# own Idempotency-Key and body; a line "acked" per write answered, then every write's answer
# and, read back through b, how many times each token stands in the ledgers.
KILL_DRIVER = r"""
import asyncio, json, sys, time, uuid
import httpx

urls = json.loads(sys.argv[1])
key, ns, writers, each = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
headers = {"Authorization": f"Bearer {key}"}
acked, failovers, waits = {}, [], []

async def add(http, host, token):
    body = {"text": f"kiln batch {token}"}
    idem = {**headers, "Idempotency-Key": str(uuid.uuid4())}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            answer = await http.post(f"{urls[host]}/v1/namespaces/{ns}/memories", json=body,
                                     headers=idem)
        except httpx.TransportError:
            host = "b"  # a is gone: the same write, the same key, on the other replica
            failovers.append(token)
            continue
        if answer.status_code == 409:  # the dead replica's claim, until its lease runs out
            waits.append(token)
            await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
            continue
        acked[token] = {"status": answer.status_code, "host": host,
                        "replayed": answer.headers.get("Idempotency-Replayed") == "true"}
        print("acked", flush=True)
        return host
    raise SystemExit(f"write {token} not answered in time")

async def writer(i):
    host = "a"
    async with httpx.AsyncClient(timeout=60) as http:
        for j in range(each):
            host = await add(http, host, f"tok{i}x{j}x{uuid.uuid4().hex[:12]}")

async def main():
    await asyncio.gather(*(writer(i) for i in range(writers)))
    counts = {}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        base = f"{urls['b']}/v1/namespaces/{ns}"
        for item in (await http.get(f"{base}/ledgers")).json()["items"]:
            text = (await http.get(f"{base}/ledgers/{item['date']}")).text
            for word in text.split():
                if word.startswith("tok"):
                    counts[word] = counts.get(word, 0) + 1
    print(json.dumps({"acked": acked, "failovers": failovers, "waits": waits, "counts": counts}),
          flush=True)

asyncio.run(main())
"""


class Replica:
    """``memdir serve`` on an agent host, listening on all its interfaces."""

    def __init__(self, net: Hosts, host: str, url: str) -> None:
        # A dead replica's claim of an Idempotency-Key is taken over after 3 s, not 30.
        argv = [sys.executable, "-m", "memdir", "serve", "-w", url, "--host", "0.0.0.0",
                "--port", str(PORT), "--idempotency-lease", "3"]  # fmt: skip
        self.proc = subprocess.Popen(
            net.command(host, argv),
            env=net.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._keep, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:  # closed at the end: a pipe left open warns when collected
            for line in self.proc.stdout:
                self.lines.put(line)
        self.lines.put(None)

    def _keep(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            self.stderr.extend(self.proc.stderr)

    def wait_ready(self) -> None:
        while True:
            try:
                line = self.lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"replica did not start: {''.join(self.stderr)}") from None
            if line is None:
                raise AssertionError(f"replica exited: {''.join(self.stderr)}")
            if "memdir serve: listening on" in line:
                return


def run_on(net: Hosts, host: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m memdir ARGS`` on agent host ``host``."""
    done = subprocess.run(
        net.command(host, [sys.executable, "-m", "memdir", *args]),
        env=net.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def drive(net: Hosts, key: str, ns: str, step: str) -> Any:
    """The driver, in the server's namespace, talking to both replicas over the network."""
    urls = {h: f"http://{net.host_addr(h)}:{PORT}" for h in net.host_ns}
    done = subprocess.run(
        net.in_server_ns([sys.executable, "-c", DRIVER, json.dumps(urls), key, ns, step]),
        env=net.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def net() -> Iterator[Hosts]:
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
def replicas(net: Hosts) -> Iterator[dict[str, str]]:
    """A fresh schema served by a replica on each host; the URL each host uses for it."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    urls = {host: f"{url}?schema={schema}" for host, url in net.urls.items()}
    run_on(net, "a", "-w", urls["a"], "db", "upgrade")
    started = {host: Replica(net, host, urls[host]) for host in net.host_ns}
    try:
        for replica in started.values():
            replica.wait_ready()
        yield urls
    finally:
        for host in net.host_ns:
            net.kill(host)


def test_a_write_through_one_replica_is_read_through_the_other(
    net: Hosts, replicas: dict[str, str]
) -> None:
    made = json.loads(run_on(net, "a", "keys", "create", "-w", replicas["a"], "--tenant",
                             "acme", "--scope", "write", "--json").stdout)  # fmt: skip
    got = drive(net, made["key"], "acme.alice", "write-a-read-b")
    assert got["added"] == 201 and got["citation"].startswith("memory/")
    assert got["found"] == 200 and got["hits"] == ["- the kiln reaches 1280 degrees"]
    assert got["memory_b"] == 200


def test_a_key_revoked_on_one_host_is_refused_by_both_replicas(
    net: Hosts, replicas: dict[str, str]
) -> None:
    made = json.loads(run_on(net, "a", "keys", "create", "-w", replicas["a"], "--tenant",
                             "acme", "--scope", "read", "--json").stdout)  # fmt: skip
    assert drive(net, made["key"], "acme.bob", "write-a-read-b")["added"] == 403  # read key
    run_on(net, "b", "keys", "revoke", made["key_id"], "-w", replicas["b"])
    refused = drive(net, made["key"], "acme.bob", "refused-by")
    assert refused == {h: {"status": 401, "code": "invalid-key"} for h in ("a", "b")}


def test_writes_through_a_host_killed_mid_write_are_all_there_once(
    net: Hosts, replicas: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    made = json.loads(run_on(net, "a", "keys", "create", "-w", replicas["a"], "--tenant",
                             "acme", "--scope", "write", "--json").stdout)  # fmt: skip
    urls = {h: f"http://{net.host_addr(h)}:{PORT}" for h in net.host_ns}
    writers, each = 8, 30
    driver = subprocess.Popen(
        net.in_server_ns([sys.executable, "-c", KILL_DRIVER, json.dumps(urls), made["key"],
                          "acme.kiln", str(writers), str(each)]),
        env=net.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert driver.stdout is not None
        for _ in range(writers * 3):  # writes answered by a, with 8 more on their way: kill it
            assert driver.stdout.readline() == "acked\n", (
                driver.stderr.read() if driver.stderr else ""
            )
        killed = net.kill("a")
        out, err = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert killed and driver.returncode == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    acked, counts = got["acked"], got["counts"]
    assert len(acked) == writers * each
    assert all(a["status"] == 201 for a in acked.values()), acked
    assert {t for t, a in acked.items() if a["host"] == "b"}, "no write went to b"
    assert got["failovers"], "no write was cut by the kill"
    assert counts == dict.fromkeys(acked, 1)  # none lost, none twice, nothing else
    summary = {"writes": len(acked), "cut_by_the_kill": len(set(got["failovers"])),
               "waited_for_a_dead_claim": len(set(got["waits"])),
               "replayed": sum(a["replayed"] for a in acked.values())}  # fmt: skip
    with capsys.disabled():
        print(f"\nkill -9 during writes: {json.dumps(summary)}")
