"""The two sides of ``benchmarks/server.py``: closed-loop clients of a ``memdir serve`` process
over HTTP, and the same calls made in worker processes of the benchmark's own.

Both sides make ``count`` calls with ``clients`` callers at once, each caller starting its next
call as soon as its last one is answered; call ``i`` searches ``queries[i % len(queries)]``
or adds ``texts[i % len(texts)]``, so both sides make the same calls. Each reports a
:class:`Cell`: every call's wall time, the wall time of the whole cell, and the CPU seconds
the serving processes used meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

__all__ = ["Cell", "InProcess", "Served", "http_cell"]

NS = "acme.bench"
READY_LINE = re.compile(r"memdir serve: listening on (http://\S+)")
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class Cell:
    """One measured run of one side.

    Attributes:
        latencies: seconds per call.
        wall: seconds from the first call's start to the last one's end.
        cpu: CPU seconds the serving processes used during the cell.
        sys_cpu: the part of ``cpu`` spent in the kernel (system calls, waking threads).
        client_cpu: CPU seconds of the calling process (HTTP: the benchmark's client).
    """

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0
    sys_cpu: float = 0.0
    client_cpu: float = 0.0


def process_cpu(pids: list[int]) -> tuple[float, float]:
    """CPU seconds of ``pids`` so far, and the system part of them (from ``/proc``)."""
    user = system = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, system = user + int(fields[11]), system + int(fields[12])
    return (user + system) / _TICKS, system / _TICKS


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(p) for p in text)
    return found


class Served:
    """``memdir serve`` over ``workspace`` in a process of its own (its access log and
    warnings go to ``log``, a file, as a service manager would keep them).

    Args:
        workspace: a directory or a ``postgresql://`` URL.
        args: more options of ``memdir serve``.
        log: where its stderr goes.
        profile: run it under ``_server_profile.py``, which writes where its CPU went here.
    """

    def __init__(
        self, workspace: str, args: list[str], log: Path, *, profile: Path | None = None
    ) -> None:
        self.log = log.open("w", encoding="utf-8")
        self.profiled = profile is not None
        command = [sys.executable, "-m", "memdir"]
        if profile is not None:  # sampled: where its CPU goes, written to `profile` at exit
            command = [sys.executable, str(Path(__file__).with_name("_server_profile.py")),
                       str(profile)]  # fmt: skip
        self.proc = subprocess.Popen(
            [*command, "serve", "-w", workspace, "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            encoding="utf-8",
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 120
        self.url = ""
        while not self.url and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"memdir serve exited: see {log}")
            found = READY_LINE.search(line)
            if found:
                self.url = found[1]
        if not self.url:
            self.stop()
            raise SystemExit(f"memdir serve did not start: see {log}")
        self.pids = [self.proc.pid, *_children(self.proc.pid)]

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of the server's processes so far, and their system part."""
        return process_cpu(self.pids)

    def stop(self) -> None:
        """A graceful stop (SIGTERM), then a kill if it does not come."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()


class HttpConnection:
    """One keep-alive HTTP/1.1 connection: requests written as bytes, answers read by their
    ``Content-Length`` (or chunks). Far cheaper than a general client, so the client's own
    CPU weighs little on the server's (both share the machine)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, url: str) -> HttpConnection:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    async def call(self, request: bytes) -> tuple[int, bytes]:
        """Send ``request``; the answer's status and body."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = None
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if length is not None:
            return status, await self.reader.readexactly(length)
        if not chunked:
            raise SystemExit(f"an answer with neither Content-Length nor chunks: {head!r}")
        body = b""
        while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
            body += await self.reader.readexactly(size + 2)
        await self.reader.readuntil(b"\r\n")
        return status, body

    def close(self) -> None:
        self.writer.close()


def encode(url: str, key: str, op: str, item: str) -> bytes:
    """The bytes of the HTTP request making call ``op`` with ``item``."""
    host = url.removeprefix("http://")
    if op == "search":
        query = urlencode({"q": item, "limit": 10})
        start = f"GET /v1/namespaces/{NS}/search?{query} HTTP/1.1"
        body = b""
    elif op == "add":
        start = f"POST /v1/namespaces/{NS}/memories HTTP/1.1"
        body = json.dumps({"text": item}).encode()
    else:
        start, body = f"GET {op} HTTP/1.1", b""
    head = [start, f"Host: {host}", f"Authorization: Bearer {key}", "Accept: application/json"]
    if body:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _http_cell(
    server: Served, key: str, op: str, items: list[str], clients: int, count: int
) -> Cell:
    requests = [encode(server.url, key, op, item) for item in items[:count]]
    conns = [await HttpConnection.open(server.url) for _ in range(clients)]
    try:
        first = [encode(server.url, key, "search" if op == "search" else "/readyz", item)
                 for item in items[:clients]]  # fmt: skip
        for status, body in await asyncio.gather(
            *(c.call(r) for c, r in zip(conns, first, strict=True))
        ):
            if status >= 300:  # the connections are open and every worker has answered
                raise SystemExit(f"server warm-up: {status} {body[:300]!r}")
        cell = Cell()
        counter = itertools.count()

        async def caller(conn: HttpConnection) -> None:
            while (i := next(counter)) < count:
                started = time.perf_counter()
                status, body = await conn.call(requests[i % len(requests)])
                cell.latencies.append(time.perf_counter() - started)
                if status >= 300:
                    raise SystemExit(f"server {op}: {status} {body[:300]!r}")

        if server.profiled:  # charge from now on
            server.proc.send_signal(signal.SIGUSR1)
        (cpu, sys_cpu), client_cpu = server.cpu(), time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(caller(conn) for conn in conns))
        cell.wall = time.perf_counter() - started
        now, sys_now = server.cpu()
        cell.cpu, cell.sys_cpu = now - cpu, sys_now - sys_cpu
        cell.client_cpu = time.process_time() - client_cpu
        if server.profiled:
            server.proc.send_signal(signal.SIGUSR2)
    finally:
        for conn in conns:
            conn.close()
    return cell


def http_cell(
    server: Served, key: str, op: str, items: list[str], clients: int, count: int
) -> Cell:
    """``count`` calls of ``op`` (``search`` or ``add``) through the server, ``clients`` at once."""
    return asyncio.run(_http_cell(server, key, op, items, clients, count))


# -- in process -------------------------------------------------------------------------------


def _worker(conn: Connection, workspace: str) -> None:
    """A worker process: the tools over the namespace, called from threads on request."""
    from memdir.tools import memory_add, memory_search
    from memdir.workspace import Workspace

    ws = Workspace(workspace, create=False).namespaced(NS, create=False)

    def call(op: str, item: str) -> None:
        if op == "search":
            out = memory_search(item, 10, workspace=ws)
        else:
            out = memory_add(item, workspace=ws)
        if out.startswith("Error"):
            raise SystemExit(f"in process {op}: {out}")

    while True:
        message = conn.recv()
        if message is None:
            return
        op, items, threads, start, count, step = message
        mine = [items[(start + n * step) % len(items)] for n in range(count)]
        if op == "search":  # warm, as the HTTP side's first calls open its connections
            for item in mine[:threads]:
                call(op, item)
        conn.send("ready")
        conn.recv()  # go
        conn.send(_threads(functools.partial(call, op), mine, threads))


def _threads(
    call: Callable[[str], None], items: list[str], threads: int
) -> tuple[list[float], float, float, float, str | None]:
    """``call`` on each of ``items``, ``threads`` at once: the latencies, the wall time, the
    process's CPU and system CPU seconds meanwhile, and the first failure (``None``)."""
    latencies: list[float] = []
    counter = itertools.count()
    failed: list[BaseException] = []

    def caller() -> None:
        try:
            while (n := next(counter)) < len(items):
                began = time.perf_counter()
                call(items[n])
                latencies.append(time.perf_counter() - began)
        except BaseException as exc:
            failed.append(exc)

    before = os.times()
    began = time.perf_counter()
    pool = [threading.Thread(target=caller) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - began
    after = os.times()
    cpu = after.user + after.system - before.user - before.system
    return latencies, wall, cpu, after.system - before.system, repr(failed[0]) if failed else None


class InProcess:
    """``workers`` processes calling ``memory_search`` and ``memory_add`` (:mod:`memdir.tools`)
    on the namespace from threads: the library as an application embedding it would call it,
    with as many processes as the server has workers.

    Args:
        workspace: a directory or a ``postgresql://`` URL.
        workers: processes.
    """

    def __init__(self, workspace: str, workers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for _ in range(workers):
            parent, child = context.Pipe()
            proc = context.Process(target=_worker, args=(child, workspace), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def cell(self, op: str, items: list[str], clients: int, count: int) -> Cell:
        """``count`` calls of ``op``, ``clients`` threads at once spread over the processes
        (call ``i`` on process ``i % workers``)."""
        workers = len(self.conns)
        busy = []
        for w, conn in enumerate(self.conns):
            threads = clients // workers + (w < clients % workers)
            calls = count // workers + (w < count % workers)
            if threads and calls:
                conn.send((op, items, threads, w, calls, workers))
                busy.append(conn)
        for conn in busy:
            if conn.recv() != "ready":
                raise SystemExit("an in-process worker did not start")
        for conn in busy:
            conn.send("go")
        cell = Cell()
        for conn in busy:
            latencies, wall, cpu, sys_cpu, failed = conn.recv()
            if failed:
                raise SystemExit(f"in process {op}: {failed}")
            cell.latencies.extend(latencies)
            cell.wall = max(cell.wall, wall)
            cell.cpu += cpu
            cell.sys_cpu += sys_cpu
        return cell

    def stop(self) -> None:
        """Stop the worker processes."""
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(timeout=60)
