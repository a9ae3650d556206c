"""The HTTP examples in other languages run against a real server: Node.js (fetch) and Java 17.

Each runs where its runtime is installed (``node``, ``javac`` and ``java`` on the PATH), and is
skipped, saying which, where it is not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from _server import Served, fresh_namespace, serve_store
from memdir.workspace import Workspace

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "server"


@pytest.fixture(scope="module", params=["files"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    yield from serve_store(request, tmp_path_factory)


def _env(served: Served) -> dict[str, str]:
    return {
        **os.environ,
        "MEMDIR_URL": served.server.url,
        "MEMDIR_API_KEY": served.keys.secrets["acme_write"],
    }


def _ledger(served: Served, ns: str) -> str:
    ws = Workspace(served.workspace, namespace=ns, create=False)
    return "".join(ws.read_text(rel) for _, rel in ws.ledgers())


def test_the_node_example_adds_and_finds(served: Served) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    ns = fresh_namespace()
    done = subprocess.run(
        ["node", str(EXAMPLES / "memdir.mjs"), ns],
        env=_env(served),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "added 2 facts at memory/" in done.stdout
    assert "PostgreSQL 16" in done.stdout and "订单服务迁移到 Kafka" in done.stdout
    assert "我们决定把订单服务迁移到 Kafka" in _ledger(served, ns)


def test_the_java_example_adds_and_finds(served: Served, tmp_path: Path) -> None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac and java are not installed")
    compiled = subprocess.run(
        ["javac", "-d", str(tmp_path), str(EXAMPLES / "MemdirExample.java")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    ns = fresh_namespace()
    done = subprocess.run(
        ["java", "-cp", str(tmp_path), "MemdirExample", ns],
        env=_env(served),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"citation":"memory/' in done.stdout.replace(" ", "")
    assert "数据库迁移已完成" in done.stdout  # found again by the search
    assert "compaction keeps the last 20 messages" in _ledger(served, ns)


def test_a_wrong_key_is_one_clear_line(served: Served) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    done = subprocess.run(
        ["node", str(EXAMPLES / "memdir.mjs"), fresh_namespace()],
        env={**_env(served), "MEMDIR_API_KEY": "mdk_aaaaaaaaaaaaaaaa_" + "x" * 43},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "POST /memories: 401" in done.stderr
