"""Background maintenance in ``memdir serve``, with real server processes.

Two replicas on one PostgreSQL consolidate every flush exactly once, whichever replica took
it; ``kill -9`` of the sweeping replica in the middle of a consolidation hands the sweep and the
namespace over to the other (at once on the same host; after the leases run out from another
host, made here with a UTS namespace of its own), losing and doubling nothing; a server with two
workers over a directory does the same; SIGTERM stops a background job cleanly. The model
(``_server_models.traced``) writes when each merge starts and ends, so the tests see which
process merged what, and that merges of a namespace never overlap.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from _server import Keys, ServerProcess, fresh_namespace, make_keys, memdir, wait_for
from _server_models import GATE_ENV, TRACE_ENV
from memdir.memory import (
    MaintenanceConfig,
    MaintenanceSchedule,
    read_consolidation_log,
    read_schedule,
)
from memdir.memory._lease import Lease, LeaseInfo
from memdir.server.maintenance import fair_order, tenant_of, time_left
from memdir.workspace import Workspace
from test_memory_crash import assert_one_consolidation_at_a_time

TESTS = Path(__file__).parent
KEYS = (("acme", "acme", "write", ()), ("beta", "beta", "write", ()))
SWEEP = (
    "--model", "python:_server_models:traced",
    "--sweep-interval", "0.2",
    "--consolidation-gap", "0",
    "--sweep-lease", "3s",
    "--job-timeout", "15",
)  # fmt: skip
BOUND = 120.0


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        TRACE_ENV: str(tmp_path / "trace.jsonl"),
        **more,
    }


def _workspace(url: str, ns: str | None = None) -> Workspace:
    return Workspace(url, namespace=ns, create=False)


def _facts(ns: str, session: str, count: int = 3) -> list[str]:
    return [f"{ns} {session} fact {i}" for i in range(count)]


def _flush(server: ServerProcess, keys: Keys, ns: str, session: str) -> list[str]:
    """Flush a conversation of three facts of ``ns`` through ``server``; the facts."""
    facts = _facts(ns, session)
    messages = []
    for fact in facts:
        messages += [{"role": "user", "content": fact}, {"role": "assistant", "content": "ok"}]
    body = {"session_id": session, "format": "openai", "messages": messages}
    with server.client(keys.secrets[ns.split(".")[0]]) as client:
        answer = client.post(f"/v1/namespaces/{ns}/flush", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["bullets"] == facts
    return facts


def _memory(url: str, ns: str) -> list[str]:
    text = _workspace(url, ns).read_text("MEMORY.md")
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def _consolidated(url: str, ns: str, facts: list[str]) -> bool:
    """Every fact is in ``MEMORY.md`` and no consolidation is asked for any more."""
    ws = _workspace(url, ns)
    return set(facts) <= set(_memory(url, ns)) and (
        read_schedule(ws).consolidation_requested_at is None
    )


def _applied(url: str, ns: str) -> int:
    return sum(r.get("status") == "applied" for r in read_consolidation_log(_workspace(url, ns)))


def _trace(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "trace.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _by_namespace(trace: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The trace's merges per namespace (an entry starts with its namespace's name)."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in trace:
        found[record["entries"][0].split()[0]].append(record)
    return found


def _assert_merges_never_overlap(trace: list[dict[str, Any]]) -> None:
    for records in _by_namespace(trace).values():
        assert_one_consolidation_at_a_time(
            "\n".join(f"{r['event']} {r['pid']}" for r in records) + "\n"
        )


def _sweeper(url: str) -> LeaseInfo | None:
    return Lease(_workspace(url), "server-sweep", ttl=datetime.resolution).holder()


@pytest.fixture
def pg_workspace(pg_url: str) -> str:
    return pg_url


def test_two_replicas_consolidate_each_flush_exactly_once(
    pg_workspace: str, tmp_path: Path
) -> None:
    url = pg_workspace
    keys = make_keys(url, KEYS)
    env = _env(tmp_path)
    replicas = [ServerProcess(url, *SWEEP, env=env).start() for _ in range(2)]
    try:
        namespaces = [fresh_namespace(t) for t in ("acme", "beta") for _ in range(3)]
        flushed: dict[str, list[str]] = defaultdict(list)
        for round_ in range(2):
            for i, ns in enumerate(namespaces):  # through either replica, in turn
                flushed[ns] += _flush(replicas[(i + round_) % 2], keys, ns, f"s{round_}")
            for ns in namespaces:
                wait_for(lambda ns=ns: _consolidated(url, ns, flushed[ns]), "a consolidation",
                         bound=BOUND)  # fmt: skip
            # one consolidation applied per flush: none left out, none run twice
            assert [_applied(url, ns) for ns in namespaces] == [round_ + 1] * len(namespaces)
        holder = _sweeper(url)
        assert holder is not None
        assert holder.pid in {r.proc.pid for r in replicas if r.proc is not None}
    finally:
        codes = [r.stop() for r in replicas]
    assert codes == [0, 0], [r.log() for r in replicas]
    for ns in namespaces:
        memory = _memory(url, ns)
        assert sorted(memory) == sorted(flushed[ns])  # each fact once
    trace = _trace(tmp_path)
    starts = Counter(e for r in trace if r["event"] == "start" for e in r["entries"])
    assert set(starts) == {f for facts in flushed.values() for f in facts}
    assert set(starts.values()) == {1}  # each fact merged by one replica, once
    _assert_merges_never_overlap(trace)
    assert _sweeper(url) is None  # given up on SIGTERM, for another replica to take at once


def _uts_namespace_available() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run(
        [unshare, "--uts", "hostname", "replica-a"], capture_output=True, check=False
    )
    return done.returncode == 0


@pytest.mark.parametrize("where", ["same-host", "other-host"])
def test_killed_sweeper_is_taken_over_and_nothing_is_lost_or_doubled(
    pg_workspace: str, tmp_path: Path, where: str
) -> None:
    url = pg_workspace
    keys = make_keys(url, KEYS)
    paused = tmp_path / "paused"
    pause = {
        "MEMDIR_TEST_PAUSE_AT": "consolidate:before-replace",
        "MEMDIR_TEST_PAUSE_FILE": str(paused),
        "MEMDIR_TEST_PAUSE_SECONDS": "600",
    }
    prefix: tuple[str, ...] = ()
    if where == "other-host":
        # A host name of its own: its leases cannot be seen to be dead, only to run out.
        if not _uts_namespace_available():
            pytest.fail("unshare --uts is needed (root, as in CI)", pytrace=False)
        prefix = ("unshare", "--uts", "sh", "-c", 'hostname replica-a && exec "$@"', "sh")
    first = ServerProcess(url, *SWEEP, env=_env(tmp_path, **pause), prefix=prefix).start()
    second: ServerProcess | None = None
    try:
        assert first.proc is not None
        wait_for(_sweeper_is(url, first.proc.pid), "the first replica's sweep lease")
        second = ServerProcess(url, *SWEEP, env=_env(tmp_path)).start()
        assert second.proc is not None
        ns_a, ns_b = fresh_namespace("acme"), fresh_namespace("beta")
        facts_a = _flush(first, keys, ns_a, "s0")
        wait_for(paused.exists, "the consolidation paused before MEMORY.md is replaced",
                 bound=BOUND)  # fmt: skip
        assert int(paused.read_text()) == first.proc.pid
        lease = Lease(_workspace(url, ns_a), "consolidation", ttl=datetime.resolution).holder()
        assert lease is not None and lease.pid == first.proc.pid
        assert _memory(url, ns_a) == []  # not replaced yet
        # The sweeping replica is busy; the other serves the flushes it takes by itself.
        facts_b = _flush(second, keys, ns_b, "s0")
        wait_for(lambda: _consolidated(url, ns_b, facts_b), "the second replica's own flush",
                 bound=BOUND)  # fmt: skip

        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=60)

        holder = wait_for(_sweeper_is(url, second.proc.pid), "the second replica to sweep",
                          bound=BOUND)  # fmt: skip
        wait_for(lambda: _consolidated(url, ns_a, facts_a), "the takeover's consolidation",
                 bound=BOUND)  # fmt: skip
        assert holder.pid == second.proc.pid
    finally:
        first.stop()
        if second is not None:
            assert second.stop() == 0, second.log()
    assert sorted(_memory(url, ns_a)) == sorted(facts_a)  # nothing lost, nothing doubled
    assert sorted(_memory(url, ns_b)) == sorted(facts_b)
    assert (_applied(url, ns_a), _applied(url, ns_b)) == (1, 1)
    trace = _trace(tmp_path)
    _assert_merges_never_overlap(trace)
    merges_a = [r for r in _by_namespace(trace)[ns_a] if r["event"] == "start"]
    assert [r["pid"] for r in merges_a] == [first.proc.pid, second.proc.pid]
    if where == "other-host":  # not taken before the dead replica's lease ran out
        assert merges_a[1]["at"] >= lease.expires_at.timestamp()


def _sweeper_is(url: str, pid: int) -> Any:
    def check() -> LeaseInfo | None:
        holder = _sweeper(url)
        return holder if holder is not None and holder.pid == pid else None

    return check


def test_two_workers_over_a_directory_consolidate_each_flush_once(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    keys = make_keys(where, KEYS)
    server = ServerProcess(where, *SWEEP, "--workers", "2", env=_env(tmp_path)).start()
    try:
        namespaces = [fresh_namespace(t) for t in ("acme", "beta") for _ in range(3)]
        flushed = {ns: _flush(server, keys, ns, "s0") for ns in namespaces}
        for ns in namespaces:
            wait_for(lambda ns=ns: _consolidated(where, ns, flushed[ns]), "a consolidation",
                     bound=BOUND)  # fmt: skip
        assert [_applied(where, ns) for ns in namespaces] == [1] * len(namespaces)
        holder = _sweeper(where)
        assert holder is not None and holder.pid != server.proc.pid  # a worker sweeps
    finally:
        assert server.stop() == 0, server.log()
    for ns in namespaces:
        assert sorted(_memory(where, ns)) == sorted(flushed[ns])
    trace = _trace(tmp_path)
    assert Counter(e for r in trace if r["event"] == "start" for e in r["entries"]) == Counter(
        f for facts in flushed.values() for f in facts
    )
    _assert_merges_never_overlap(trace)


def test_sigterm_cancels_a_background_job_at_the_grace_period(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    keys = make_keys(where, KEYS)
    gate = tmp_path / "gate"
    gate.mkdir()
    env = _env(tmp_path, **{GATE_ENV: str(gate)})
    # The job timeout is far away: only the stop cancels the job.
    grace = ("--graceful-timeout", "1", "--job-timeout", "600")
    server = ServerProcess(where, *SWEEP, *grace, env=env).start()
    ns = fresh_namespace("acme")
    try:
        facts = _flush(server, keys, ns, "s0")
        wait_for(lambda: list(gate.glob("started-*")), "the background merge to start")
    finally:
        code = server.stop(signal.SIGTERM)  # the gate never opens: the job must be cancelled
    assert code == 0, server.log()
    assert "Traceback" not in server.log()
    ws = _workspace(where, ns)
    assert _memory(where, ns) == [] and _applied(where, ns) == 0  # nothing half-written
    assert read_schedule(ws).consolidation_requested_at is not None  # still asked for
    assert Lease(ws, "consolidation", ttl=datetime.resolution).holder() is None
    assert _sweeper(where) is None

    (gate / "open").touch()
    server = ServerProcess(where, *SWEEP, env=env).start()  # the next server serves it
    try:
        wait_for(lambda: _consolidated(where, ns, facts), "the consolidation", bound=BOUND)
    finally:
        assert server.stop() == 0, server.log()
    assert _applied(where, ns) == 1


def test_no_maintenance_leaves_the_requests_to_memdir_maintain(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    keys = make_keys(where, KEYS)
    server = ServerProcess(where, *SWEEP, "--no-maintenance", env=_env(tmp_path)).start()
    ns = fresh_namespace("acme")
    try:
        facts = _flush(server, keys, ns, "s0")
        assert _sweeper(where) is None  # a sweeper takes its lease before the server is ready
        assert read_schedule(_workspace(where, ns)).consolidation_requested_at is not None
    finally:
        assert server.stop() == 0, server.log()
    memdir("-w", where, "maintain", "--all-namespaces")
    assert _consolidated(where, ns, facts)


def test_a_pass_takes_the_tenants_in_turns() -> None:
    names = ["acme.a1", "acme.a2", "acme.a3", "acme.a4", "beta.b1", "gamma.g1", "gamma.g2"]
    names += ["shared", "Upper.x", ".x", "acme."]  # no tenant's: never swept
    assert fair_order(names) == [
        "acme.a1", "beta.b1", "gamma.g1", "acme.a2", "gamma.g2", "acme.a3", "acme.a4"
    ]  # fmt: skip
    # each pass another tenant goes first
    assert [fair_order(names, turn)[0] for turn in range(4)] == [
        "acme.a1", "beta.b1", "gamma.g1", "acme.a1"
    ]  # fmt: skip
    assert (tenant_of("acme.team1.x"), tenant_of("acme"), tenant_of("Acme.x")) == (
        "acme",
        None,
        None,
    )


def test_what_is_due_is_judged_as_the_scheduler_judges_it() -> None:
    config = MaintenanceConfig(interval=timedelta(hours=6),
                               consolidation_min_gap=timedelta(minutes=30))  # fmt: skip
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def left(tick: timedelta | None, consolidated: timedelta | None, requested: bool) -> Any:
        return time_left(
            MaintenanceSchedule(
                last_tick_at=now - tick if tick is not None else None,
                last_consolidation_at=now - consolidated if consolidated is not None else None,
                consolidation_requested_at=now if requested else None,
            ),
            config,
            now,
        )

    hour, minute = timedelta(hours=1), timedelta(minutes=1)
    assert left(None, None, False) == (timedelta(0), None)  # never maintained: now
    assert left(hour, None, False) == (5 * hour, None)
    assert left(7 * hour, None, False) == (-hour, None)
    assert left(hour, 10 * minute, True) == (5 * hour, 20 * minute)
    assert left(hour, None, True) == (5 * hour, timedelta(0))
    assert left(-hour, -minute, True) == (timedelta(0), timedelta(0))  # a clock ahead: now
