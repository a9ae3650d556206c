"""``memdir.client`` against a real ``memdir serve`` process on each store, through the sync
client and the async one: every call, the library's types back, and the memory tools' text
equal to what :mod:`memdir.tools` returns in-process on the same store."""

from __future__ import annotations

import asyncio
import dataclasses
import tarfile
from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pytest

from _client import KINDS, client_of, open_client
from _server import Served, fresh_namespace, memdir, serve_store
from memdir import errors
from memdir.client import (
    AsyncMemdirClient,
    Compacted,
    ConnectionFailed,
    Ledger,
    MaintenanceStatus,
    SessionSummary,
    VersionConflict,
    WhoAmI,
)
from memdir.client import _ops as client_ops
from memdir.compaction.compactor import CompactionPlan
from memdir.index import MemoryIndex
from memdir.memory.consolidate import ConsolidationResult
from memdir.memory.flush import FlushResult
from memdir.memory.maintenance import MaintenanceReport
from memdir.messages import Msg
from memdir.sessions import LogSpan, SessionLog, list_session_infos, shared_session_index
from memdir.store.ledger import append_block
from memdir.store.transfer import TransferReport
from memdir.tools import (
    memory_add,
    memory_get,
    memory_search,
    session_history,
    session_list,
    session_search,
)
from memdir.tools._core import read_memory
from memdir.tools._sessions import find_in_sessions
from memdir.workspace import Workspace

FACTS = [
    "Wang Lei prefers PostgreSQL 16 for the billing service",
    "The staging cluster moved to Frankfurt on 2026-03-02",
    "数据库迁移在周五晚上进行，负责人是王磊",
    "Deploys need two approvals since the March incident",
]
TOKEN = "sk-ant-api03-" + "b" * 40


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    yield from serve_store(request, tmp_path_factory)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def acme(served: Served, kind: str) -> Iterator[Any]:
    with client_of(served, kind, "acme_write") as client:
        yield client


@pytest.fixture
def ns() -> str:
    return fresh_namespace()


def _ws(served: Served, ns: str) -> Workspace:
    """The namespace opened in this process, on the server's store."""
    return Workspace(served.workspace, namespace=ns, create=False)


def _sessions(alice: Any) -> None:
    """Three sessions (one holding a secret) logged through the client."""
    for i, sid in enumerate(("alpha", "beta", "gamma")):
        alice.append_messages(
            sid,
            [
                Msg.user(f"rotate the {sid} database password, the old one was {TOKEN}"),
                Msg.assistant(f"done, {i} replicas restarted in Frankfurt"),
            ],
        )


# -- meta ---------------------------------------------------------------------------------


def test_whoami_says_what_the_key_is(served: Served, kind: str) -> None:
    with client_of(served, kind, "team1") as client:
        assert client.whoami() == WhoAmI(
            tenant="acme",
            key_id=served.keys.ids["team1"],
            scope="write",
            namespace_prefix="acme.team1.",
            namespace=None,
            expires_at=None,
        )


def test_namespaces_walks_every_page(
    served: Served, acme: Any, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = sorted(fresh_namespace() for _ in range(5))
    for name in made:
        acme.namespace(name).add("a fact")
    with client_of(served, kind, "beta_write") as beta:
        beta.namespace(fresh_namespace("beta")).add("beta's fact")
    monkeypatch.setattr(client_ops, "PAGE", 2)  # five namespaces: three pages at least
    names = acme.namespaces()
    assert set(made) <= set(names) and names == sorted(names)
    assert all(name.startswith("acme.") for name in names)


# -- memory -------------------------------------------------------------------------------


def test_add_search_and_excerpt_return_what_the_library_finds(
    served: Served, acme: Any, ns: str
) -> None:
    alice = acme.namespace(ns)
    added = alice.add(f"Rotate {TOKEN} monthly\n\n" + "\n".join(FACTS))
    assert added.bullets == 5 and added.masked == 1 and added.index_error is None
    ws = _ws(served, ns)
    assert TOKEN not in ws.read_text(added.path)
    index = MemoryIndex(ws)
    try:
        index.refresh()
        for query in ("PostgreSQL billing", "数据库迁移", "staging Frankfurt", "nothing-here"):
            assert alice.search(query, limit=5) == index.search(query, limit=5)
    finally:
        index.close()
    cited = alice.excerpt(f"{added.path}#L{added.first_line + 1}-L{added.first_line + 2}")
    assert cited == read_memory(ws, added.path, added.first_line + 1, 2)
    assert cited.lines == (f"- {FACTS[0]}", f"- {FACTS[1]}")
    whole = alice.excerpt(added.path, start_line=1, num_lines=200)
    assert whole == read_memory(ws, added.path, 1, 200)


def test_ledgers_memory_md_and_consolidations(served: Served, acme: Any, ns: str) -> None:
    alice = acme.namespace(ns)
    alice.add("\n".join(FACTS))
    ws = _ws(served, ns)
    for day in (date(2026, 1, 2), date(2026, 1, 3)):
        append_block(ws, [f"fact of {day}"], header="Memory Add", day=day)
    ws.write_text("memory/archive/2025-12-31.md", "- archived fact\n")
    listed = alice.ledgers()
    assert [ledger.date for ledger in listed[:2]] == [date(2026, 1, 2), date(2026, 1, 3)]
    assert all(isinstance(ledger, Ledger) and not ledger.archived for ledger in listed)
    assert [(ledger.path, ledger.size) for ledger in listed] == [
        (ledger.path, ws.stat(ledger.path).size)  # type: ignore[union-attr]
        for ledger in listed
    ]
    assert alice.ledgers(archived=True) == [
        Ledger(date=date(2025, 12, 31), path="memory/archive/2025-12-31.md", size=16, archived=True)
    ]
    assert alice.ledger(date(2026, 1, 3)) == ws.read_text("memory/2026-01-03.md")
    assert alice.ledger("2025-12-31") == "- archived fact\n"

    text, version = alice.read_memory_md()
    found = ws.read_versioned("MEMORY.md")
    assert found is not None and (text, version) == (found.data.decode(), found.version)

    assert alice.consolidations() == []
    memdir("-w", served.workspace, "-n", ns, "consolidate")
    records = alice.consolidations(limit=5)
    assert len(records) == 1 and records[0]["status"] == "applied"


# -- sessions -----------------------------------------------------------------------------


def test_sessions_are_logged_listed_read_and_searched(served: Served, acme: Any, ns: str) -> None:
    alice = acme.namespace(ns)
    msgs = [Msg.user(f"deploy billing with ansible, token {TOKEN}"), Msg.assistant("deployed")]
    assert alice.append_messages("s1", msgs) == LogSpan(
        path="sessions/s1.log.jsonl", start_line=1, end_line=2
    )
    assert alice.append_messages("s1", msgs) is None  # logged already: nothing written
    openai = [{"role": "user", "content": "what about Frankfurt?"}]
    assert alice.append_messages("s1", openai, format="openai").start_line == 3
    turn = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    assert alice.append_messages("s2", [turn], format="anthropic", system="be brief").end_line == 2

    ws = _ws(served, ns)
    records = SessionLog(ws, "s1").read().records
    assert alice.session_messages("s1") == records
    assert TOKEN not in records[0].msg.text
    listed = alice.sessions()
    assert [(s.session_id, s.messages) for s in listed] == [("s2", 2), ("s1", 3)]
    index = shared_session_index(ws)
    with index.lock:
        index.refresh()
        infos = list_session_infos(index)
    assert listed == [
        SessionSummary(
            session_id=i.session_id,
            path=i.path,
            first_at=i.first_at,
            last_at=i.last_at,
            messages=i.messages,
            summary=i.summary,
            lines=i.lines,
        )
        for i in infos
    ]
    assert alice.search_sessions("Frankfurt", limit=5) == find_in_sessions(ws, "Frankfurt", 5)
    assert {h.session_id for h in alice.search_sessions("hello", session_id="s2")} == {"s2"}


# -- the tools' text ----------------------------------------------------------------------


def test_the_tool_texts_equal_the_tools_on_the_same_store(
    served: Served, acme: Any, ns: str
) -> None:
    alice = acme.namespace(ns)
    added = alice.add("\n".join(FACTS))
    _sessions(alice)
    ws = _ws(served, ns)
    cases: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("memory_search", ("PostgreSQL billing",), {}),
        ("memory_search", ("数据库迁移", 2), {}),
        ("memory_search", ("nothing-here-at-all",), {}),
        ("memory_search", ("database password",), {"sources": ("memory", "sessions")}),
        ("memory_search", ("Frankfurt",), {"sources": ["sessions"]}),
        ("memory_search", ("x",), {"sources": ("files",)}),
        ("memory_search", ("   ",), {}),
        ("memory_search", ("x", 0), {}),
        ("memory_get", (f"{added.path}#L{added.first_line}-L{added.last_line}",), {}),
        ("memory_get", (added.path,), {"start_line": 2, "num_lines": 2}),
        ("memory_get", (f"`{added.path}:4-5`",), {}),
        ("memory_get", ("MEMORY.md",), {}),
        ("memory_get", (added.path, 999), {}),
        ("memory_get", ("../../etc/passwd",), {}),
        ("memory_get", ("AGENTS.md",), {}),
        ("memory_get", (added.path, "two"), {}),
        ("session_search", ("database password",), {}),
        ("session_search", ("password",), {"session_id": "beta"}),
        ("session_search", ("password",), {"session_id": "../x"}),
        ("session_search", ("nothing-here-at-all",), {}),
        ("session_list", (), {}),
        ("session_history", ("gamma",), {}),
        ("session_history", ("beta",), {"last_n": 1}),
        ("session_history", ("alpha",), {"start": 2}),
        ("session_history", ("sessions/beta.log.jsonl#L1-L2",), {}),
        ("session_history", ("alpha",), {"start": 99}),
        ("session_history", ("nobody",), {}),
    ]
    tools = {
        "memory_search": memory_search,
        "memory_get": memory_get,
        "session_search": session_search,
        "session_list": session_list,
        "session_history": session_history,
    }
    for name, args, kwargs in cases:
        remote = getattr(alice, name)(*args, **kwargs)
        local = tools[name](*args, **kwargs, workspace=ws)
        assert remote == local, (name, args, kwargs)
    assert TOKEN not in alice.session_history("alpha")


def test_memory_add_says_what_the_tool_says(served: Served, acme: Any) -> None:
    here, there = fresh_namespace(), fresh_namespace()
    for name in (here, there):
        acme.namespace(name).add("a first fact")
    alice = acme.namespace(here)
    for text in ("Wang Lei owns billing", f"the key is {TOKEN}\nsecond line", "   ", "x" * 8001):
        assert alice.memory_add(text) == memory_add(text, workspace=_ws(served, there)), text


def test_a_namespace_out_of_reach_is_an_error_text_not_an_exception(
    served: Served, acme: Any
) -> None:
    beta = acme.namespace(fresh_namespace("beta"))
    for text in (beta.memory_search("x"), beta.memory_add("x"), beta.session_list()):
        assert text.startswith("Error: no namespace 'beta.") and "\n" not in text


# -- jobs, MEMORY.md and transfers ---------------------------------------------------------


def _served(call: Any, *args: Any, **kwargs: Any) -> Any:
    return call(*args, **kwargs)


def test_memory_md_is_replaced_by_compare_and_swap(served: Served, acme: Any, ns: str) -> None:
    alice = acme.namespace(ns)
    alice.add("a fact")
    text, version = alice.read_memory_md()
    new = text + "\n- Wang Lei owns billing\n"
    written = _served(alice.replace_memory_md, new, version)
    assert written.changed and written.version and written.version != version
    assert alice.read_memory_md() == (new, written.version)
    assert alice.replace_memory_md(new, written.version).changed is False  # same text: no 412
    with pytest.raises(VersionConflict) as stale:
        alice.replace_memory_md(text + "\n- lost update\n", version)
    assert isinstance(stale.value, errors.VersionConflict) and stale.value.status == 412
    with pytest.raises(VersionConflict):
        alice.replace_memory_md("# Memory\n", None)  # it exists: not created again
    assert alice.read_memory_md().text == new


def test_flush_compact_and_consolidate_run_on_the_server(
    served: Served, acme: Any, ns: str
) -> None:
    alice = acme.namespace(ns)
    alice.add("a first fact")
    talk = [
        Msg.user("Remember that the billing service runs on PostgreSQL 16 in Frankfurt."),
        Msg.assistant("Noted: billing runs on PostgreSQL 16 in Frankfurt."),
    ]
    flushed = _served(alice.flush, "chat-1", talk)
    assert isinstance(flushed, FlushResult) and flushed.messages_flushed == 2
    again = alice.flush("chat-1", talk)
    assert again.bullets == () and again.messages_flushed == 0  # the cursor moved past them

    filler = "the replica lag stayed under a second while the nightly backup ran " * 3
    long_talk = [Msg.user(f"step {i}: check replica {i}; {filler}") for i in range(12)]
    plan = _served(alice.compact, "chat-2", long_talk, force=True, dry_run=True)
    assert isinstance(plan, CompactionPlan) and plan.messages == 12
    done = alice.compact("chat-2", long_talk, force=True, keep_messages=2)
    assert isinstance(done, Compacted) and done.compacted and done.before.messages == 12
    assert done.messages[-1].text == long_talk[-1].text and done.log is not None

    result = _served(alice.consolidate)
    assert isinstance(result, ConsolidationResult)
    assert len(alice.consolidations()) >= 1


def test_maintenance_status_and_runs(served: Served, kind: str, ns: str) -> None:
    with client_of(served, kind, "acme_admin") as admin:
        alice = admin.namespace(ns)
        alice.add("a fact")
        status = _served(alice.maintenance)
        assert isinstance(status, MaintenanceStatus)
        report = _served(alice.run_maintenance, dry_run=True)
        assert isinstance(report, MaintenanceReport) and report.dry_run


def test_export_then_import_moves_a_namespace(
    served: Served, kind: str, ns: str, tmp_path: Path
) -> None:
    archive = tmp_path / "alice.tar.gz"
    with client_of(served, kind, "acme_admin") as admin:
        alice = admin.namespace(ns)
        alice.add("\n".join(FACTS))
        size = _served(alice.export, archive)
        assert size == archive.stat().st_size > 0
        with tarfile.open(archive) as tar:
            assert any(name.endswith("MEMORY.md") for name in tar.getnames())
        copy = admin.namespace(fresh_namespace())
        report = _served(copy.import_, archive)
        assert isinstance(report, TransferReport) and report.files > 0
        assert copy.search("PostgreSQL billing") == alice.search("PostgreSQL billing")
        again = copy.import_(archive)
        assert again.files == 0 and again.unchanged == report.files + report.unchanged


def test_results_of_the_coming_routes_are_read_as_the_library_types() -> None:
    """What the job routes answer (the library's results as JSON) reads back equal."""
    from memdir.client._decode import decode
    from memdir.index import IndexStats

    consolidation = ConsolidationResult(added=("a",), changed=(("b", "c"),), entries=3, text="t")
    samples: list[Any] = [
        FlushResult(bullets=("x", "y"), path="memory/2026-01-02.md", start_line=3, end_line=4),
        consolidation,
        MaintenanceReport(
            archived=("memory/2025-01-01.md",),
            consolidation=consolidation,
            index=IndexStats(
                files_indexed=1, files_unchanged=2, files_removed=0, lines_indexed=5, seconds=0.25
            ),
            errors=("vectors: ModelError: down",),
            dry_run=True,
        ),
        TransferReport(files=2, unchanged=1, conflicts=["MEMORY.md"], bytes=99),
        CompactionPlan(reason="forced", messages=12, tokens=300, cut_index=9, summarized=9, kept=4),
    ]
    for sample in samples:
        as_json = _json_round_trip(dataclasses.asdict(sample))
        assert decode(type(sample), as_json) == sample


def _json_round_trip(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value))


def test_an_archive_goes_up_and_comes_down_whole(kind: str, tmp_path: Path) -> None:
    """Export streams the answer to its file (atomically, nothing left on a failure); import
    streams the file as the body, with its length."""
    archive = bytes(range(256)) * (3 * 4096 + 7)  # over 3 MiB: several chunks
    source = tmp_path / "in.tar.gz"
    source.write_bytes(archive)
    received: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        received.append(request)
        if request.url.path.endswith("/import"):
            report = {"files": 3, "unchanged": 0, "conflicts": [], "bytes": len(request.content)}
            return httpx.Response(200, json=report)
        return httpx.Response(200, content=archive, headers={"Content-Type": "application/gzip"})

    transport = httpx.MockTransport(handle)
    with open_client(kind, "http://127.0.0.1:9", "mdk_x", transport=transport) as client:
        alice = client.namespace("acme.alice")
        report = alice.import_(source, replace=True)
        target = tmp_path / "out.tar.gz"
        assert alice.export(target) == len(archive) and target.read_bytes() == archive
    upload = received[0]
    assert upload.content == archive and upload.headers["content-length"] == str(len(archive))
    assert upload.headers["content-type"] == "application/gzip"
    assert upload.url.params["replace"] == "true" and upload.headers["idempotency-key"]
    assert report == TransferReport(files=3, bytes=len(archive))

    def broken(request: httpx.Request) -> httpx.Response:
        def cut() -> Iterator[bytes]:
            yield archive[: 1 << 20]
            raise httpx.ReadError("connection reset by peer", request=request)

        async def acut() -> AsyncIterator[bytes]:
            for chunk in cut():
                yield chunk

        return httpx.Response(200, content=cut() if kind == "sync" else acut())

    failing = httpx.MockTransport(broken)
    with open_client(kind, "http://127.0.0.1:9", "mdk_x", transport=failing, retries=0) as client:
        alice = client.namespace("acme.alice")
        with pytest.raises(ConnectionFailed, match="ReadError: connection reset by peer"):
            alice.export(tmp_path / "cut.tar.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.tar.gz", "out.tar.gz"]


async def test_one_async_client_serves_concurrent_calls(served: Served) -> None:
    """Sixteen adds and sixteen searches at once through one AsyncMemdirClient: each add lands
    once, with its own Idempotency-Key, and every search answers."""
    ns = fresh_namespace()
    keys: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            keys.append(request.headers["idempotency-key"])

    key = served.keys.secrets["acme_write"]
    async with AsyncMemdirClient(served.server.url, key) as client:
        client._http.event_hooks["request"].append(record)
        alice = client.namespace(ns)
        await alice.add("the first fact")
        facts = [f"fact number {i} about replica r{i}" for i in range(16)]
        added = await asyncio.gather(*(alice.add(fact) for fact in facts))
        found = await asyncio.gather(*(alice.search(f"replica r{i}") for i in range(16)))
    assert len({a.citation for a in added}) == 16 and len(set(keys)) == 17
    assert all(hits for hits in found)
    ws = _ws(served, ns)
    text = "".join(ws.read_text(rel) for _, rel in ws.ledgers())
    assert all(text.count(f"- {fact}\n") == 1 for fact in facts)


def test_an_archive_gone_before_a_retry_is_one_clear_error(kind: str, tmp_path: Path) -> None:
    source = tmp_path / "in.tar.gz"
    source.write_bytes(b"\x1f\x8b not really an archive")

    def handle(request: httpx.Request) -> httpx.Response:
        source.unlink()  # gone after the first attempt, before its retry
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    transport = httpx.MockTransport(handle)
    with (
        open_client(kind, "http://127.0.0.1:9", "mdk_x", transport=transport, backoff=0) as c,
        pytest.raises(errors.WorkspaceError, match=f"cannot read {source}: No such file"),
    ):
        c.namespace("acme.alice").import_(source)
