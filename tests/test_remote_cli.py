"""The ``memdir`` command on a workspace on a real ``memdir serve`` (``-w http://127.0.0.1:PORT``,
the key in ``$MEMDIR_API_KEY``), over both server stores: init, add, search, get, sessions,
consolidate and export work as on a directory, and search, add and consolidation run on the
server (a client model that cannot answer is never called)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from _server import Served, fresh_namespace, wait_for
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.workspace import Workspace

# A model no one answers: used on the client, a consolidation with it would fail.
DEAD_MODEL = ("--model", "openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1")


@pytest.fixture(params=["files", "postgres"])
def served(request: pytest.FixtureRequest, remote_servers: object) -> Served:
    found: Served = remote_servers.get(request.param)  # type: ignore[attr-defined]
    return found


def run(served: Served, *args: str, key: str = "acme_write") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMDIR_API_KEY": served.keys.secrets[key]}
    env.pop("MEMDIR_WORKSPACE", None)
    return subprocess.run(
        [sys.executable, "-m", "memdir", "-w", served.server.url, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=180,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def routes_of(served: Served, since: int, last: str) -> list[str]:
    """The routes the server answered since its access log had ``since`` lines, up to the
    first that ends with ``last`` (waited for: the log is read as the server writes it)."""

    def seen() -> list[str] | None:
        routes = [line["route"] for line in served.server.access_log()[since:]]
        ends = [i for i, route in enumerate(routes) if route.endswith(last)]
        return routes[: ends[0] + 1] if ends else None

    found: list[str] = wait_for(seen, f"the server to answer {last}")
    return found


def server_side(served: Served, ns: str) -> Workspace:
    """The namespace as the server stores it, opened directly (not through the server)."""
    return Workspace(served.workspace, namespace=ns, create=False)


def test_the_command_reads_and_writes_a_server_workspace(served: Served, tmp_path: Path) -> None:
    ns = fresh_namespace()
    assert ok(run(served, "-n", ns, "init")).strip() == f"{served.server.url} (namespace {ns!r})"
    cited = ok(run(served, "-n", ns, "add", "Wang Lei prefers PostgreSQL 16 for analytics"))
    path = cited.strip().split("#")[0]
    assert path.startswith("memory/") and "#L" in cited
    assert "PostgreSQL 16" in server_side(served, ns).read_text(path)  # the server wrote it

    since = len(served.server.access_log())
    found = ok(run(served, "-n", ns, "search", "postgresql analytics"))
    assert "Wang Lei prefers PostgreSQL 16" in found and path in found
    searched = routes_of(served, since, "/search")  # the server searched: no file was read
    assert not [route for route in searched if "/store/files" in route or "/dirs" in route]
    hits = json.loads(ok(run(served, "-n", ns, "search", "postgresql", "--json")))
    assert hits and hits[0]["citation"] == cited.strip()
    assert "Wang Lei prefers PostgreSQL 16" in ok(run(served, "-n", ns, "get", cited.strip()))

    log = SessionLog(
        Workspace(served.server.url, namespace=ns, api_key=served.keys.secrets["acme_write"]),
        "chat-1",
    )
    log.append([Msg.user("Where do the deploy keys live?"), Msg.assistant("In the vault, 金库.")])
    listed = ok(run(served, "-n", ns, "sessions", "list"))
    assert listed.startswith("chat-1\t") and "Where do the deploy keys live?" in listed
    (info,) = json.loads(ok(run(served, "-n", ns, "sessions", "list", "--json")))
    assert info["messages"] == 2 and info["lines"] == 2
    since = len(served.server.access_log())
    assert "sessions/chat-1.log.jsonl#L2" in ok(
        run(served, "-n", ns, "sessions", "search", "vault")
    )
    searched = routes_of(served, since, "/sessions/search")
    assert not [route for route in searched if "/store/files" in route or "/dirs" in route]
    assert "In the vault, 金库." in ok(run(served, "-n", ns, "sessions", "show", "chat-1"))

    since = len(served.server.access_log())
    result = json.loads(ok(run(served, "-n", ns, "consolidate", "--json", *DEAD_MODEL)))
    routes_of(served, since, "/consolidate")
    assert result["applied"] and "Wang Lei prefers PostgreSQL 16" in " ".join(result["added"])
    assert "PostgreSQL 16" in server_side(served, ns).read_text("MEMORY.md")

    archive = tmp_path / "out.tar.gz"
    report = json.loads(ok(run(served, "-n", ns, "export", "--to", str(archive), "--json")))
    with tarfile.open(archive) as tar:
        names = {member.name for member in tar.getmembers() if member.isfile()}
    assert {"MEMORY.md", path, "sessions/chat-1.log.jsonl"} <= names
    assert not [n for n in names if n.startswith((".index", ".memdir-server"))]
    assert report["files"] == len(names)


def test_mistakes_are_one_clear_line(served: Served) -> None:
    unbound = run(served, "search", "x")
    assert unbound.returncode == 2, unbound.stderr  # a usage error: -n is missing
    assert "give -n acme.<name>" in unbound.stderr and "Traceback" not in unbound.stderr
    ok(run(served, "init", key="alice_only"))  # the key's own namespace, acme.alice
    bound = run(served, "search", "nothing here", key="alice_only")
    assert bound.returncode == 0, bound.stderr
    other = run(served, "-n", "beta.x", "search", "x")
    assert other.returncode == 2 and "out of this key's reach" in other.stderr
    missing = run(served, "-n", fresh_namespace(), "search", "x")
    assert missing.returncode == 1 and "init' creates it" in missing.stderr
    ns = fresh_namespace()
    ok(run(served, "-n", ns, "init"))
    index = run(served, "-n", ns, "index")
    assert index.returncode == 1 and "is the server's" in index.stderr
    keys = run(served, "keys", "list")
    assert keys.returncode == 2 and "not a memdir server's URL" in keys.stderr
    reader = run(served, "-n", ns, "add", "a read key adds nothing", key="acme_read")
    assert reader.returncode == 1 and "scope" in reader.stderr
    for done in (unbound, other, missing, index, reader):
        assert served.keys.secrets["acme_write"] not in done.stderr
