"""MemdirMemoryStore under pydantic-ai-harness's real ``Memory`` capability (offline models)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import Memory
from pydantic_ai_harness.memory import (
    InMemoryStore,
    MemoryConflictError,
    MemoryOperation,
    MemoryOperationConflictError,
    MemoryStore,
    SearchableMemoryStore,
)

from memdir import Workspace
from memdir.adapters.pydantic_ai import MemdirMemoryStore, MemoryPathError
from memdir.tools import memory_search
from memdir.tools._core import close_shared_indexes

SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


@pytest.fixture
def store(any_ws: Workspace) -> Iterator[MemdirMemoryStore]:
    yield MemdirMemoryStore(any_ws)
    close_shared_indexes()


def scripted(calls: list[tuple[str, dict[str, Any]]], seen: list[list[ModelMessage]]) -> Any:
    """A model that makes ``calls`` one per step, then answers with the tool results it got."""
    results: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                results.append(str(part.content))
        step = len(seen) - 1
        if step < len(calls):
            name, args = calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{step}")])
        return ModelResponse(parts=[TextPart("\n".join(results) or "Done.")])

    return respond


def agent_for(store: MemdirMemoryStore, respond: Any) -> Agent[None, str]:
    return Agent(FunctionModel(respond), capabilities=[Memory(store)])


def test_is_a_harness_memory_store(store: MemdirMemoryStore) -> None:
    assert isinstance(store, MemoryStore) and isinstance(store, SearchableMemoryStore)


async def test_the_agent_writes_reads_searches_and_deletes_workspace_memory(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    seen: list[list[ModelMessage]] = []
    calls = [
        ("write_memory", {"content": "- The user prefers metric units."}),
        ("write_memory", {"content": f"Deploy key is {SECRET}", "file": "deploys.md"}),
        ("write_memory", {"content": "Staging runs on Tuesdays.", "file": "deploys"}),
        ("read_memory", {"file": "deploys.md"}),
        ("search_memory", {"query": "staging tuesdays"}),
        ("write_memory", {"content": "Scratch.", "file": "scratch.md"}),
        ("delete_memory", {"file": "scratch.md"}),
    ]
    result = await agent_for(store, scripted(calls, seen)).run("Remember these.")

    assert any_ws.read_text("MEMORY.md") == "- The user prefers metric units.\n"
    deploys = any_ws.read_text("memory/deploys.md")
    assert SECRET not in deploys and "[REDACTED:" in deploys
    assert deploys.endswith("Staging runs on Tuesdays.\n")
    assert "[REDACTED:" in result.output and "Staging runs on Tuesdays." in result.output
    assert "'file': 'deploys.md'" in result.output  # the search found it
    returned = [p.content for m in seen[-1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returned) == len(calls) and SECRET not in str(returned)
    # memdir's own tools see what the agent wrote, at once
    assert "Staging runs on Tuesdays." in memory_search("staging", workspace=any_ws)
    # a deleted note is kept, never lost
    assert any_ws.stat("memory/scratch.md") is None
    kept = [rel for rel, _ in any_ws.walk("memory/.history/deleted")]
    assert len(kept) == 1 and any_ws.read_text(kept[0]) == "Scratch.\n"
    assert await store.list_paths("main/", limit=10) == ["main/MEMORY.md", "main/deploys.md"]


async def test_a_second_run_sees_the_first_runs_memory_injected(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    first: list[list[ModelMessage]] = []
    calls = [("write_memory", {"content": "- The codename is Orchid."})]
    await agent_for(store, scripted(calls, first)).run("Remember the codename.")

    second: list[list[ModelMessage]] = []
    await agent_for(MemdirMemoryStore(any_ws), scripted([], second)).run("What is the codename?")
    request = second[0][0]
    assert isinstance(request, ModelRequest)
    injected = "".join(str(getattr(p, "content", "")) for p in request.parts)
    assert "<memory>" in injected and "The codename is Orchid." in injected


async def test_a_stale_version_is_a_conflict_and_changes_nothing(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    created = await store.write("main/notes.md", "one\n", expected_version=None)
    assert created.version is not None and not created.existed
    with pytest.raises(MemoryConflictError):
        await store.write("main/notes.md", "two\n", expected_version=None)
    any_ws.write_text("memory/notes.md", "edited by hand\n")  # outside the store
    with pytest.raises(MemoryConflictError):
        await store.write("main/notes.md", "two\n", expected_version=created.version)
    with pytest.raises(MemoryConflictError):
        await store.delete("main/notes.md", expected_version=created.version)
    assert any_ws.read_text("memory/notes.md") == "edited by hand\n"
    current = await store.read("main/notes.md", max_chars=100)
    assert current is not None and current.content == "edited by hand\n"
    updated = await store.write("main/notes.md", "two\n", expected_version=current.version)
    assert updated.existed and any_ws.read_text("memory/notes.md") == "two\n"


async def test_a_retried_operation_is_replayed_and_a_reused_id_refused(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    op = MemoryOperation(id="op-1", fingerprint="f-1")
    first = await store.write("main/notes.md", "once\n", expected_version=None, operation=op)
    assert not first.replayed
    # another process (a fresh store) retries the same call: nothing is applied twice
    again = MemdirMemoryStore(any_ws)
    replay = await again.write("main/notes.md", "once\n", expected_version=None, operation=op)
    assert replay.replayed and replay.version == first.version
    assert await again.get_operation(op) == replay
    assert any_ws.read_text("memory/notes.md") == "once\n"
    read = await again.read("main/notes.md", max_chars=100)
    assert read is not None and read.operation_id == "op-1"
    with pytest.raises(MemoryOperationConflictError):
        await again.write(
            "main/notes.md",
            "other\n",
            expected_version=first.version,
            operation=MemoryOperation(id="op-1", fingerprint="f-2"),
        )
    assert await again.get_operation(MemoryOperation(id="op-2", fingerprint="f")) is None
    assert any_ws.read_text("memory/notes.md") == "once\n"


async def test_reads_and_listings_are_bounded(store: MemdirMemoryStore) -> None:
    await store.write("main/MEMORY.md", "x" * 50, expected_version=None)
    for name in ("b", "a", "c"):
        await store.write(f"main/{name}.md", name, expected_version=None)
    read = await store.read("main/MEMORY.md", max_chars=10)
    assert read is not None and read.content == "x" * 10 and read.truncated
    full = await store.read("main/MEMORY.md", max_chars=100)
    assert full is not None and full.version == read.version and not full.truncated
    assert await store.list_paths("main/", limit=2) == ["main/MEMORY.md", "main/a.md"]
    assert await store.list_paths("main/b", limit=10) == ["main/b.md"]
    assert await store.list_paths("other/", limit=10) == []
    assert await store.read("main/missing.md", max_chars=10) is None


CJK_NOTE = "上周我们讨论了数据库的迁移方案，决定先迁移订单表。\n"


async def test_chinese_search_finds_what_the_harness_lexical_search_misses(
    store: MemdirMemoryStore,
) -> None:
    await store.write("main/plans.md", CJK_NOTE, expected_version=None)
    await store.write("main/other.md", "Lunch is at noon.\n", expected_version=None)
    bounds: dict[str, int] = {
        "limit": 10,
        "max_files": 100,
        "max_chars": 4_000,
        "max_file_chars": 65_536,
    }
    harness = InMemoryStore({"main/plans.md": CJK_NOTE})
    assert (await harness.search("main/", "数据库迁移", **bounds)).matches == []

    found = await store.search("main/", "数据库迁移", **bounds)
    assert [m.path for m in found.matches] == ["main/plans.md"]
    assert "数据库的迁移方案" in found.matches[0].snippet and found.scanned == 2

    # the bounds hold: total characters, and only the first max_file_chars of a file
    small = await store.search("main/", "数据库迁移", **{**bounds, "max_chars": 15})
    assert len("plans.md" + small.matches[0].snippet) <= 15 and small.truncated
    late = "filler line\n" * 20 + "订单表的索引要重建。\n"
    await store.write("main/late.md", late, expected_version=None)
    capped = await store.search("main/", "订单表", **{**bounds, "max_file_chars": 100})
    assert "main/late.md" not in [m.path for m in capped.matches] and capped.truncated
    assert await store.search("other/", "数据库迁移", **bounds) == (
        await store.search("main/nope/", "数据库迁移", **bounds)
    )


async def test_the_agents_search_tool_ranks_chinese_memory(store: MemdirMemoryStore) -> None:
    await store.write("main/plans.md", CJK_NOTE, expected_version=None)
    seen: list[list[ModelMessage]] = []
    calls = [("search_memory", {"query": "数据库迁移"})]
    result = await agent_for(store, scripted(calls, seen)).run("迁移计划是什么?")
    assert "'file': 'plans.md'" in result.output and "订单表" in result.output


@pytest.mark.parametrize(
    "path",
    [
        "main/../MEMORY.md",
        "/etc/passwd",
        "main//notes.md",
        "main/no\x00te.md",
        "main/.pydantic-ai-memory.json",
        "MEMORY.md",
        "alice/main/MEMORY.md",
        "main/archive/2025-01-02.md",
        "main/notes.txt",
    ],
)
async def test_hostile_paths_are_refused(store: MemdirMemoryStore, path: str) -> None:
    with pytest.raises(MemoryPathError):
        await store.write(path, "x", expected_version=None)
    with pytest.raises(MemoryPathError):
        await store.read(path, max_chars=10)


async def test_ledgers_are_read_but_never_rewritten_and_memory_md_never_deleted(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    any_ws.write_text("memory/2026-11-30.md", "\n## Flush\n- a fact\n")
    ledger = await store.read("main/2026-11-30.md", max_chars=100)
    assert ledger is not None and "- a fact" in ledger.content
    with pytest.raises(MemoryPathError, match=r"main/2026-11-30\.md is a daily ledger"):
        await store.write("main/2026-11-30.md", "gone", expected_version=ledger.version)
    await store.write("main/MEMORY.md", "- keep\n", expected_version=None)
    with pytest.raises(MemoryPathError, match="main notebook"):
        await store.delete("main/MEMORY.md", expected_version=None)
    assert any_ws.read_text("memory/2026-11-30.md") == "\n## Flush\n- a fact\n"


async def test_a_symlink_out_of_the_memory_is_refused(tmp_path: Path, ws: Workspace) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("private\n", encoding="utf-8")
    os.symlink(outside, ws.root / "memory" / "link.md")
    store = MemdirMemoryStore(ws)
    with pytest.raises(MemoryPathError):
        await store.read("main/link.md", max_chars=100)
    with pytest.raises(MemoryPathError):
        await store.write("main/link.md", "overwrite", expected_version=None)
    assert outside.read_text(encoding="utf-8") == "private\n"

    # the model is told to pick another name; the run goes on
    seen: list[list[ModelMessage]] = []
    calls = [("read_memory", {"file": "link.md"})]
    result = await agent_for(store, scripted(calls, seen)).run("Read link.md")
    assert "resolves outside the store directory" in result.output
    assert "private" not in str(seen)
    close_shared_indexes()


async def test_the_previous_memory_md_is_kept_when_it_is_rewritten(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    first = await store.write("main/MEMORY.md", "- old\n", expected_version=None)
    await store.write("main/MEMORY.md", "- new\n", expected_version=first.version)
    kept = [rel for rel, _ in any_ws.walk("memory/.history") if "/deleted/" not in rel]
    assert [any_ws.read_text(rel) for rel in kept if rel.endswith(".md")] == ["- old\n"]


def _appender(where: str, worker: int, rounds: int, barrier: Any) -> None:
    """Append ``rounds`` lines to MEMORY.md the way ``write_memory`` does: read, CAS, retry."""
    import asyncio

    async def run() -> None:
        store = MemdirMemoryStore(Workspace(where, tz="UTC"))
        for n in range(rounds):
            op = MemoryOperation(id=f"w{worker}-{n}", fingerprint="append")
            while True:
                current = await store.read("main/MEMORY.md", max_chars=1_000_000)
                text = (current.content if current else "") + f"- worker {worker} line {n}\n"
                version = current.version if current else None
                try:
                    await store.write(
                        "main/MEMORY.md", text, expected_version=version, operation=op
                    )
                    break
                except MemoryConflictError:
                    continue

    barrier.wait(timeout=60)
    asyncio.run(run())
    close_shared_indexes()


def test_writers_in_several_processes_lose_no_update(any_ws: Workspace) -> None:
    import multiprocessing as mp

    where = any_ws.url or str(any_ws.root)
    ctx = mp.get_context("spawn")
    workers, rounds = 3, 5
    barrier = ctx.Barrier(workers)
    procs = [
        ctx.Process(target=_appender, args=(where, w, rounds, barrier)) for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=180)
    assert [proc.exitcode for proc in procs] == [0] * workers
    lines = any_ws.read_text("MEMORY.md").splitlines()
    expected = {f"- worker {w} line {n}" for w in range(workers) for n in range(rounds)}
    assert sorted(lines) == sorted(expected)  # every update once, none lost
    close_shared_indexes()


async def test_a_change_interrupted_after_its_receipt_is_settled_from_the_file(
    store: MemdirMemoryStore, any_ws: Workspace
) -> None:
    from memdir.adapters.pydantic_ai._memory_receipts import RECEIPTS, content_version

    any_ws.write_text("memory/landed.md", "landed\n")
    pending = [
        {"id": "landed", "fingerprint": "f", "kind": "write", "rel": "memory/landed.md",
         "version": content_version("landed\n"), "existed": False, "done": False},
        {"id": "lost", "fingerprint": "f", "kind": "write", "rel": "memory/lost.md",
         "version": content_version("never written\n"), "existed": False, "done": False},
    ]  # fmt: skip
    any_ws.write_text(RECEIPTS, json.dumps(pending))
    landed = await store.get_operation(MemoryOperation(id="landed", fingerprint="f"))
    assert landed is not None and landed.replayed  # the change is there: not applied again
    assert await store.get_operation(MemoryOperation(id="lost", fingerprint="f")) is None
    # the lost one may run again, and does
    op = MemoryOperation(id="lost", fingerprint="f")
    done = await store.write("main/lost.md", "never written\n", expected_version=None, operation=op)
    assert not done.replayed and any_ws.read_text("memory/lost.md") == "never written\n"


async def test_one_store_per_namespace_keeps_users_apart(any_ws: Workspace) -> None:
    stores = {user: MemdirMemoryStore(any_ws, namespace=user) for user in ("alice", "bob")}
    for user in ("alice", "bob"):
        calls = [("write_memory", {"content": f"- {user} likes tea."})]
        agent: Agent[str, str] = Agent(
            FunctionModel(scripted(calls, [])),
            deps_type=str,
            capabilities=[Memory(store_resolver=lambda ctx: stores[ctx.deps])],
        )
        await agent.run("Remember.", deps=user)
    assert any_ws.namespaced("alice").read_text("MEMORY.md") == "- alice likes tea.\n"
    assert any_ws.namespaced("bob").read_text("MEMORY.md") == "- bob likes tea.\n"
    assert any_ws.read_text("MEMORY.md") == ""
    close_shared_indexes()
