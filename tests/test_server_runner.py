"""``memdir serve`` as a process: where it listens, worker processes, a clean stop on SIGTERM,
and one line (no traceback) for what keeps it from starting."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from _server import ServerProcess, create_key, memdir, wait_for


def test_workers_share_the_socket_and_stop_cleanly_on_sigterm(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    key = create_key(where, "acme", "write")["key"]
    server = ServerProcess(where, "--workers", "2").start()
    try:
        assert server.proc is not None
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text()
        workers = [
            pid
            for pid in children.split()
            if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
        ]
        assert len(workers) >= 2, workers
        with server.client(key) as client:
            for i in range(8):  # a new connection each time: either worker may answer
                response = httpx.post(
                    f"{server.url}/v1/namespaces/acme.w/memories",
                    json={"text": f"fact {i}"},
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=60,
                )
                assert response.status_code == 201, response.text
            hits = client.get("/v1/namespaces/acme.w/search", params={"q": "fact", "limit": 20})
            assert len(hits.json()["hits"]) == 8
    finally:
        code = server.stop(signal.SIGTERM)
    assert code == 0, server.log()
    assert "Traceback" not in server.log()


def test_one_worker_stops_cleanly_on_sigterm_and_sigint(tmp_path: Path) -> None:
    for sig, code in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):  # 130: the CLI's "interrupted"
        server = ServerProcess(str(tmp_path / "ws")).start()
        assert server.stop(sig) == code, server.log()
        assert "Traceback" not in server.log()


def _refused(*args: str) -> str:
    done = memdir("serve", "--port", "0", *args, check=False, timeout=120)
    assert done.returncode != 0 and done.stdout == ""
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_what_keeps_the_server_from_starting_is_one_line(tmp_path: Path) -> None:
    where = tmp_path / "ws"
    create_key(str(where), "acme", "read")
    os.chmod(where / ".memdir-server" / "keys.json", 0o644)
    assert "chmod 600" in _refused("-w", str(where))

    unreachable = _refused("-w", "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=3")
    assert "cannot connect to PostgreSQL" in unreachable and unreachable.count("\n") == 1

    server = ServerProcess(str(tmp_path / "other")).start()
    try:
        port = httpx.URL(server.url).port
        busy = memdir("serve", "-w", str(tmp_path / "third"), "--port", str(port), check=False)
        assert busy.returncode == 1 and "cannot listen on 127.0.0.1" in busy.stderr
    finally:
        server.stop()

    namespaced = memdir("-n", "acme.x", "serve", "-w", str(where), check=False)
    assert namespaced.returncode == 2 and "leave out --namespace" in namespaced.stderr

    os.chmod(where / ".memdir-server" / "keys.json", 0o600)
    unknown = _refused("-w", str(where), "--model", "python:no_such_module:model")
    assert "--model 'python:no_such_module:model': cannot load it" in unknown
    assert unknown.count("\n") == 1
    short = tmp_path / "token"
    short.write_text("guessable\n")
    os.chmod(where / ".memdir-server" / "keys.json", 0o600)
    weak = _refused("-w", str(where), "--metrics-token-file", str(short))
    assert "must be 16 or more printable characters" in weak and weak.count("\n") == 1


@pytest.mark.parametrize("host", ["::1", "localhost"])
def test_the_ready_line_names_a_url_that_answers(tmp_path: Path, host: str) -> None:
    server = ServerProcess(str(tmp_path / "ws"), "--host", host).start()
    try:
        assert server.url.startswith("http://[::1]:" if host == "::1" else "http://localhost:")
        assert httpx.get(f"{server.url}/healthz", timeout=30).json() == {"status": "ok"}
    finally:
        server.stop()


def test_a_damaged_key_file_is_a_503_that_tells_the_caller_nothing(tmp_path: Path) -> None:
    where = tmp_path / "ws"
    server = ServerProcess(str(where)).start()
    try:
        key = create_key(str(where), "acme", "read")["key"]  # not cached by the server yet
        path = where / ".memdir-server" / "keys.json"
        good = path.read_bytes()
        path.write_bytes(b"{not json")
        with server.client(key) as client:
            response = client.get("/v1/whoami")
            assert response.status_code == 503, response.text
            assert response.json()["code"] == "keys-unavailable"
            assert "keys.json" not in response.text and response.headers["retry-after"] == "5"
            ready = wait_for(
                lambda: (r := client.get("/readyz")).status_code == 503 and r, "readyz to say 503"
            )
            assert "keys.json" not in ready.text
            path.write_bytes(good)
            assert wait_for(lambda: client.get("/v1/whoami").status_code == 200, "the key to work")
        assert "not a key file" in server.log()  # the operator is told why
    finally:
        server.stop()
